"""AWS targets: a Lambda invoke, an SQS message, an SNS publish, an EventBridge event; and the
SigV4 signing of HTTP targets whose ``auth`` is ``sigv4``.

Every call is made with the credentials of the job's ``role_arn`` assumed for the job's owner
(:mod:`scheduler.targets.aws_credentials`); a delivery without an owner is refused. Placeholders
render in every text field. SQS and SNS carry the delivery's identity as String message
attributes (``Idempotency-Key``, ``X-Scheduler-Job-Id``, ``X-Scheduler-Execution-Id``,
``X-Scheduler-Scheduled-At``, ``X-Scheduler-Attempt``); for a FIFO queue or topic the
``Idempotency-Key`` is also the ``MessageDeduplicationId``, so the retries of one occurrence are
delivered once within SQS's five-minute deduplication window.

Classification (like HTTP): throttling, a 5xx and network errors are retryable; a timeout is
``timed_out``; any other AWS error (access denied, a missing resource, a refused payload) is
permanent. The error names the operation and the AWS error code
(``sqs SendMessage: AWS.SimpleQueueService.NonExistentQueue: ...``). An STS denial of the
``AssumeRole`` is permanent too; STS refusing the executor's own credentials (an invalid or
expired key, a skewed clock) is the scheduler's fault and retryable, as missing ones are. A ``RequestResponse`` Lambda invoke whose function failed is a
retryable failure (the function's 5xx) with an excerpt of its answer.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Callable
from typing import Any

from scheduler.core.aws_arns import partition_of, partition_of_region
from scheduler.targets.aws_credentials import (
    BudgetSpent,
    CredentialCache,
    OwnerNotUsable,
    RoleCredentials,
    default_cache,
)
from scheduler.targets.aws_views import AwsView, EventBridgeView, LambdaView, SigV4View, SnsView, SqsView, region
from scheduler.targets.results import (
    EXCERPT_LIMIT,
    FAILED,
    SUCCEEDED,
    Delivery,
    Outcome,
    TargetPolicy,
    permanent,
    redact_and_cut,
    timed_out,
    transient,
)

# Error codes AWS services use for throttling and for their own faults: another attempt may do.
TRANSIENT_CODES = frozenset(
    {
        "Throttling",
        "ThrottlingException",
        "ThrottledException",
        "Throttled",
        "TooManyRequestsException",
        "RequestLimitExceeded",
        "RequestThrottled",
        "RequestThrottledException",
        "SlowDown",
        "ProvisionedThroughputExceededException",
        "LimitExceededException",
        "KMSThrottlingException",
        "KMSThrottling",
        "KmsThrottled",
        "InternalError",
        "InternalFailure",
        "InternalServerError",
        "InternalErrorException",
        "ServiceException",
        "ServiceUnavailable",
        "ServiceUnavailableException",
        "Unavailable",
        "ResourceConflictException",
        "ResourceNotReadyException",  # a Lambda function being updated
        "EC2ThrottledException",
        "EC2UnexpectedException",
        "ENILimitReachedException",
        "IDPCommunicationError",
        "RequestTimeout",
        "RequestTimeoutException",
        "AWS.SimpleQueueService.RequestThrottled",
        "ExpiredToken",
        "ExpiredTokenException",
    }
)
# Error codes of STS refusing the executor's OWN credentials (a key rotated or mistyped, a clock
# skewed, its session expired): the scheduler's fault, not the job's, so another attempt may do,
# as when the executor has no credentials at all. ``AccessDenied`` (the role's trust policy) is
# the job's, and permanent.
EXECUTOR_CREDENTIAL_CODES = frozenset(
    {
        "InvalidClientTokenId",
        "SignatureDoesNotMatch",
        "IncompleteSignature",
        "RequestExpired",
        "ExpiredToken",
        "ExpiredTokenException",
        "UnrecognizedClientException",
        "MissingAuthenticationToken",
    }
)
_ERROR_TEXT_LIMIT = 500
# Bytes of a function's answer read: the excerpt and more, so that a secret (a session token)
# straddling the excerpt's end is whole when redacted, before the cut.
_READ_LIMIT = 3 * EXCERPT_LIMIT


def identity_attributes(delivery: Delivery) -> dict[str, dict[str, str]]:
    """The delivery headers as SQS/SNS String message attributes."""
    return {name: {"DataType": "String", "StringValue": value} for name, value in delivery.headers().items()}


def deliver_aws(
    target: AwsView, delivery: Delivery, policy: TargetPolicy, *, budget: float, cache: CredentialCache | None = None
) -> Outcome:
    """Deliver ``delivery`` to an AWS ``target`` (its text fields already rendered) within
    ``budget`` seconds. Never raises."""
    kind = target.type
    handler = _HANDLERS[kind]
    cache = cache or default_cache()
    operation = f"{_SERVICE[kind]} {_OPERATION[kind]}"
    secrets: list[str] = []
    try:
        got = _client(cache, _SERVICE[kind], region(target), target.role_arn, delivery, budget)
        if isinstance(got, Outcome):
            return got
        client, creds = got
        secrets.extend(creds.secrets)
        result = handler(client, target, delivery)
    except Exception as exc:
        result = classify(exc, operation, budget)
    if result.error or result.response_excerpt:
        result = Outcome(
            result.status,
            result.retryable,
            http_status=result.http_status,
            response_excerpt=redact_and_cut(result.response_excerpt, secrets, EXCERPT_LIMIT),
            error=redact_and_cut(result.error, secrets, _ERROR_TEXT_LIMIT),
            retry_after_seconds=result.retry_after_seconds,
        )
    return result


def _client(
    cache: CredentialCache, service: str, region: str, role_arn: str, delivery: Delivery, budget: float
) -> tuple[Any, RoleCredentials] | Outcome:
    """The client signing as the role for the delivery's owner and its credentials, or a failed
    result when the role cannot be assumed."""
    owner = delivery.owner
    if not owner:
        return permanent(
            "no owner known for this delivery: AWS targets are called only as a role assumed for the job's owner"
        )
    try:
        return cache.client(service, region, role_arn, owner, timeout=budget)
    except OwnerNotUsable as exc:
        return permanent(str(exc))
    except BudgetSpent as exc:
        return timed_out(f"sts AssumeRole: {exc} ({budget:g}s)")
    except Exception as exc:
        return classify_assume(exc, budget, role_arn)


def classify_assume(exc: BaseException, budget: float, role_arn: str) -> Outcome:
    """The result of an ``AssumeRole`` that raised: as :func:`classify`, except that STS
    refusing the executor's own credentials (:data:`EXECUTOR_CREDENTIAL_CODES`) is retryable,
    with an error that says so, when the role is in the executor's own partition (another
    partition's STS knows none of its credentials: the job's role cannot be used from here)."""
    from botocore.exceptions import ClientError

    outcome = classify(exc, "sts AssumeRole", budget)
    code = (exc.response.get("Error") or {}).get("Code") if isinstance(exc, ClientError) else None
    if code in EXECUTOR_CREDENTIAL_CODES and not _in_own_partition(role_arn):
        error = f"sts AssumeRole: the role is in the {partition_of(role_arn)} partition, which this executor's credentials do not reach ({code})"
        return permanent(error)
    if code in EXECUTOR_CREDENTIAL_CODES:
        detail = (outcome.error or "").removeprefix("sts AssumeRole: ")
        error = f"sts AssumeRole: STS refused the executor's own AWS credentials, not the job's role ({detail})"
        return Outcome(FAILED, True, http_status=outcome.http_status, error=error)
    return outcome


def _in_own_partition(role_arn: str) -> bool:
    """Whether ``role_arn`` is in the partition of the executor's region (``AWS_REGION``;
    unknown: taken as the same)."""
    region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
    return not region or partition_of(role_arn) == partition_of_region(region)


def classify(exc: BaseException, operation: str, budget: float) -> Outcome:
    """The result of an AWS call that raised: see the module documentation."""
    from botocore import exceptions as be

    if isinstance(exc, be.ClientError):
        error = exc.response.get("Error") or {}
        code = str(error.get("Code") or "Unknown")
        status = (exc.response.get("ResponseMetadata") or {}).get("HTTPStatusCode")
        retryable = code in TRANSIENT_CODES or (isinstance(status, int) and (status >= 500 or status == 429))
        message = str(error.get("Message") or "").strip()
        text = f"{operation}: {code}" + (f": {message}" if message else "")
        return Outcome(FAILED, retryable, http_status=status if isinstance(status, int) else None, error=text)
    if isinstance(exc, (be.ReadTimeoutError, be.ConnectTimeoutError)):
        return timed_out(f"{operation}: no answer within {budget:g}s")
    if isinstance(exc, (be.EndpointConnectionError, be.ConnectionClosedError, be.HTTPClientError)):
        return transient(f"{operation}: could not reach the service ({type(exc).__name__})")
    if isinstance(exc, be.NoCredentialsError):
        return transient(f"{operation}: the executor has no AWS credentials to assume the role with")
    if isinstance(exc, (be.ParamValidationError, ValueError, TypeError)):
        return permanent(f"{operation}: invalid request ({type(exc).__name__})")
    return transient(f"{operation}: failed ({type(exc).__name__})")


def _ok(response: dict, excerpt: dict | str | None) -> Outcome:
    status = (response.get("ResponseMetadata") or {}).get("HTTPStatusCode")
    text = excerpt if isinstance(excerpt, str) or excerpt is None else json.dumps(excerpt, separators=(",", ":"))
    return Outcome(SUCCEEDED, False, http_status=status, response_excerpt=text)


def _invoke_lambda(client: Any, target: LambdaView, delivery: Delivery) -> Outcome:
    response = client.invoke(
        FunctionName=target.function_arn,
        InvocationType=target.invocation_type,
        Payload=(target.payload or "{}").encode("utf-8"),
    )
    body = response.get("Payload")
    excerpt = None
    if body is not None:
        try:
            excerpt = body.read(_READ_LIMIT).decode("utf-8", errors="replace") or None
        finally:
            body.close()
    status = response.get("StatusCode")
    function_error = response.get("FunctionError")
    if function_error:
        return Outcome(
            FAILED,
            True,
            http_status=status,
            response_excerpt=excerpt,
            error=f"lambda Invoke: the function failed ({function_error})",
        )
    return Outcome(SUCCEEDED, False, http_status=status, response_excerpt=excerpt)


def _fifo_fields(target: SqsView | SnsView, delivery: Delivery, fifo: bool) -> dict[str, str]:
    if not fifo:
        return {}
    return {"MessageGroupId": target.message_group_id or "", "MessageDeduplicationId": delivery.idempotency_key}


def _send_sqs(client: Any, target: SqsView, delivery: Delivery) -> Outcome:
    url = target.queue_url
    response = client.send_message(
        QueueUrl=url,
        MessageBody=target.body or "",
        MessageAttributes=identity_attributes(delivery),
        **_fifo_fields(target, delivery, url.endswith(".fifo")),
    )
    return _ok(response, {k: response[k] for k in ("MessageId", "SequenceNumber") if k in response})


def _publish_sns(client: Any, target: SnsView, delivery: Delivery) -> Outcome:
    arn = target.topic_arn
    extra: dict[str, Any] = _fifo_fields(target, delivery, arn.endswith(".fifo"))
    if target.subject:
        extra["Subject"] = target.subject
    response = client.publish(
        TopicArn=arn, Message=target.message or "", MessageAttributes=identity_attributes(delivery), **extra
    )
    return _ok(response, {k: response[k] for k in ("MessageId", "SequenceNumber") if k in response})


def _put_event(client: Any, target: EventBridgeView, delivery: Delivery) -> Outcome:
    response = client.put_events(
        Entries=[
            {
                "EventBusName": target.event_bus_arn,
                "Source": target.source,
                "DetailType": target.detail_type,
                "Detail": target.detail or "{}",
            }
        ]
    )
    entry = (response.get("Entries") or [{}])[0]
    if response.get("FailedEntryCount") or entry.get("ErrorCode"):
        code = str(entry.get("ErrorCode") or "Unknown")
        message = str(entry.get("ErrorMessage") or "").strip()
        text = f"events PutEvents: {code}" + (f": {message}" if message else "")
        status = (response.get("ResponseMetadata") or {}).get("HTTPStatusCode")
        return Outcome(FAILED, code in TRANSIENT_CODES, http_status=status, error=text)
    return _ok(response, {"EventId": entry.get("EventId")})


_HANDLERS: dict[str, Callable[[Any, Any, Delivery], Outcome]] = {
    "lambda": _invoke_lambda,
    "sqs": _send_sqs,
    "sns": _publish_sns,
    "eventbridge": _put_event,
}
_SERVICE = {"lambda": "lambda", "sqs": "sqs", "sns": "sns", "eventbridge": "events"}
_OPERATION = {"lambda": "Invoke", "sqs": "SendMessage", "sns": "Publish", "eventbridge": "PutEvents"}


# ------------------------------------------------------------------ SigV4 for HTTP targets


class HttpSigner:
    """Signs an HTTP target's prepared request with SigV4 as the role assumed for the owner.

    ``secrets`` holds what must be scrubbed from the execution (the session's secret key and
    token) once :meth:`prepare` succeeded.
    """

    def __init__(self, auth: SigV4View, delivery: Delivery, cache: CredentialCache | None = None):
        self.service = auth.service
        self.region = auth.region
        self.role_arn = auth.role_arn
        self.delivery = delivery
        self.cache = cache or default_cache()
        self.credentials: Any = None
        self.secrets: list[str] = []

    def prepare(self, budget: float) -> Outcome | None:
        """Assume the role (cached) within ``budget`` seconds, the delivery's; a failed result
        when that is refused, fails or takes the whole budget."""
        owner = self.delivery.owner
        if not owner:
            return permanent("no owner known for this delivery: sigv4 signs only as a role assumed for the job's owner")
        try:
            self.credentials = self.cache.credentials(self.role_arn, owner, deadline=time.monotonic() + budget)
        except OwnerNotUsable as exc:
            return permanent(str(exc))
        except BudgetSpent as exc:
            return timed_out(f"sts AssumeRole: {exc} ({budget:g}s)")
        except Exception as exc:
            return classify_assume(exc, budget, self.role_arn)
        self.secrets = list(self.credentials.secrets)
        return None

    def sign(self, prepared: Any) -> None:
        """Add ``X-Amz-Content-SHA256`` (the body's hash, which Lambda function URLs want),
        ``Authorization``, ``X-Amz-Date`` and ``X-Amz-Security-Token`` to a
        ``requests.PreparedRequest`` (its final headers and body)."""
        from botocore.auth import SigV4Auth
        from botocore.awsrequest import AWSRequest
        from botocore.credentials import ReadOnlyCredentials

        creds = self.credentials
        for name in ("Authorization", "X-Amz-Date", "X-Amz-Security-Token", "X-Amz-Content-SHA256"):
            prepared.headers.pop(name, None)
        body = prepared.body if prepared.body is not None else b""
        body = body.encode("utf-8") if isinstance(body, str) else body
        prepared.headers["X-Amz-Content-SHA256"] = hashlib.sha256(body).hexdigest()
        request = AWSRequest(method=prepared.method, url=prepared.url, data=body, headers=dict(prepared.headers))
        request.context["payload_signing_enabled"] = True
        SigV4Auth(
            ReadOnlyCredentials(creds.access_key_id, creds.secret_access_key, creds.session_token),
            self.service,
            self.region,
        ).add_auth(request)
        for name in ("Authorization", "X-Amz-Date", "X-Amz-Security-Token"):
            prepared.headers[name] = request.headers[name]


def sigv4_signer(
    auth: SigV4View | None, delivery: Delivery, secrets: list[str], *, budget: float
) -> tuple[HttpSigner | None, Outcome | None]:
    """For an HTTP target's ``sigv4`` auth (``HttpView.sigv4``): its signer (the role assumed
    within ``budget`` seconds, its secrets added to ``secrets``); None without one; or a failed
    result when the role cannot be assumed in time."""
    if auth is None:
        return None, None
    signer = HttpSigner(auth, delivery)
    refused = signer.prepare(budget)
    if refused is not None:
        return None, refused
    secrets.extend(signer.secrets)
    return signer, None
