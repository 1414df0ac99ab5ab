"""API Gateway: AWS_IAM on every method, request validation, access logs, throttling, tracing."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("aws_cdk")

from infra.shared import C

ROUTES = {
    ("GET", "/v1/health"),
    ("GET", "/v1/jobs"),
    ("POST", "/v1/jobs"),
    ("POST", "/v1/jobs/pause"),  # issue 33: bulk pause and resume
    ("POST", "/v1/jobs/resume"),
    ("GET", "/v1/jobs/{id}"),
    ("PUT", "/v1/jobs/{id}"),
    ("PATCH", "/v1/jobs/{id}"),
    ("DELETE", "/v1/jobs/{id}"),
    ("POST", "/v1/jobs/{id}/pause"),
    ("POST", "/v1/jobs/{id}/resume"),
    ("POST", "/v1/jobs/{id}/run"),
    ("POST", "/v1/jobs/{id}/backfill"),
    ("GET", "/v1/jobs/{id}/executions"),
    ("GET", "/v1/jobs/{id}/changes"),
    ("GET", "/v1/executions"),
    ("GET", "/v1/executions/{id}"),  # one execution by its id
    ("POST", "/v1/schedules/preview"),
    ("GET", "/v1/calendars"),
    ("POST", "/v1/calendars"),
    # API Gateway names every path parameter {id} (infra/api.py); the api function reads the path.
    ("GET", "/v1/calendars/{id}"),
    ("PUT", "/v1/calendars/{id}"),
    ("DELETE", "/v1/calendars/{id}"),
    ("GET", "/v1/calendars/{id}/changes"),  # the change logs of calendars and rule sets
    ("GET", "/v1/alerts"),
    ("GET", "/v1/alert-rules"),  # issue 34: alert rule sets by tag
    ("GET", "/v1/alert-rules/{id}"),
    ("PUT", "/v1/alert-rules/{id}"),
    ("DELETE", "/v1/alert-rules/{id}"),
    ("GET", "/v1/alert-rules/{id}/changes"),
}


def resource_path(synth, resource_ref: dict) -> str:
    """The full path of an API Gateway resource (``Ref`` to it, or to the root)."""
    if "Fn::GetAtt" in resource_ref:
        return ""
    resource = synth.json["Resources"][resource_ref["Ref"]]["Properties"]
    return resource_path(synth, resource["ParentId"]) + "/" + resource["PathPart"]


def methods(synth) -> dict[tuple[str, str], dict]:
    return {
        (m["Properties"]["HttpMethod"], resource_path(synth, m["Properties"]["ResourceId"])): m["Properties"]
        for m in synth.resources("AWS::ApiGateway::Method").values()
    }


def test_routes_are_those_of_the_design(aws):
    assert set(methods(aws)) == ROUTES


@pytest.mark.parametrize("variant", ["aws", "localstack"])
def test_every_method_requires_sigv4_but_the_health_check(variant, synthesize):
    for route, method in methods(synthesize(variant)).items():
        if route == ("GET", "/v1/health"):
            continue
        assert method["AuthorizationType"] == "AWS_IAM", route


def test_the_health_check_is_answered_unsigned_by_the_gateway_itself(aws):
    health = methods(aws)[("GET", "/v1/health")]
    assert health["AuthorizationType"] == "NONE"
    integration = health["Integration"]
    assert integration["Type"] == "MOCK"  # no function invoked, no data reached
    assert json.loads(integration["IntegrationResponses"][0]["ResponseTemplates"]["application/json"]) == {
        "status": "ok"
    }


def test_every_method_is_validated_and_proxied_to_the_api_function(aws):
    api_id, _ = aws.function(C.API_HANDLER)
    validators = aws.resources("AWS::ApiGateway::RequestValidator")
    for route, method in methods(aws).items():
        if route == ("GET", "/v1/health"):
            continue  # answered by the gateway itself
        validator = validators[method["RequestValidatorId"]["Ref"]]["Properties"]
        assert validator["ValidateRequestParameters"] is True, route
        if route[0] in {"POST", "PUT", "PATCH"} and route[1] in {"/v1/jobs", "/v1/jobs/{id}"}:
            assert validator["ValidateRequestBody"] is True, route
            assert "application/json" in method["RequestModels"], route
        if "{id}" in route[1]:
            assert method["RequestParameters"]["method.request.path.id"] is True, route
        integration = method["Integration"]
        assert integration["Type"] == "AWS_PROXY"
        assert api_id in json.dumps(integration["Uri"])


def test_stage_logs_traces_and_throttles(aws):
    (stage,) = [s["Properties"] for s in aws.resources("AWS::ApiGateway::Stage").values()]
    assert stage["TracingEnabled"] is True
    assert "DestinationArn" in stage["AccessLogSetting"]
    assert "$context.identity.caller" in stage["AccessLogSetting"]["Format"]
    (settings,) = stage["MethodSettings"]
    assert settings["ThrottlingRateLimit"] == 50
    assert settings["ThrottlingBurstLimit"] == 100
    assert settings["LoggingLevel"] in {"ERROR", "INFO"}
    assert settings["DataTraceEnabled"] is False
    access_log = stage["AccessLogSetting"]["DestinationArn"]["Fn::Join"][1][-1]["Ref"]
    assert aws.json["Resources"][access_log]["Properties"]["RetentionInDays"] == 30


def test_the_endpoint_refuses_tls_below_1_2_and_an_enhanced_policy_is_strict(aws, lean):
    """A regional API without a policy accepts TLS 1.0: the stack sets TLS_1_2 (``api_security_policy``),
    and an enhanced policy (the lean variant's) comes with the endpoint access mode it requires."""
    (api,) = [r["Properties"] for r in aws.resources("AWS::ApiGateway::RestApi").values()]
    assert api["SecurityPolicy"] == "TLS_1_2" and "EndpointAccessMode" not in api
    (api,) = [r["Properties"] for r in lean.resources("AWS::ApiGateway::RestApi").values()]
    assert (api["SecurityPolicy"], api["EndpointAccessMode"]) == ("SecurityPolicy_TLS13_1_2_PFS_PQ_2025_09", "STRICT")


def test_gateway_errors_have_the_api_error_shape(aws):
    responses = {
        r["Properties"]["ResponseType"]: r["Properties"]
        for r in aws.resources("AWS::ApiGateway::GatewayResponse").values()
    }
    for response_type in ("BAD_REQUEST_BODY", "THROTTLED", "ACCESS_DENIED", "DEFAULT_4XX", "DEFAULT_5XX"):
        template = responses[response_type]["ResponseTemplates"]["application/json"]
        assert template.startswith('{"error": {"code": '), response_type
    assert responses["REQUEST_TOO_LARGE"]["StatusCode"] == "413"


def test_answers_the_gateway_makes_itself_carry_the_answer_headers(aws):
    """Every answer carries Cache-Control: no-store and nosniff: the function's own, and the
    gateway's errors and health check, which the function never sees."""
    wanted = {"Cache-Control": "'no-store'", "X-Content-Type-Options": "'nosniff'"}
    for response in aws.resources("AWS::ApiGateway::GatewayResponse").values():
        parameters = response["Properties"]["ResponseParameters"]
        assert {k.removeprefix("gatewayresponse.header."): v for k, v in parameters.items()} == wanted
    [health] = [
        m["Properties"]
        for m in aws.resources("AWS::ApiGateway::Method").values()
        if m["Properties"].get("Integration", {}).get("Type") == "MOCK"
    ]
    [answer] = health["Integration"]["IntegrationResponses"]
    assert {k.removeprefix("method.response.header."): v for k, v in answer["ResponseParameters"].items()} == wanted


def test_api_url_is_an_output(aws):
    output = aws.json["Outputs"]["ApiUrl"]
    assert "execute-api" in json.dumps(output["Value"])


def test_a_requests_calendar_planning_ends_well_before_the_api_function_does():
    """Past its time limit a calendar search answers 400; the function must still be running to
    say so (and to answer the rest of the request)."""
    from infra.api import API_TIMEOUT
    from scheduler.api.app import CALENDAR_PLANNING_SECONDS

    assert CALENDAR_PLANNING_SECONDS <= API_TIMEOUT.to_seconds() - 5


def test_access_logs_name_the_principal_and_the_error(aws, localstack):
    for synth in (aws, localstack):
        (stage,) = [s["Properties"] for s in synth.resources("AWS::ApiGateway::Stage").values()]
        log_format = stage["AccessLogSetting"]["Format"]
        # A JSON line once API Gateway has substituted its variables (the message comes quoted).
        line = json.loads(log_format.replace("$context.error.messageString", '"refused"').replace("$context.", ""))
        assert line["userArn"] == "identity.userArn"  # the principal: the owner of the jobs it calls for
        assert line["errorMessage"] == "refused"
        assert {"requestId", "ip", "caller", "user", "httpMethod", "resourcePath", "status"} <= set(line)
        assert "$context.identity.userArn" in log_format and "$context.error.message" in log_format
