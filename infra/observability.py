"""The dashboard and the alarms, published to one SNS topic (optionally e-mailed).

The scheduler's own metrics are EMF metrics written by the functions: namespace
``Config.metrics_namespace``, dimension ``service`` = ``Config.service_name`` (both scoped to the
stack), plus ``status`` on ``C.METRIC_EXECUTIONS`` and ``C.METRIC_ALERT_DELIVERIES``, ``trigger``
on ``C.METRIC_LATENESS_MS`` and ``reason`` on ``C.METRIC_SKIPPED`` (graphed by a search, a line per
reason). CloudWatch matches exact dimension sets: ``tests/infra/test_infra_metric_contract.py``
checks that every metric read here is one the code emits.
"""

from __future__ import annotations

from aws_cdk import Duration, Names
from aws_cdk import aws_apigateway as apigw
from aws_cdk import aws_cloudwatch as cw
from aws_cdk import aws_cloudwatch_actions as cw_actions
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_rds as rds
from aws_cdk import aws_secretsmanager as secretsmanager
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from infra.config import Config
from infra.shared import C

MINUTE = Duration.minutes(1)
FIVE_MINUTES = Duration.minutes(5)
# The comparisons of the alarms, and what missing data is to them.
AT_LEAST = cw.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD
ABOVE = cw.ComparisonOperator.GREATER_THAN_THRESHOLD
BELOW = cw.ComparisonOperator.LESS_THAN_THRESHOLD
NOT_BREACHING = cw.TreatMissingData.NOT_BREACHING
BREACHING = cw.TreatMissingData.BREACHING
MISSING = cw.TreatMissingData.MISSING
# Final statuses of an execution, as the executor reports them (the failure rate's), and those
# graphed: with the occurrences skipped (missed) in place of a delivery.
STATUSES = ("succeeded", "failed", "timed_out", "lost")
FAILED_STATUSES = ("failed", "timed_out", "lost")
GRAPHED_STATUSES = (*STATUSES, "skipped")
# An alert's status after an attempt (the ``status`` dimension of AlertDeliveries): ``pending``
# is tried again, ``failed`` given up.
ALERT_STATUSES = ("delivered", "pending", "failed")

BACKLOG_AGE_LIMIT_SECONDS = 120
FAILURE_RATE_PERCENT = 25
FAILURE_RATE_MIN_EXECUTIONS = 5
RDS_CPU_PERCENT = 80
# Lateness of scheduled starts (trigger=schedule), p99 over a minute, three minutes running.
LATENESS_P99_LIMIT_MS = {"second": 30_000, "minute": 90_000}
API_5XX_PER_5_MINUTES = 5
API_LATENCY_P99_MS = 5_000
EXECUTOR_ERRORS_PER_5_MINUTES = 5
EXECUTOR_THROTTLES_PER_5_MINUTES = 5
# 10% of the 20 GiB allocated at first: storage autoscaling should have acted well before.
RDS_FREE_STORAGE_BYTES = 2 * 1024**3
RDS_CPU_CREDITS = 20
# The proxy waits this long (average, microseconds) for a database connection: the pool is spent.
PROXY_BORROW_LATENCY_US = 500_000
# Aurora Serverless v2: capacity used, in % of db_max_acu (ACUUtilization), and free memory.
AURORA_ACU_PERCENT = 90
ACU_MEMORY_BYTES = 2 * 1024**3  # each ACU brings about 2 GiB of memory
AURORA_FREEABLE_MEMORY_FRACTION = 0.1
# Amazon MQ for RabbitMQ: memory used, in % of the broker's limit (RabbitMQ blocks publishers at
# 100%), and free disk, in multiples of its free-disk limit (blocked at 1).
BROKER_MEMORY_PERCENT = 80
BROKER_DISK_FREE_RATIO = 2
# The partitions' upkeep left steps to the next run in every run of this long (PartitionsSkipped's
# minimum above 0): a lock that never comes free. The days ahead are made 3 days early.
PARTITIONS_SKIPPED_PERIOD = Duration.hours(1)
PARTITIONS_SKIPPED_HOURS = 24
# Triggers of an execution (the ``trigger`` dimension of LatenessMs; a backfill counts none).
TRIGGERS = ("schedule", "retry", "manual", "chain")
# The alarm-status row at the top of the dashboard: every alarm, a few per line.
ALARM_STATUS_TITLE = "Alarms"
ALARM_STATUS_COLUMNS = 4


