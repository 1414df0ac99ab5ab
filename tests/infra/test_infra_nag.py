"""cdk-nag AwsSolutions: no unacknowledged finding, and every acknowledgement says why."""

from __future__ import annotations

import pytest

pytest.importorskip("aws_cdk")
pytest.importorskip("cdk_nag")


@pytest.mark.parametrize("variant", ["aws", "lean", "localstack", "aurora"])
def test_no_unacknowledged_finding(variant, synthesize):
    from infra.nag import unacknowledged_findings

    assert unacknowledged_findings(synthesize(variant).stack) == []


def test_the_app_fails_to_synthesize_with_a_finding(tmp_path, cdk_context):
    """build_app registers the pack as a validation plugin: an unacknowledged finding stops synthesis."""
    from aws_cdk import aws_sqs as sqs

    from infra import build_app

    app, stack = build_app(context=cdk_context, outdir=str(tmp_path))
    sqs.Queue(stack, "UnencryptedProbe", encryption=sqs.QueueEncryption.UNENCRYPTED)
    with pytest.raises(Exception, match="AwsSolutions-SQS"):
        app.synth()


@pytest.mark.parametrize("variant", ["aws", "lean", "localstack", "aurora"])
def test_every_acknowledgement_has_a_reason(variant, synthesize):
    from aws_cdk import Validations

    key = Validations.ACKNOWLEDGED_RULES_METADATA_KEY
    acknowledged = {}
    for construct in synthesize(variant).stack.node.find_all():
        for entry in construct.node.metadata:
            if entry.type == key:
                for rule, reason in entry.data.items():
                    if "AwsSolutions" in rule:
                        acknowledged[(construct.node.path, rule)] = reason
    assert acknowledged
    for (path, rule), reason in acknowledged.items():
        assert len(reason.split()) >= 8, f"{rule} at {path}: {reason!r}"


def test_a_finding_is_reported():
    """The check is live: an unencrypted, unacknowledged queue is reported."""
    from aws_cdk import App, Stack
    from aws_cdk import aws_sqs as sqs

    from infra.nag import unacknowledged_findings

    stack = Stack(App(), "Probe")
    sqs.Queue(stack, "Queue")
    assert any(line.startswith("AwsSolutions-SQS4") for line in unacknowledged_findings(stack))
