"""Functions, the tick, the dead-letter queue, the migrations resource and IAM."""

from __future__ import annotations

import re

import pytest

pytest.importorskip("aws_cdk")

from infra.shared import C, layer_build, migrations_hash

HANDLERS = (C.API_HANDLER, C.FANOUT_HANDLER, C.EXECUTOR_HANDLER, C.MIGRATE_HANDLER)
# Actions allowed on Resource "*": X-Ray has no resource-level permissions.
WILDCARD_RESOURCE_ACTIONS = {"xray:PutTraceSegments", "xray:PutTelemetryRecords"}


def statements(synth, handler: str) -> list[dict]:
    """The statements of the execution role's inline policies of the function with ``handler``."""
    _, props = synth.function(handler)
    role = props["Role"]["Fn::GetAtt"][0]
    found = []
    for policy in synth.resources("AWS::IAM::Policy").values():
        if {"Ref": role} in policy["Properties"]["Roles"]:
            found.extend(policy["Properties"]["PolicyDocument"]["Statement"])
    return found


def actions(statement: dict) -> list[str]:
    value = statement["Action"]
    return [value] if isinstance(value, str) else value


def test_functions_share_the_runtime_the_architecture_the_code_and_the_layer(aws):
    (layer_id,) = aws.resources("AWS::Lambda::LayerVersion")
    layer = aws.json["Resources"][layer_id]["Properties"]
    assert layer["CompatibleRuntimes"] == [f"python{layer_build.DEFAULT_PYTHON_VERSION}"]
    assert layer["CompatibleArchitectures"] == ["arm64"]
    codes = set()
    for handler in HANDLERS:
        _, props = aws.function(handler)
        assert props["Runtime"] == f"python{layer_build.DEFAULT_PYTHON_VERSION}"
        assert props["Architectures"] == ["arm64"]
        assert props["Layers"] == [{"Ref": layer_id}]
        assert props["TracingConfig"] == {"Mode": "Active"}
        codes.add(props["Code"]["S3Key"])
        env = props["Environment"]["Variables"]
        assert env["POWERTOOLS_SERVICE_NAME"] == f"{C.SERVICE_NAME}-Scheduler"  # scoped to the stack
        assert env["POWERTOOLS_METRICS_NAMESPACE"] == f"{C.METRICS_NAMESPACE}/Scheduler"
    assert len(codes) == 1, "one code asset for all four functions"


def test_the_x_ray_sdk_is_loaded_only_when_asked_for(aws, lean):
    for handler in HANDLERS:
        assert C.ENV_XRAY_SDK not in aws.function(handler)[1]["Environment"]["Variables"], handler
        _, props = lean.function(handler)
        assert props["Environment"]["Variables"][C.ENV_XRAY_SDK] == "true", handler
        assert props["TracingConfig"] == {"Mode": "Active"}


def test_every_function_logs_to_a_group_with_retention(aws):
    groups = aws.resources("AWS::Logs::LogGroup")
    for handler in HANDLERS:
        _, props = aws.function(handler)
        group = props["LoggingConfig"]["LogGroup"]["Ref"]
        assert groups[group]["Properties"]["RetentionInDays"] == 30, handler


def test_fanout_runs_past_its_minute_with_little_concurrency(aws, lean):
    _, props = aws.function(C.FANOUT_HANDLER)
    assert 60 < props["Timeout"] <= 120
    # Two overlapping minutes of fanout_max (4) fan-outs each, and one spare; 3 without helpers.
    assert props["ReservedConcurrentExecutions"] == 9
    assert lean.function(C.FANOUT_HANDLER)[1]["ReservedConcurrentExecutions"] == 3
    env = props["Environment"]["Variables"]
    assert env[C.ENV_PRECISION] == "second"
    executor_id, _ = aws.function(C.EXECUTOR_HANDLER)
    assert env[C.ENV_EXECUTOR_FUNCTION] == {"Ref": executor_id}
    assert env[C.ENV_EXECUTION_RETENTION_DAYS] == "30"
    assert lean.function(C.FANOUT_HANDLER)[1]["Environment"]["Variables"][C.ENV_PRECISION] == "minute"


def test_the_executor_has_the_retention_and_the_console_url_its_alert_sweep_uses(aws, lean):
    """The executor runs the alert sweep: it purges alerts after the executions' retention, and
    links them to the console when one is configured (-c console_url)."""
    env = aws.function(C.EXECUTOR_HANDLER)[1]["Environment"]["Variables"]
    assert env[C.ENV_EXECUTION_RETENTION_DAYS] == "30" and C.ENV_CONSOLE_URL not in env
    lean_env = lean.function(C.EXECUTOR_HANDLER)[1]["Environment"]["Variables"]
    assert lean_env[C.ENV_CONSOLE_URL] == "https://console.example.com/console/"