class SchedulerMetrics:
    """The scheduler's EMF metrics of one stack (its namespace and service name)."""

    def __init__(self, namespace: str, service: str) -> None:
        self.namespace = namespace
        self.service = service

    def metric(
        self,
        name: str,
        statistic: str = "Sum",
        *,
        period: Duration = MINUTE,
        label: str | None = None,
        **dimensions: str,
    ) -> cw.Metric:
        """One of the scheduler's EMF metrics: ``service`` plus ``dimensions``, exactly."""
        return cw.Metric(
            namespace=self.namespace,
            metric_name=name,
            dimensions_map={"service": self.service, **dimensions},
            statistic=statistic,
            period=period,
            label=label,
        )

    def executions(self, period: Duration, statuses: tuple[str, ...] = STATUSES) -> dict[str, cw.IMetric]:
        """Executions per status, keyed by a math-expression identifier."""
        return {
            status: self.metric(C.METRIC_EXECUTIONS, period=period, label=status, status=status) for status in statuses
        }


class Observability(Construct):
    """CloudWatch dashboard, alarms and the alarm topic."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: Config,
        fanout: lambda_.Function,
        executor: lambda_.Function,
        api_function: lambda_.Function,
        rest_api: apigw.RestApi,
        dead_letter_queue: sqs.IQueue,
        database: rds.DatabaseInstance | rds.DatabaseCluster | None,
        proxy: rds.DatabaseProxy | None,
        rotations: list[secretsmanager.SecretRotation] | None = None,
        broker_name: str | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        metrics = self.metrics = SchedulerMetrics(config.metrics_namespace, config.service_name)
        scheduler_metric = metrics.metric
        execution_metrics = metrics.executions
        self.topic = sns.Topic(self, "AlarmTopic", display_name=f"{config.stack_name} alarms", enforce_ssl=True)
        if config.alarm_email:
            self.topic.add_subscription(subscriptions.EmailSubscription(config.alarm_email))
        action = cw_actions.SnsAction(self.topic)

        failures = cw.MathExpression(
            expression=" + ".join(f"FILL({status}, 0)" for status in FAILED_STATUSES),
            using_metrics=execution_metrics(MINUTE, FAILED_STATUSES),
            label="failed + timed out + lost",
            period=MINUTE,
        )
        dlq_depth = dead_letter_queue.metric_approximate_number_of_messages_visible(period=MINUTE, statistic="Maximum")

        self.alarms: dict[str, cw.Alarm] = {}
        self._alarm(
            "DeadLetterQueueNotEmpty",
            dlq_depth,
            "Executor invocations failed or expired before running (see the DLQ messages).",
            1,
            AT_LEAST,
        )
        rate_metrics = {f"s_{k}": v for k, v in execution_metrics(FIVE_MINUTES).items()}
        failed_sum = " + ".join(f"FILL(s_{status}, 0)" for status in FAILED_STATUSES)
        total_sum = " + ".join(f"FILL(s_{status}, 0)" for status in STATUSES)
        failure_rate = cw.MathExpression(
            # No rate below a handful of executions: one failure out of two is not an incident.
            expression=f"IF(({total_sum}) >= {FAILURE_RATE_MIN_EXECUTIONS}, 100 * ({failed_sum}) / ({total_sum}), 0)",
            using_metrics=rate_metrics,
            label="failure rate (%)",
            period=FIVE_MINUTES,
        )
        self._alarm(
            "FailureRate",
            failure_rate,
            f"More than {FAILURE_RATE_PERCENT}% of executions failed, timed out or were lost for 10 minutes.",
            FAILURE_RATE_PERCENT,
            ABOVE,
            periods=2,
        )
        oldest_due = scheduler_metric(C.METRIC_OLDEST_DUE_AGE_S, "Maximum", label="oldest due job age (s)")
        self._alarm(
            "BacklogAge",
            oldest_due,
            f"A due job has waited more than {BACKLOG_AGE_LIMIT_SECONDS} s for 3 minutes: the "
            "runner is not keeping up.",
            BACKLOG_AGE_LIMIT_SECONDS,
            ABOVE,
            periods=3,
        )
        self._alarm(
            "FanoutErrors",
            fanout.metric_errors(period=FIVE_MINUTES, statistic="Sum"),
            "The fan-out failed at least twice in 5 minutes: due jobs are not being claimed.",
            2,
            AT_LEAST,
        )
        self._alarm(
            "FanoutNotRunning",
            fanout.metric_invocations(period=FIVE_MINUTES, statistic="Sum"),
            "The once-a-minute tick invoked the fan-out fewer than 3 times in 5 minutes.",
            3,
            BELOW,
            # One period of 5 minutes and one datapoint, as the description says (two periods made it 10).
            datapoints=1,
            missing=BREACHING,
        )
        lateness_limit = LATENESS_P99_LIMIT_MS[config.precision]
        lateness_p99 = scheduler_metric(
            C.METRIC_LATENESS_MS, "p99", label="lateness p99 (ms), scheduled", trigger="schedule"
        )
        self._alarm(
            "LatenessP99",
            lateness_p99,
            f"Scheduled executions started more than {lateness_limit} ms late (p99) for 3 minutes.",
            lateness_limit,
            ABOVE,
            periods=3,
        )
        self._alarm(
            "AlertDeliveriesFailed",
            scheduler_metric(C.METRIC_ALERT_DELIVERIES, period=FIVE_MINUTES, status="failed"),
            "An alert was given up (its target refused it, or kept failing through every attempt): an incident "
            "went unannounced. The executor's log names it (alert <rule> <event> of job <name>: failed).",
            1,
            AT_LEAST,
        )
        self._alarm(
            "PartitionsSkipped",
            scheduler_metric(C.METRIC_PARTITIONS_SKIPPED, "Minimum", period=PARTITIONS_SKIPPED_PERIOD),
            f"For {PARTITIONS_SKIPPED_HOURS} hours every fan-out run left steps of the executions' partition upkeep "
            "to the next (a lock never came free: a long transaction on executions?); the days ahead run out "
            "3 days after it began.",
            0,
            ABOVE,
            periods=PARTITIONS_SKIPPED_HOURS,
        )
        self._alarm(
            "Api5xx",
            rest_api.metric_server_error(period=FIVE_MINUTES, statistic="Sum"),
            f"The API answered {API_5XX_PER_5_MINUTES} or more 5xx in 5 minutes.",
            API_5XX_PER_5_MINUTES,
            AT_LEAST,
        )
        self._alarm(
            "ApiLatency",
            rest_api.metric_latency(period=FIVE_MINUTES, statistic="p99"),
            f"API latency p99 above {API_LATENCY_P99_MS} ms for 15 minutes.",
            API_LATENCY_P99_MS,
            ABOVE,
            periods=3,
        )
        self._alarm(
            "ExecutorErrors",
            executor.metric_errors(period=FIVE_MINUTES, statistic="Sum"),
            "The executor failed (an infrastructure fault, not a target's failure) "
            f"{EXECUTOR_ERRORS_PER_5_MINUTES} or more times in 5 minutes; see the dead-letter queue.",
            EXECUTOR_ERRORS_PER_5_MINUTES,
            AT_LEAST,
        )
        self._alarm(
            "ExecutorThrottles",
            executor.metric_throttles(period=FIVE_MINUTES, statistic="Sum"),
            f"The executor was throttled {EXECUTOR_THROTTLES_PER_5_MINUTES} or more times in 5 "
            "minutes: its reserved concurrency (-c executor_concurrency) is spent.",
            EXECUTOR_THROTTLES_PER_5_MINUTES,
            AT_LEAST,
        )
        for index, rotation in enumerate(rotations or []):
            name = "RotationFailures" if index == 0 else f"RotationFailures{index + 1}"
            self._alarm(
                name,
                rotation_errors(rotation),
                "A Secrets Manager rotation of the database credentials failed: the password "
                "did not change (see the rotation function's logs and the secret's AWSPENDING stage).",
                1,
                AT_LEAST,
            )
        if proxy is not None:
            borrow = proxy_metric(proxy, "DatabaseConnectionsBorrowLatency", "Average", period=FIVE_MINUTES)
            self._alarm(
                "ProxyConnections",
                borrow,
                "RDS Proxy waited on average more than "
                f"{PROXY_BORROW_LATENCY_US // 1000} ms for a database connection over 10 minutes: its "
                "connections to the instance are spent (lower -c executor_concurrency or size the instance up).",
                PROXY_BORROW_LATENCY_US,
                ABOVE,
                periods=2,
            )
        if isinstance(database, rds.DatabaseInstance):
            self._alarm(
                "DatabaseFreeStorage",
                database.metric_free_storage_space(period=FIVE_MINUTES, statistic="Minimum"),
                f"Less than {RDS_FREE_STORAGE_BYTES // 1024**3} GiB of database storage free "
                "for 15 minutes (storage autoscaling stops at max_allocated_storage).",
                RDS_FREE_STORAGE_BYTES,
                BELOW,
                periods=3,
                missing=MISSING,
            )
            if config.db_instance_type.split(".")[0].startswith("t"):
                self._alarm(
                    "DatabaseCpuCredits",
                    database.metric("CPUCreditBalance", period=FIVE_MINUTES, statistic="Minimum"),
                    f"The burstable database instance has fewer than {RDS_CPU_CREDITS} CPU "
                    "credits left: it runs at baseline (or bills surplus credits) soon.",
                    RDS_CPU_CREDITS,
                    BELOW,
                    periods=3,
                    missing=MISSING,
                )
        if isinstance(database, rds.DatabaseCluster):
            self._aurora_alarms(database, config)
        if broker_name is not None:
            self._broker_alarms(broker_name)
        if database is not None:
            self._alarm(
                "DatabaseCpu",
                database.metric_cpu_utilization(period=FIVE_MINUTES),
                f"Database CPU above {RDS_CPU_PERCENT}% for 15 minutes.",
                RDS_CPU_PERCENT,
                ABOVE,
                periods=3,
                missing=MISSING,
            )
        for alarm in self.alarms.values():
            alarm.add_alarm_action(action)
            alarm.add_ok_action(action)

        self.dashboard = cw.Dashboard(self, "Dashboard", default_interval=Duration.hours(3))
        self.dashboard.add_widgets(
            cw.TextWidget(
                markdown="# Scheduler\nExecutions, the runner's claim loop, the functions, the API and the database. "
                "Alarms go to the stack's alarm topic.",
                width=24,
                height=2,
            )
        )
        # First thing on the page: the state of every alarm (red, grey or green), sorted so that
        # the alarms in ALARM come first.
        alarm_rows = -(-len(self.alarms) // ALARM_STATUS_COLUMNS)
        self.dashboard.add_widgets(
            cw.AlarmStatusWidget(
                title=ALARM_STATUS_TITLE,
                alarms=list(self.alarms.values()),
                sort_by=cw.AlarmStatusWidgetSortBy.STATE_UPDATED_TIMESTAMP,
                width=24,
                height=1 + alarm_rows,
            )
        )
        self.dashboard.add_widgets(
            cw.GraphWidget(
                title="Executions per minute by status",
                left=list(execution_metrics(MINUTE, GRAPHED_STATUSES).values()),
                stacked=True,
                width=8,
            ),
            cw.GraphWidget(title="Failures per minute", left=[failures], width=8),
            cw.GraphWidget(
                title="Lateness (ms)",
                left=[
                    scheduler_metric(C.METRIC_LATENESS_MS, "p50", label="scheduled p50", trigger="schedule"),
                    lateness_p99,
                    scheduler_metric(C.METRIC_LATENESS_MS, "p99", label="retries p99", trigger="retry"),
                    scheduler_metric(C.METRIC_LATENESS_MS, "p99", label="manual runs p99", trigger="manual"),
                    scheduler_metric(C.METRIC_LATENESS_MS, "p99", label="chained runs p99", trigger="chain"),
                ],
                left_annotations=[cw.HorizontalAnnotation(value=lateness_limit, label="alarm")],
                width=8,
            ),
        )
        self.dashboard.add_widgets(
            cw.GraphWidget(
                title="Claimed vs dispatched per minute",
                left=[
                    scheduler_metric(C.METRIC_CLAIMED, label="claimed"),
                    scheduler_metric(C.METRIC_DISPATCHED, label="dispatched"),
                ],
                right=[scheduler_metric(C.METRIC_FANOUT_HELPERS, label="helper fan-outs started")],
                width=8,
            ),
            cw.GraphWidget(
                title="Due backlog and oldest due age",
                left=[scheduler_metric(C.METRIC_DUE_BACKLOG, "Maximum", label="due jobs")],
                right=[oldest_due],
                right_annotations=[cw.HorizontalAnnotation(value=BACKLOG_AGE_LIMIT_SECONDS, label="alarm")],
                width=8,
            ),
            cw.GraphWidget(
                title="Fan-out duration (ms)",
                left=[
                    scheduler_metric(C.METRIC_FANOUT_DURATION_MS, "Average", label="claim loop, average"),
                    scheduler_metric(C.METRIC_FANOUT_DURATION_MS, "Maximum", label="claim loop, max"),
                    fanout.metric_duration(period=MINUTE, statistic="Maximum", label="Lambda duration, max"),
                ],
                width=8,
            ),
        )
        self.dashboard.add_widgets(
            cw.GraphWidget(
                title="Executor errors and throttles",
                left=[
                    executor.metric_errors(period=MINUTE, label="errors"),
                    executor.metric_throttles(period=MINUTE, label="throttles"),
                    fanout.metric_errors(period=MINUTE, label="fan-out errors"),
                ],
                width=8,
            ),
            cw.GraphWidget(
                title="Executor duration (ms)",
                left=[
                    executor.metric_duration(period=MINUTE, statistic="p50", label="p50"),
                    executor.metric_duration(period=MINUTE, statistic="p99", label="p99"),
                    executor.metric_duration(period=MINUTE, statistic="Maximum", label="max"),
                ],
                width=8,
            ),
            cw.GraphWidget(
                title="Dead-letter queue depth",
                left=[dlq_depth],
                width=8,
            ),
        )
        self.dashboard.add_widgets(*self._runner_widgets(metrics))
        self.dashboard.add_widgets(
            cw.GraphWidget(
                title="API 4xx / 5xx",
                left=[
                    rest_api.metric_client_error(period=MINUTE, label="4xx"),
                    rest_api.metric_server_error(period=MINUTE, label="5xx"),
                    api_function.metric_errors(period=MINUTE, label="function errors"),
                ],
                width=12,
            ),
            cw.GraphWidget(
                title="API latency (ms)",
                left=[
                    rest_api.metric_latency(period=MINUTE, statistic="p50", label="p50"),
                    rest_api.metric_latency(period=MINUTE, statistic="p99", label="p99"),
                ],
                width=12,
            ),
        )
        if database is not None:
            connections: list[cw.IMetric] = [database.metric_database_connections(period=MINUTE, label="database")]
            if proxy is not None:
                connections.append(proxy_metric(proxy, "ClientConnections", "Maximum", label="proxy clients"))
            self.dashboard.add_widgets(
                cw.GraphWidget(
                    title="Database CPU (%)",
                    left=[database.metric_cpu_utilization(period=MINUTE)],
                    left_annotations=[cw.HorizontalAnnotation(value=RDS_CPU_PERCENT, label="alarm")],
                    width=12,
                ),
                cw.GraphWidget(title="Database connections", left=connections, width=12),
            )
        if proxy is not None:
            self.dashboard.add_widgets(
                cw.GraphWidget(
                    title="RDS Proxy borrow latency (us)",
                    left=[
                        proxy_metric(proxy, "DatabaseConnectionsBorrowLatency", "Average", label="average"),
                        proxy_metric(proxy, "DatabaseConnectionsBorrowLatency", "Maximum", label="max"),
                    ],
                    left_annotations=[cw.HorizontalAnnotation(value=PROXY_BORROW_LATENCY_US, label="alarm")],
                    width=12,
                ),
                # A pinned session keeps its database connection to itself until it ends (the
                # functions turn server-side prepared statements off through the proxy for that):
                # a lasting count here is connections the proxy cannot share.
                cw.GraphWidget(
                    title="RDS Proxy pinned sessions",
                    left=[
                        proxy_metric(
                            proxy, "DatabaseConnectionsCurrentlySessionPinned", "Maximum", label="pinned sessions"
                        )
                    ],
                    width=12,
                ),
            )
        if broker_name is not None:
            memory, disk = broker_usage(broker_name, MINUTE)
            self.dashboard.add_widgets(
                cw.GraphWidget(
                    title="Amazon MQ memory used (% of its limit)",
                    left=[memory],
                    left_annotations=[cw.HorizontalAnnotation(value=BROKER_MEMORY_PERCENT, label="alarm")],
                    width=12,
                ),
                cw.GraphWidget(
                    title="Amazon MQ free disk (x its limit)",
                    left=[disk],
                    left_annotations=[cw.HorizontalAnnotation(value=BROKER_DISK_FREE_RATIO, label="alarm")],
                    width=12,
                ),
            )
        if isinstance(database, rds.DatabaseCluster):
            self.dashboard.add_widgets(
                cw.GraphWidget(
                    title="Database capacity (ACUs) and memory",
                    left=[
                        database.metric_serverless_database_capacity(
                            period=MINUTE, statistic="Maximum", label="capacity (ACUs)"
                        )
                    ],
                    left_annotations=[cw.HorizontalAnnotation(value=config.db_max_acu, label="db_max_acu")],
                    right=[
                        database.metric_freeable_memory(
                            period=MINUTE, statistic="Minimum", label="freeable memory (bytes)"
                        )
                    ],
                    width=12,
                ),
                cw.GraphWidget(
                    title="Database capacity used (% of db_max_acu)",
                    left=[database.metric_acu_utilization(period=MINUTE, statistic="Maximum", label="ACU utilization")],
                    left_annotations=[cw.HorizontalAnnotation(value=AURORA_ACU_PERCENT, label="alarm")],
                    width=12,
                ),
            )

    def _runner_widgets(self, metrics: SchedulerMetrics) -> list[cw.IWidget]:
        """The runner's other figures, a row: the waits for a target's slot, the occurrences
        skipped and the pauses ended, the alerts sent, the partitions' upkeep left undone."""
        metric = metrics.metric
        skipped = cw.MathExpression(  # one line per reason, those there are (reasons may be added)
            expression=f'SEARCH(\'{{"{metrics.namespace}",reason,service}} MetricName="{C.METRIC_SKIPPED}" '
            f"service=\"{metrics.service}\"', 'Sum', 60)",
            using_metrics={},
            label="skipped: ${PROP('Dim.reason')}",
            period=MINUTE,
        )
        return [
            # A limited job's wait for its target's slot (its own limits): not in the lateness.
            cw.GraphWidget(
                title="Waits for a target's slot",
                left=[
                    metric(C.METRIC_SLOT_WAIT_MS, "p50", label="wait p50 (ms)"),
                    metric(C.METRIC_SLOT_WAIT_MS, "p99", label="wait p99 (ms)"),
                ],
                right=[metric(C.METRIC_HANDED_BACK, label="handed back, per minute")],
                width=6,
            ),
            cw.GraphWidget(
                title="Occurrences skipped, pauses ended (per minute)",
                left=[skipped],
                right=[metric(C.METRIC_RESUMED, label="pauses ended")],
                width=6,
            ),
            cw.GraphWidget(
                title="Alert deliveries per minute",
                left=[metric(C.METRIC_ALERT_DELIVERIES, label=status, status=status) for status in ALERT_STATUSES],
                width=6,
            ),
            cw.GraphWidget(
                title="Partition upkeep: steps left to the next run",
                left=[
                    metric(C.METRIC_PARTITIONS_SKIPPED, "Maximum", label="most in a run"),
                    metric(C.METRIC_PARTITIONS_SKIPPED, "Minimum", label="fewest in a run"),
                ],
                width=6,
            ),
        ]

    def _alarm(
        self,
        name: str,
        metric: cw.Metric | cw.MathExpression,
        description: str,
        threshold: float,
        comparison: cw.ComparisonOperator,
        *,
        periods: int = 1,
        datapoints: int | None = None,
        missing: cw.TreatMissingData = NOT_BREACHING,
    ) -> cw.Alarm:
        """An alarm on ``metric`` (construct id and key in ``self.alarms``: ``name``): ``threshold``
        crossed as ``comparison`` says for ``periods`` periods of the metric (``datapoints`` of
        them, when given), ``missing`` data counted as that."""
        alarm = metric.create_alarm(
            self,
            name,
            alarm_description=description,
            threshold=threshold,
            evaluation_periods=periods,
            datapoints_to_alarm=datapoints,
            comparison_operator=comparison,
            treat_missing_data=missing,
        )
        self.alarms[name] = alarm
        return alarm

    def _broker_alarms(self, broker_name: str) -> None:
        """RabbitMQ blocks every publisher (the executor's AMQP deliveries) once its memory use
        reaches its limit, or its free disk falls to its limit: alarm well before either."""
        memory, disk = broker_usage(broker_name, FIVE_MINUTES)
        self._alarm(
            "BrokerMemory",
            memory,
            f"The Amazon MQ broker used more than {BROKER_MEMORY_PERCENT}% of its memory limit "
            "for 15 minutes: at the limit RabbitMQ blocks publishers (AMQP deliveries wait, then time out).",
            BROKER_MEMORY_PERCENT,
            ABOVE,
            periods=3,
            missing=MISSING,
        )
        self._alarm(
            "BrokerDiskFree",
            disk,
            f"The Amazon MQ broker's free disk was less than {BROKER_DISK_FREE_RATIO} times its "
            "free-disk limit for 15 minutes: at the limit RabbitMQ blocks publishers (drain the queues).",
            BROKER_DISK_FREE_RATIO,
            BELOW,
            periods=3,
            missing=MISSING,
        )

    def _aurora_alarms(self, cluster: rds.DatabaseCluster, config: Config) -> None:
        """An Aurora Serverless v2 cluster has no storage to run out of and no CPU credits: what
        runs out is capacity (``db_max_acu``) and the memory that comes with it."""
        self._alarm(
            "DatabaseCapacity",
            cluster.metric_acu_utilization(period=FIVE_MINUTES, statistic="Average"),
            f"The Aurora cluster used more than {AURORA_ACU_PERCENT}% of its maximum capacity "
            f"({config.db_max_acu:g} ACUs) for 15 minutes: raise -c db_max_acu before it is the limit.",
            AURORA_ACU_PERCENT,
            ABOVE,
            periods=3,
            missing=MISSING,
        )
        # Serverless v2 reports the memory free at maximum capacity: little left means the cluster
        # is at db_max_acu and its working set no longer fits.
        memory_limit = aurora_freeable_memory_limit(config.db_max_acu)
        self._alarm(
            "DatabaseFreeableMemory",
            cluster.metric_freeable_memory(period=FIVE_MINUTES, statistic="Minimum"),
            f"Less than {memory_limit / 1024**3:.1f} GiB of the Aurora cluster's memory "
            "free at its maximum capacity for 15 minutes: raise -c db_max_acu.",
            memory_limit,
            BELOW,
            periods=3,
            missing=MISSING,
        )


