"""cdk-nag (3.x) wiring: the AwsSolutions pack as a validation plugin, and acknowledgements.

Every acknowledgement names one finding and says why it is accepted; it sits next to the
resource it concerns (``acknowledge(construct, {...})``) and covers that construct's subtree.
"""

from __future__ import annotations

from aws_cdk import Acknowledgment, App, Stack, Validations
from cdk_nag import AwsSolutionsChecks
from constructs import IConstruct

# Findings of the same kind on every function: what the AWS-managed Lambda policies and X-Ray give.
MANAGED_POLICY = "AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/{name}]"
LAMBDA_BASIC = MANAGED_POLICY.format(name="AWSLambdaBasicExecutionRole")
LAMBDA_VPC = MANAGED_POLICY.format(name="AWSLambdaVPCAccessExecutionRole")
WILDCARD_RESOURCE = "AwsSolutions-IAM5[Resource::*]"


def add_checks(app: App) -> None:
    """Run the AwsSolutions rules on every synthesis; an unacknowledged finding fails it."""
    Validations.of(app).add_plugins(AwsSolutionsChecks(app))


def acknowledge(construct: IConstruct, findings: dict[str, str]) -> None:
    """Accept each finding (``rule id`` or ``rule id[finding]``) below ``construct``, with its reason."""
    Validations.of(construct).acknowledge(
        *(Acknowledgment(id=rule, reason=reason) for rule, reason in findings.items())
    )


def acknowledge_lambda_role(construct: IConstruct, *, in_vpc: bool, tracing: bool = True) -> None:
    """The findings every function's execution role raises, with their reasons."""
    findings = {
        LAMBDA_BASIC: "AWS-managed policy that only lets the function write its own CloudWatch logs.",
    }
    if in_vpc:
        findings[LAMBDA_VPC] = "AWS-managed policy Lambda needs to attach the function's network interfaces in the VPC."
    if tracing:
        findings[WILDCARD_RESOURCE] = (
            "Active tracing: X-Ray's PutTraceSegments and PutTelemetryRecords support no resource-level "
            "permissions, so they need Resource *."
        )
    acknowledge(construct, findings)


def unacknowledged_findings(stack: Stack) -> list[str]:
    """The AwsSolutions findings in ``stack`` that carry no acknowledgement, as readable lines."""
    report = AwsSolutionsChecks().validate_scope(stack)
    lines = []
    for violation in report.violations:
        for resource in violation.violating_resources:
            lines.append(f"{violation.rule_name} at {resource.construct_path or resource.resource_logical_id}")
    return sorted(lines)
