"""Names shared by the infrastructure code and the functions: environment-variable keys,
handler entry points, metric names. One place, so a rename cannot leave the two apart."""

import functools
import re

SERVICE_NAME = "scheduler"
METRICS_NAMESPACE = "Scheduler"

# Environment-variable keys read by ``scheduler.settings.Settings``.
ENV_DATABASE_URL = "SCHEDULER_DATABASE_URL"
ENV_DATABASE_SECRET_ARN = "SCHEDULER_DATABASE_SECRET_ARN"
ENV_DATABASE_HOST = "SCHEDULER_DATABASE_HOST"
ENV_DATABASE_NAME = "SCHEDULER_DATABASE_NAME"
ENV_EXECUTOR_FUNCTION = "SCHEDULER_EXECUTOR_FUNCTION"
ENV_PRECISION = "SCHEDULER_PRECISION"
ENV_DEFAULT_BROKER_URL = "SCHEDULER_DEFAULT_BROKER_URL"
ENV_DEFAULT_BROKER_SECRET_ARN = "SCHEDULER_DEFAULT_BROKER_SECRET_ARN"
# Who may use the default broker: comma-separated owner patterns (``*`` any text); unset: anyone.
ENV_DEFAULT_BROKER_OWNERS = "SCHEDULER_DEFAULT_BROKER_OWNERS"
ENV_KMS_KEY_ID = "SCHEDULER_KMS_KEY_ID"
ENV_KMS_MAC_KEY_ID = "SCHEDULER_KMS_MAC_KEY_ID"
ENV_LOCAL_KEY_FILE = "SCHEDULER_LOCAL_KEY_FILE"
ENV_ALLOW_PRIVATE_TARGETS = "SCHEDULER_ALLOW_PRIVATE_TARGETS"
ENV_TARGET_ALLOW_LIST = "SCHEDULER_TARGET_ALLOW_LIST"
ENV_EXECUTION_RETENTION_DAYS = "SCHEDULER_EXECUTION_RETENTION_DAYS"
ENV_CURSOR_SECRET = "SCHEDULER_CURSOR_SECRET"
ENV_CURSOR_SECRET_ARN = "SCHEDULER_CURSOR_SECRET_ARN"
# The LocalStack variant only: the access keys whose SigV4 signatures the api function verifies
# itself (LocalStack's API Gateway checks none), fetched at cold start like the cursor key.
ENV_API_CREDENTIALS_SECRET_ARN = "SCHEDULER_API_CREDENTIALS_SECRET_ARN"
ENV_DATABASE_APP_SECRET_ARN = "SCHEDULER_DATABASE_APP_SECRET_ARN"
ENV_DATABASE_CA_BUNDLE = "SCHEDULER_DATABASE_CA_BUNDLE"
ENV_EXECUTOR_CONCURRENCY = "SCHEDULER_EXECUTOR_CONCURRENCY"
# Whether the executor can reach AWS's APIs (STS and the target services): "false" where it has no
# route out (a deployment with nat_gateways=0), and the API refuses AWS targets and SigV4-signed
# HTTP targets (each assumes its role through STS) at write time.
ENV_AWS_TARGETS = "SCHEDULER_AWS_TARGETS"
# The target types that call AWS as a job's role (refused where ENV_AWS_TARGETS is false).
AWS_TARGET_TYPES = ("lambda", "sqs", "sns", "eventbridge")
# The short fields of AWS targets, at most (characters): an SNS subject (SNS: "less than 100
# characters"), an event's source and detail-type, a FIFO message group id. A job's are checked
# at write time as they render (schema.aws_models), an alert's fitted once rendered (core.alerts).
AWS_SHORT_FIELD_LIMITS = {"subject": 99, "source": 256, "detail_type": 128, "message_group_id": 128}
# "true": the handlers trace with the X-Ray SDK (Powertools' Tracer: a subsegment per invocation and
# per AWS or HTTP call it makes). Off by default: loading the SDK costs a cold start about 140 ms
# (docs/benchmarks.md); Lambda's active tracing records each invocation without it.
ENV_XRAY_SDK = "SCHEDULER_XRAY_SDK"
# Powertools' own keys: the infrastructure scopes both to the stack.
ENV_SERVICE_NAME = "POWERTOOLS_SERVICE_NAME"
ENV_METRICS_NAMESPACE = "POWERTOOLS_METRICS_NAMESPACE"
# The login role of the functions: a member of its database's own application role (migration
# 0011, named by the database's scheduler_data_role()). APP_DATA_ROLE is the server-wide role that
# migration 0004 made and 0011 takes every privilege from.
APP_DATABASE_USER = "scheduler_app"
APP_DATA_ROLE = "scheduler_data"
# The fan-out's own function name (it invokes itself to start helpers) and the most fan-outs at once.
ENV_FANOUT_FUNCTION = "SCHEDULER_FANOUT_FUNCTION"
ENV_MAX_FANOUTS = "SCHEDULER_MAX_FANOUTS"
# The most claims one executor invoke carries under a backlog (1: one job per invocation), and
# the ceiling a deployment may set it to (the executor delivers a group's claims at once).
ENV_CLAIMS_PER_INVOKE = "SCHEDULER_CLAIMS_PER_INVOKE"
# The console's URL, for the links of alerts ({{console_url}}); local mode sets its own.
ENV_CONSOLE_URL = "SCHEDULER_CONSOLE_URL"
DEFAULT_CLAIMS_PER_INVOKE = 25
MAX_CLAIMS_PER_INVOKE = 50

