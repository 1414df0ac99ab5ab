"""The shapes of the AWS names a target holds (role, function, topic and event bus ARNs, SQS
queue URLs) and what they tell: partition and region. Only the standard library: the API's
models check targets with these, and the delivery reads the region of a resource with them
without loading pydantic.
"""

from __future__ import annotations

import os
import re
from urllib.parse import urlsplit

_PARTITION = r"aws|aws-cn|aws-us-gov|aws-iso|aws-iso-[a-z]|aws-eusc"
_REGION = r"[a-z]{2}(?:-gov|-iso[a-z]?)?-[a-z]+-\d{1,2}"
_ACCOUNT = r"\d{12}"
ROLE_ARN = re.compile(
    rf"^arn:(?P<partition>{_PARTITION}):iam::(?P<account>{_ACCOUNT}):"
    r"role/(?:[\x21-\x7e]{0,510}/)?[\w+=,.@-]{1,64}\Z",
    re.ASCII,
)
FUNCTION_ARN = re.compile(
    rf"^arn:(?P<partition>{_PARTITION}):lambda:(?P<region>{_REGION}):"
    rf"(?P<account>{_ACCOUNT}):function:[A-Za-z0-9_-]{{1,64}}"
    r"(?::(?:\$LATEST|[A-Za-z0-9_-]{1,128}))?\Z"
)
TOPIC_ARN = re.compile(
    rf"^arn:(?P<partition>{_PARTITION}):sns:(?P<region>{_REGION}):(?P<account>{_ACCOUNT}):"
    r"(?P<name>[A-Za-z0-9_-]{1,256}(?:\.fifo)?)\Z"
)
EVENT_BUS_ARN = re.compile(
    rf"^arn:(?P<partition>{_PARTITION}):events:(?P<region>{_REGION}):"
    rf"(?P<account>{_ACCOUNT}):event-bus/[A-Za-z0-9/._-]{{1,256}}\Z"
)
QUEUE_URL = re.compile(
    rf"^https://(?:sqs\.(?P<region>{_REGION})\.amazonaws\.com(?:\.cn)?|"
    rf"(?P<legacy>{_REGION})\.queue\.amazonaws\.com(?:\.cn)?)/"
    rf"(?P<account>{_ACCOUNT})/(?P<name>[A-Za-z0-9_-]{{1,80}}(?:\.fifo)?)\Z"
)
#: A region name alone (such as ``eu-west-1``).
REGION = re.compile(rf"^{_REGION}\Z")
# The path of a queue URL an emulator answers (LocalStack, moto): /<account>/<queue>.
_EMULATED_QUEUE_PATH = re.compile(rf"^/(?P<account>{_ACCOUNT})/(?P<name>[A-Za-z0-9_-]{{1,80}}(?:\.fifo)?)\Z")
# LocalStack's host names for SQS (its default queue URL form names the region).
_LOCALSTACK_SQS_HOST = re.compile(rf"^(?:sqs\.(?P<region>{_REGION})\.)?localhost\.localstack\.cloud\Z")
_DEFAULT_PORTS = {"http": 80, "https": 443}


def sqs_endpoint() -> str | None:
    """The SQS endpoint this process is configured with instead of AWS (``AWS_ENDPOINT_URL_SQS``,
    else ``AWS_ENDPOINT_URL``, as botocore reads them): an emulator's, or None."""
    return os.environ.get("AWS_ENDPOINT_URL_SQS") or os.environ.get("AWS_ENDPOINT_URL") or None


def _default_region() -> str:
    return os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1"


def _origin(url: str) -> tuple[str, str, int] | None:
    try:
        parts = urlsplit(url)
        port = parts.port or _DEFAULT_PORTS.get(parts.scheme)
    except ValueError:
        return None
    if not parts.hostname or port is None:
        return None
    return parts.scheme, parts.hostname.lower(), port


def queue_url_region(url: str, endpoint: str | None = None) -> str | None:
    """The region of the SQS queue ``url``, or None when it is not a queue URL.

    In AWS only SQS's own URLs are queue URLs. A process configured with an emulator's endpoint
    (``endpoint``, default :func:`sqs_endpoint`) also takes the URLs its ``CreateQueue``
    answers: ``<endpoint>/<account>/<queue>`` (LocalStack by address, moto), and LocalStack's
    ``http://sqs.<region>.localhost.localstack.cloud:<endpoint port>/<account>/<queue>``; their
    region is the one named, else this process's (``AWS_REGION``).
    """
    match = QUEUE_URL.fullmatch(url)
    if match:
        return match.group("region") or match.group("legacy")
    endpoint = endpoint if endpoint is not None else sqs_endpoint()
    if not endpoint or any(ch.isspace() for ch in url):
        return None
    parts = urlsplit(url)
    wanted, given = _origin(endpoint), _origin(url)
    if (
        wanted is None
        or given is None
        or parts.username is not None
        or parts.query
        or parts.fragment
        or not _EMULATED_QUEUE_PATH.fullmatch(parts.path)
        or given[2] != wanted[2]
    ):
        return None
    if given[:2] == wanted[:2]:
        return _default_region()
    localstack = _LOCALSTACK_SQS_HOST.fullmatch(given[1])
    if localstack and given[0] in _DEFAULT_PORTS:
        return localstack.group("region") or _default_region()
    return None


def partition_of(arn: str) -> str:
    """The partition of an ARN (``aws`` in ``arn:aws:...``)."""
    return arn.split(":", 2)[1]


def region_of(resource: str) -> str:
    """The region named by a resource ARN or a queue URL (validated shapes only)."""
    if resource.startswith(("https://", "http://")):
        region = queue_url_region(resource)
        if region is None:
            raise ValueError("not a queue URL")
        return region
    return resource.split(":", 4)[3]


def partition_of_region(region: str) -> str:
    """The partition of a commercial, China or GovCloud region (what a queue URL can name)."""
    if region.startswith("cn-"):
        return "aws-cn"
    return "aws-us-gov" if region.startswith("us-gov-") else "aws"