def test_timeouts_fit_the_work(aws):
    assert aws.function(C.API_HANDLER)[1]["Timeout"] < 29  # API Gateway's integration limit
    assert aws.function(C.EXECUTOR_HANDLER)[1]["Timeout"] == 900  # targets may take up to 900 s
    assert aws.function(C.MIGRATE_HANDLER)[1]["Timeout"] == 300


def test_executor_async_invocations_do_not_retry_and_fail_to_the_dead_letter_queue(aws):
    executor_id, _ = aws.function(C.EXECUTOR_HANDLER)
    (config,) = [
        c["Properties"]
        for c in aws.resources("AWS::Lambda::EventInvokeConfig").values()
        if c["Properties"]["FunctionName"] == {"Ref": executor_id}
    ]
    assert config["MaximumRetryAttempts"] == 0
    assert 60 <= config["MaximumEventAgeInSeconds"] <= 600
    (queue_id,) = aws.resources("AWS::SQS::Queue")
    assert config["DestinationConfig"]["OnFailure"]["Destination"] == {"Fn::GetAtt": [queue_id, "Arn"]}
    queue = aws.json["Resources"][queue_id]["Properties"]
    assert queue.get("SqsManagedSseEnabled", True) is not False
    sends = [s for s in statements(aws, C.EXECUTOR_HANDLER) if "sqs:SendMessage" in actions(s)]
    assert sends and all(s["Resource"] == {"Fn::GetAtt": [queue_id, "Arn"]} for s in sends)


def test_tick_runs_the_fanout_every_minute_after_the_migrations(aws):
    fanout_id, _ = aws.function(C.FANOUT_HANDLER)
    ((rule_id, rule),) = aws.resources("AWS::Events::Rule").items()
    assert rule["Properties"]["ScheduleExpression"] == "rate(1 minute)"
    assert rule["Properties"]["State"] == "ENABLED"
    (target,) = rule["Properties"]["Targets"]
    assert target["Arn"] == {"Fn::GetAtt": [fanout_id, "Arn"]}
    (migrations_id,) = aws.resources("Custom::SchedulerMigrations")
    assert migrations_id in rule["DependsOn"]


def fanout_own_arn(name: str) -> dict:
    return {
        "Fn::Join": [
            "",
            [
                "arn:",
                {"Ref": "AWS::Partition"},
                ":lambda:",
                {"Ref": "AWS::Region"},
                ":",
                {"Ref": "AWS::AccountId"},
                f":function:{name}",
            ],
        ]
    }


def test_fanout_may_invoke_the_executor_and_itself_and_nothing_else(aws, lean):
    executor_id, _ = aws.function(C.EXECUTOR_HANDLER)
    invokes = [s for s in statements(aws, C.FANOUT_HANDLER) if any(a.startswith("lambda:") for a in actions(s))]
    resources = [r for s in invokes for r in ([s["Resource"]] if isinstance(s["Resource"], dict) else s["Resource"])]
    assert {a for s in invokes for a in actions(s)} == {"lambda:InvokeFunction"}
    assert all(s["Effect"] == "Allow" for s in invokes)
    # Its own ARN by its fixed name (a reference to its own Arn would be a circular one).
    assert sorted(map(str, resources)) == sorted(
        map(str, [{"Fn::GetAtt": [executor_id, "Arn"]}, fanout_own_arn("Scheduler-fanout")])
    )
    lean_executor, _ = lean.function(C.EXECUTOR_HANDLER)
    lean_invokes = [s for s in statements(lean, C.FANOUT_HANDLER) if any(a.startswith("lambda:") for a in actions(s))]
    assert lean_invokes == [  # fanout_max 1: no helpers, no permission to start them
        {"Action": "lambda:InvokeFunction", "Effect": "Allow", "Resource": {"Fn::GetAtt": [lean_executor, "Arn"]}}
    ]
    for handler in (C.API_HANDLER, C.EXECUTOR_HANDLER, C.MIGRATE_HANDLER):
        assert not any(a.startswith("lambda:") for s in statements(aws, handler) for a in actions(s)), handler


