"""The shapes of the AWS names a target holds (role, function, topic and event bus ARNs, SQS
queue URLs) and what they tell: partition and region. Only the standard library: the API's
models check targets with these, and the delivery reads the region of a resource with them
without loading pydantic.
"""

from __future__ import annotations

import re

_PARTITION = r"aws|aws-cn|aws-us-gov|aws-iso|aws-iso-[a-z]|aws-eusc"
_REGION = r"[a-z]{2}(?:-gov|-iso[a-z]?)?-[a-z]+-\d{1,2}"
_ACCOUNT = r"\d{12}"
ROLE_ARN = re.compile(
    rf"^arn:(?P<partition>{_PARTITION}):iam::(?P<account>{_ACCOUNT}):"
    r"role/(?:[\x21-\x7e]{0,510}/)?[\w+=,.@-]{1,64}$",
    re.ASCII,
)
FUNCTION_ARN = re.compile(
    rf"^arn:(?P<partition>{_PARTITION}):lambda:(?P<region>{_REGION}):"
    rf"(?P<account>{_ACCOUNT}):function:[A-Za-z0-9_-]{{1,64}}"
    r"(?::(?:\$LATEST|[A-Za-z0-9_-]{1,128}))?$"
)
TOPIC_ARN = re.compile(
    rf"^arn:(?P<partition>{_PARTITION}):sns:(?P<region>{_REGION}):(?P<account>{_ACCOUNT}):"
    r"(?P<name>[A-Za-z0-9_-]{1,256}(?:\.fifo)?)$"
)
EVENT_BUS_ARN = re.compile(
    rf"^arn:(?P<partition>{_PARTITION}):events:(?P<region>{_REGION}):"
    rf"(?P<account>{_ACCOUNT}):event-bus/[A-Za-z0-9/._-]{{1,256}}$"
)
QUEUE_URL = re.compile(
    rf"^https://(?:sqs\.(?P<region>{_REGION})\.amazonaws\.com(?:\.cn)?|"
    rf"(?P<legacy>{_REGION})\.queue\.amazonaws\.com(?:\.cn)?)/"
    rf"(?P<account>{_ACCOUNT})/(?P<name>[A-Za-z0-9_-]{{1,80}}(?:\.fifo)?)$"
)
#: A region name alone (such as ``eu-west-1``).
REGION = re.compile(rf"^{_REGION}$")


def partition_of(arn: str) -> str:
    """The partition of an ARN (``aws`` in ``arn:aws:...``)."""
    return arn.split(":", 2)[1]


def region_of(resource: str) -> str:
    """The region named by a resource ARN or a queue URL (validated shapes only)."""
    match = QUEUE_URL.match(resource)
    if match:
        return match.group("region") or match.group("legacy")
    return resource.split(":", 4)[3]


def partition_of_region(region: str) -> str:
    """The partition of a commercial, China or GovCloud region (what a queue URL can name)."""
    if region.startswith("cn-"):
        return "aws-cn"
    return "aws-us-gov" if region.startswith("us-gov-") else "aws"
