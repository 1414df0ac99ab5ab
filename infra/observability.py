"""The dashboard and the alarms, published to one SNS topic (optionally e-mailed).

The scheduler's own metrics are EMF metrics written by Powertools: namespace
``C.METRICS_NAMESPACE``, dimension ``service`` = ``C.SERVICE_NAME`` (Powertools' default), and
``status`` on ``C.METRIC_EXECUTIONS``.
"""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_apigateway as apigw
from aws_cdk import aws_cloudwatch as cw
from aws_cdk import aws_cloudwatch_actions as cw_actions
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_rds as rds
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from infra.config import Config
from infra.shared import C

MINUTE = Duration.minutes(1)
FIVE_MINUTES = Duration.minutes(5)
# Final statuses of an execution, as the executor reports them.
STATUSES = ("succeeded", "failed", "timed_out", "lost")
FAILED_STATUSES = ("failed", "timed_out", "lost")

BACKLOG_AGE_LIMIT_SECONDS = 120
FAILURE_RATE_PERCENT = 25
FAILURE_RATE_MIN_EXECUTIONS = 5
RDS_CPU_PERCENT = 80


def scheduler_metric(
    name: str, statistic: str = "Sum", *, period: Duration = MINUTE, label: str | None = None, **dimensions: str
) -> cw.Metric:
    """One of the scheduler's EMF metrics."""
    return cw.Metric(
        namespace=C.METRICS_NAMESPACE,
        metric_name=name,
        dimensions_map={"service": C.SERVICE_NAME, **dimensions},
        statistic=statistic,
        period=period,
        label=label,
    )


def execution_metrics(period: Duration, statuses: tuple[str, ...] = STATUSES) -> dict[str, cw.IMetric]:
    """Executions per status, keyed by a math-expression identifier."""
    return {
        status: scheduler_metric(C.METRIC_EXECUTIONS, period=period, label=status, status=status) for status in statuses
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
        database: rds.DatabaseInstance | None,
        proxy: rds.DatabaseProxy | None,
    ) -> None:
        super().__init__(scope, construct_id)
        self.topic = sns.Topic(self, "AlarmTopic", display_name="Scheduler alarms", enforce_ssl=True)
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
        self.alarms["DeadLetterQueueNotEmpty"] = dlq_depth.create_alarm(
            self,
            "DeadLetterQueueNotEmpty",
            alarm_description="Executor invocations failed or expired before running (see the DLQ messages).",
            threshold=1,
            evaluation_periods=1,
            comparison_operator=cw.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
            treat_missing_data=cw.TreatMissingData.NOT_BREACHING,
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
        self.alarms["FailureRate"] = failure_rate.create_alarm(
            self,
            "FailureRate",
            alarm_description=f"More than {FAILURE_RATE_PERCENT}% of executions failed, timed out or were lost "
            "for 10 minutes.",
            threshold=FAILURE_RATE_PERCENT,
            evaluation_periods=2,
            comparison_operator=cw.ComparisonOperator.GREATER_THAN_THRESHOLD,
            treat_missing_data=cw.TreatMissingData.NOT_BREACHING,
        )
        oldest_due = scheduler_metric(C.METRIC_OLDEST_DUE_AGE_S, "Maximum", label="oldest due job age (s)")
        self.alarms["BacklogAge"] = oldest_due.create_alarm(
            self,
            "BacklogAge",
            alarm_description=f"A due job has waited more than {BACKLOG_AGE_LIMIT_SECONDS} s for 3 minutes: the "
            "runner is not keeping up.",
            threshold=BACKLOG_AGE_LIMIT_SECONDS,
            evaluation_periods=3,
            comparison_operator=cw.ComparisonOperator.GREATER_THAN_THRESHOLD,
            treat_missing_data=cw.TreatMissingData.NOT_BREACHING,
        )
        self.alarms["FanoutErrors"] = fanout.metric_errors(period=FIVE_MINUTES, statistic="Sum").create_alarm(
            self,
            "FanoutErrors",
            alarm_description="The fan-out failed at least twice in 5 minutes: due jobs are not being claimed.",
            threshold=2,
            evaluation_periods=1,
            comparison_operator=cw.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
            treat_missing_data=cw.TreatMissingData.NOT_BREACHING,
        )
        self.alarms["FanoutNotRunning"] = fanout.metric_invocations(period=FIVE_MINUTES, statistic="Sum").create_alarm(
            self,
            "FanoutNotRunning",
            alarm_description="The once-a-minute tick invoked the fan-out fewer than 3 times in 5 minutes.",
            threshold=3,
            evaluation_periods=2,
            comparison_operator=cw.ComparisonOperator.LESS_THAN_THRESHOLD,
            treat_missing_data=cw.TreatMissingData.BREACHING,
        )
        if database is not None:
            self.alarms["DatabaseCpu"] = database.metric_cpu_utilization(period=FIVE_MINUTES).create_alarm(
                self,
                "DatabaseCpu",
                alarm_description=f"Database CPU above {RDS_CPU_PERCENT}% for 15 minutes.",
                threshold=RDS_CPU_PERCENT,
                evaluation_periods=3,
                comparison_operator=cw.ComparisonOperator.GREATER_THAN_THRESHOLD,
                treat_missing_data=cw.TreatMissingData.MISSING,
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
        self.dashboard.add_widgets(
            cw.GraphWidget(
                title="Executions per minute by status",
                left=list(execution_metrics(MINUTE).values()),
                stacked=True,
                width=8,
            ),
            cw.GraphWidget(title="Failures per minute", left=[failures], width=8),
            cw.GraphWidget(
                title="Lateness (ms)",
                left=[
                    scheduler_metric(C.METRIC_LATENESS_MS, "p50", label="p50"),
                    scheduler_metric(C.METRIC_LATENESS_MS, "p99", label="p99"),
                ],
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
                connections.append(
                    cw.Metric(
                        namespace="AWS/RDS",
                        metric_name="ClientConnections",
                        dimensions_map={"ProxyName": proxy.db_proxy_name},
                        statistic="Maximum",
                        period=MINUTE,
                        label="proxy clients",
                    )
                )
            self.dashboard.add_widgets(
                cw.GraphWidget(
                    title="Database CPU (%)",
                    left=[database.metric_cpu_utilization(period=MINUTE)],
                    left_annotations=[cw.HorizontalAnnotation(value=RDS_CPU_PERCENT, label="alarm")],
                    width=12,
                ),
                cw.GraphWidget(title="Database connections", left=connections, width=12),
            )