def test_job_secrets_key_is_granted_to_the_api_and_the_executor_only(aws):
    api_env = aws.function(C.API_HANDLER)[1]["Environment"]["Variables"]
    key_id = api_env[C.ENV_KMS_KEY_ID]["Fn::GetAtt"][0]
    assert aws.json["Resources"][key_id]["Properties"]["EnableKeyRotation"] is True
    for handler in (C.API_HANDLER, C.EXECUTOR_HANDLER):
        env = aws.function(handler)[1]["Environment"]["Variables"]
        assert env[C.ENV_KMS_KEY_ID] == {"Fn::GetAtt": [key_id, "Arn"]}
    # The API only seals job secrets (a data key each), the executor only opens them.
    for handler, action in ((C.API_HANDLER, "kms:GenerateDataKey"), (C.EXECUTOR_HANDLER, "kms:Decrypt")):
        kms = [s for s in statements(aws, handler) if s["Resource"] == {"Fn::GetAtt": [key_id, "Arn"]}]
        assert kms == [{"Action": action, "Effect": "Allow", "Resource": {"Fn::GetAtt": [key_id, "Arn"]}}], handler
    for handler in (C.FANOUT_HANDLER, C.MIGRATE_HANDLER):
        assert C.ENV_KMS_KEY_ID not in aws.function(handler)[1]["Environment"]["Variables"]
        job_key = [s for s in statements(aws, handler) if s["Resource"] == {"Fn::GetAtt": [key_id, "Arn"]}]
        assert job_key == [], handler


def test_the_api_takes_its_new_code_after_the_executor(aws):
    """What the API seals the executor opens: on an update the executor's code changes first."""
    executor_id, _ = aws.function(C.EXECUTOR_HANDLER)
    api_id, _ = aws.function(C.API_HANDLER)
    assert executor_id in aws.json["Resources"][api_id]["DependsOn"]


def test_the_secrets_hmac_key_is_the_api_s_alone_to_sign_with(aws):
    """The API signs each secret's digest with a KMS HMAC key (``kms:GenerateMac`` on that key
    only), so that a secret sent again is compared with the stored one; no other function sees it."""
    api_env = aws.function(C.API_HANDLER)[1]["Environment"]["Variables"]
    mac_key = api_env[C.ENV_KMS_MAC_KEY_ID]["Fn::GetAtt"][0]
    properties = aws.json["Resources"][mac_key]["Properties"]
    assert (properties["KeySpec"], properties["KeyUsage"]) == ("HMAC_256", "GENERATE_VERIFY_MAC")
    signs = [s for s in statements(aws, C.API_HANDLER) if s["Resource"] == {"Fn::GetAtt": [mac_key, "Arn"]}]
    assert signs == [{"Action": "kms:GenerateMac", "Effect": "Allow", "Resource": {"Fn::GetAtt": [mac_key, "Arn"]}}]
    for handler in (C.EXECUTOR_HANDLER, C.FANOUT_HANDLER, C.MIGRATE_HANDLER):
        assert C.ENV_KMS_MAC_KEY_ID not in aws.function(handler)[1]["Environment"]["Variables"]
        assert [s for s in statements(aws, handler) if s["Resource"] == {"Fn::GetAtt": [mac_key, "Arn"]}] == [], handler


def test_no_wildcard_actions_and_no_wildcard_resources_on_data(aws):
    for policy_id, policy in aws.resources("AWS::IAM::Policy").items():
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
            for action in actions(statement):
                assert action != "*" and not action.endswith(":*"), (policy_id, action)
            if statement["Resource"] == "*":
                assert set(actions(statement)) <= WILDCARD_RESOURCE_ACTIONS, (policy_id, statement)


def test_the_api_has_a_stable_cursor_key_it_fetches_itself(aws):
    env = aws.function(C.API_HANDLER)[1]["Environment"]["Variables"]
    assert C.ENV_CURSOR_SECRET not in env
    (secret_id,) = [k for k in aws.resources("AWS::SecretsManager::Secret") if k.startswith("ApiCursorKey")]
    assert env[C.ENV_CURSOR_SECRET_ARN] == {"Ref": secret_id}
    reads = [s for s in statements(aws, C.API_HANDLER) if "secretsmanager:GetSecretValue" in actions(s)]
    assert any(
        {"Ref": secret_id} in (s["Resource"] if isinstance(s["Resource"], list) else [s["Resource"]]) for s in reads
    )


def test_target_allow_list_by_context(aws, lean):
    assert C.ENV_TARGET_ALLOW_LIST not in aws.function(C.EXECUTOR_HANDLER)[1]["Environment"]["Variables"]
    for handler in (C.API_HANDLER, C.EXECUTOR_HANDLER):
        assert lean.function(handler)[1]["Environment"]["Variables"][C.ENV_TARGET_ALLOW_LIST] == "hooks.example.com"


def test_migrations_run_through_a_custom_resource_keyed_by_their_hash(aws):
    (resource,) = aws.resources("Custom::SchedulerMigrations").values()
    assert resource["Properties"]["MigrationsHash"] == migrations_hash()
    service_token = resource["Properties"]["ServiceToken"]["Fn::GetAtt"][0]
    framework = aws.json["Resources"][service_token]["Properties"]
    migrate_id, _ = aws.function(C.MIGRATE_HANDLER)
    assert framework["Environment"]["Variables"]["USER_ON_EVENT_FUNCTION_ARN"] == {"Fn::GetAtt": [migrate_id, "Arn"]}