# Handler entry points, relative to the ``functions/`` code asset.
API_HANDLER = "api_handler.handler"
FANOUT_HANDLER = "fanout_handler.handler"
EXECUTOR_HANDLER = "executor_handler.handler"
MIGRATE_HANDLER = "migrate_handler.handler"

# EMF metric names (the dashboard and alarms in infra/ refer to these).
METRIC_EXECUTIONS = "Executions"  # dimension: status
METRIC_LATENESS_MS = "LatenessMs"  # dimension: trigger; the scheduler's own (a slot's wait left out)
METRIC_SLOT_WAIT_MS = "SlotWaitMs"  # a limited delivery's wait for its target's slot, once it has it
METRIC_CLAIMED = "Claimed"
METRIC_DISPATCHED = "Dispatched"
METRIC_DUE_BACKLOG = "DueBacklog"
METRIC_OLDEST_DUE_AGE_S = "OldestDueAgeSeconds"
METRIC_FANOUT_DURATION_MS = "FanoutDurationMs"
METRIC_FANOUT_HELPERS = "FanoutHelpers"  # helper fan-outs started by a primary
METRIC_SKIPPED = "SkippedOccurrences"  # dimension: reason; occurrences on record as skipped by the runner
METRIC_HANDED_BACK = "HandedBackForSlot"  # limited deliveries an executor handed back (key full)
METRIC_RESUMED = "PausesEnded"  # jobs the fan-out resumed at their pause's until
METRIC_ALERT_DELIVERIES = "AlertDeliveries"  # dimension: status (delivered, pending: tried again, failed)
METRIC_PARTITIONS_SKIPPED = "PartitionsSkipped"  # partition upkeep steps left to the next run (a lock was busy)

# Limits and markers of the API contract (the API, its local HTTP adapter and the models).
MAX_REQUEST_BODY_BYTES = 1024 * 1024  # the request body limit (API Gateway itself stops at 10 MB)
SECRET_MASK = "***"  # a secret as answered; sent back, it keeps the stored one

# The fan-out function's name is fixed per stack (``<stack name>-<suffix>``), so its environment and
# its policy can name it without referring to the function itself (no circular reference).
FANOUT_FUNCTION_SUFFIX = "fanout"

# Headers of every API answer: each carries a tenant's data or says something about it, so no
# cache keeps it (a shared proxy, the browser's disk), and no browser reads it as anything but its
# declared type.
ANSWER_HEADERS = {"Cache-Control": "no-store", "X-Content-Type-Options": "nosniff"}

# The field of a target that a manual run's body replaces (and its vars render into), by type.
OVERRIDE_BODY_FIELDS = {
    "http": "body",
    "amqp": "body",
    "lambda": "payload",
    "sqs": "body",
    "sns": "message",
    "eventbridge": "detail",
}

# Header names whose values are credentials (case-insensitive; a part of the name suffices): a
# target's own headers and a manual run's are secrets by these names, sealed when stored, shown as
# "***", kept when "***" is sent back, scrubbed from answers' excerpts, dropped on a redirect to
# another origin.
SECRET_HEADER_PATTERN = re.compile(
    r"authorization|cookie|token|secret|passw|api-?key|apikey|credential|signature", re.IGNORECASE
)


@functools.lru_cache(maxsize=1024)
def is_secret_header(name: str) -> bool:
    """Whether a header's value is a secret (a credential-like name: ``SECRET_HEADER_PATTERN``).
    Asked at every delivery of a target with headers, about the same few names: remembered."""
    return SECRET_HEADER_PATTERN.search(name) is not None