def aurora_freeable_memory_limit(max_acu: float) -> int:
    """The FreeableMemory alarm threshold: 10% of the memory of ``max_acu`` ACUs."""
    return int(max_acu * ACU_MEMORY_BYTES * AURORA_FREEABLE_MEMORY_FRACTION)


def broker_metric(broker_name: str, name: str, statistic: str, period: Duration) -> cw.Metric:
    """An Amazon MQ for RabbitMQ metric of the whole broker (dimension ``Broker``, its name): of a
    cluster, the sum of its three nodes' (so a ratio of two is the nodes' together; Amazon MQ's
    per-node metrics carry a ``Node`` dimension whose names are known only once it runs)."""
    return cw.Metric(
        namespace="AWS/AmazonMQ",
        metric_name=name,
        dimensions_map={"Broker": broker_name},
        statistic=statistic,
        period=period,
    )


def broker_usage(broker_name: str, period: Duration) -> tuple[cw.MathExpression, cw.MathExpression]:
    """The broker's memory used in % of its limit, and its free disk in multiples of its limit."""
    memory = cw.MathExpression(
        expression="100 * used / limit",
        using_metrics={
            "used": broker_metric(broker_name, "RabbitMQMemUsed", "Maximum", period),
            "limit": broker_metric(broker_name, "RabbitMQMemLimit", "Minimum", period),
        },
        label="memory used (% of limit)",
        period=period,
    )
    disk = cw.MathExpression(
        expression="free / limit",
        using_metrics={
            "free": broker_metric(broker_name, "RabbitMQDiskFree", "Minimum", period),
            "limit": broker_metric(broker_name, "RabbitMQDiskFreeLimit", "Maximum", period),
        },
        label="free disk (x limit)",
        period=period,
    )
    return memory, disk


def proxy_metric(
    proxy: rds.DatabaseProxy, name: str, statistic: str, *, period: Duration = MINUTE, label: str | None = None
) -> cw.Metric:
    """An RDS Proxy metric of the whole proxy (dimension ``ProxyName`` alone)."""
    return cw.Metric(
        namespace="AWS/RDS",
        metric_name=name,
        dimensions_map={"ProxyName": proxy.db_proxy_name},
        statistic=statistic,
        period=period,
        label=label,
    )


def rotation_errors(rotation: secretsmanager.SecretRotation) -> cw.Metric:
    """Errors of a hosted rotation function: CDK names it after the rotation construct's unique id
    (its last 64 characters), which is known at synthesis."""
    unique = Names.unique_id(rotation)
    return cw.Metric(
        namespace="AWS/Lambda",
        metric_name="Errors",
        dimensions_map={"FunctionName": unique[-64:]},
        statistic="Sum",
        period=Duration.hours(1),
    )