def test_migrations_hash_changes_with_any_migration(tmp_path):
    (tmp_path / "0001_initial.sql").write_text("create table a (id int);")
    first = migrations_hash(tmp_path)
    assert migrations_hash(tmp_path) == first
    (tmp_path / "0002_more.sql").write_text("alter table a add b int;")
    second = migrations_hash(tmp_path)
    assert second != first
    (tmp_path / "0002_more.sql").write_text("alter table a add c int;")
    assert migrations_hash(tmp_path) not in {first, second}
    (tmp_path / "notes.txt").write_text("not a migration")
    assert migrations_hash(tmp_path) == migrations_hash(tmp_path)


def test_fanout_knows_its_own_fixed_name_and_the_maximum(aws, lean):
    _, props = aws.function(C.FANOUT_HANDLER)
    assert props["FunctionName"] == "Scheduler-fanout"
    env = props["Environment"]["Variables"]
    assert env[C.ENV_FANOUT_FUNCTION] == "Scheduler-fanout" and env[C.ENV_MAX_FANOUTS] == "4"
    assert lean.function(C.FANOUT_HANDLER)[1]["Environment"]["Variables"][C.ENV_MAX_FANOUTS] == "1"


def test_fanout_knows_how_many_claims_an_executor_invoke_may_carry(aws, lean):
    assert aws.function(C.FANOUT_HANDLER)[1]["Environment"]["Variables"][C.ENV_CLAIMS_PER_INVOKE] == "25"
    assert lean.function(C.FANOUT_HANDLER)[1]["Environment"]["Variables"][C.ENV_CLAIMS_PER_INVOKE] == "1"


def test_fanout_name_fits_lambdas_limit_for_any_stack_name():
    from infra.runner import fanout_function_name

    assert fanout_function_name("Scheduler") == "Scheduler-fanout"
    long_a, long_b = "A" * 120, "A" * 119 + "B"
    assert len(fanout_function_name(long_a)) <= 64
    assert fanout_function_name(long_a) != fanout_function_name(long_b)


@pytest.mark.parametrize("variant", ["aws", "lean", "aurora", "localstack"])
def test_the_functions_are_updated_only_after_the_migrations(variant, synthesize):
    # An upgrade must not run new code against the old schema: the api, fan-out and executor
    # functions wait for the migrations custom resource (the migrate function does not: it runs them).
    synth = synthesize(variant)
    (migrations_id,) = synth.resources("Custom::SchedulerMigrations")
    for handler in (C.API_HANDLER, C.FANOUT_HANDLER, C.EXECUTOR_HANDLER):
        function_id, _ = synth.function(handler)
        assert migrations_id in synth.json["Resources"][function_id].get("DependsOn", []), handler
    migrate_id, _ = synth.function(C.MIGRATE_HANDLER)
    assert migrations_id not in synth.json["Resources"][migrate_id].get("DependsOn", [])
    assert dependency_cycle(synth.json) is None


def dependency_cycle(template: dict) -> list[str] | None:
    """A cycle among the template's resources (DependsOn, Ref, Fn::GetAtt, Fn::Sub), or None."""
    resources = template["Resources"]

    def references(node: object) -> set[str]:
        if isinstance(node, list):
            return set().union(*map(references, node)) if node else set()
        if not isinstance(node, dict):
            return set()
        found: set[str] = set()
        for key, value in node.items():
            if key == "Ref" and value in resources:
                found.add(value)
            elif key == "Fn::GetAtt":
                name = value[0] if isinstance(value, list) else str(value).split(".")[0]
                found |= {name} & set(resources)
            elif key == "Fn::Sub":
                text = value[0] if isinstance(value, list) else value
                found |= {m.split(".")[0] for m in re.findall(r"\$\{([^}!]+)\}", text) if m.split(".")[0] in resources}
                found |= references(value[1] if isinstance(value, list) else None)
            else:
                found |= references(value)
        return found

    edges = {
        name: references(resource.get("Properties", {})) | set(_as_list(resource.get("DependsOn", [])))
        for name, resource in resources.items()
    }
    state: dict[str, int] = {}
    for start in edges:
        stack = [(start, iter(sorted(edges[start])))]
        if state.get(start):
            continue
        state[start] = 1
        while stack:
            node, children = stack[-1]
            child = next(children, None)
            if child is None:
                state[node] = 2
                stack.pop()
            elif state.get(child) == 1:
                return [n for n, _ in stack] + [child]
            elif not state.get(child):
                state[child] = 1
                stack.append((child, iter(sorted(edges[child]))))
    return None


def _as_list(value: object) -> list:
    return value if isinstance(value, list) else [value]
