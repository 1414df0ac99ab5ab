"""The HTTP API: API Gateway REST, SigV4 (AWS_IAM) on every method, in front of the api function."""

from __future__ import annotations

from typing import cast

from aws_cdk import Duration, Fn
from aws_cdk import aws_apigateway as apigw
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_secretsmanager as secretsmanager
from constructs import Construct

from infra.config import Config
from infra.lambdas import LambdaKit, Placement, kept, retention
from infra.nag import MANAGED_POLICY, acknowledge
from infra.shared import FUNCTIONS_DIR, C, _load

STAGE = "prod"
# API Gateway gives up on an integration after 29 s; the function answers well before that.
API_TIMEOUT = Duration.seconds(20)

# Errors API Gateway answers itself, in the API's error shape: {"error": {"code", "message"}}.
GATEWAY_ERRORS = {
    apigw.ResponseType.BAD_REQUEST_BODY: ("400", "bad_request"),
    apigw.ResponseType.BAD_REQUEST_PARAMETERS: ("400", "bad_request"),
    apigw.ResponseType.REQUEST_TOO_LARGE: ("413", "payload_too_large"),
    apigw.ResponseType.THROTTLED: ("429", "throttled"),
    apigw.ResponseType.QUOTA_EXCEEDED: ("429", "throttled"),
    apigw.ResponseType.ACCESS_DENIED: ("403", "forbidden"),
    apigw.ResponseType.MISSING_AUTHENTICATION_TOKEN: ("403", "forbidden"),
    apigw.ResponseType.INVALID_SIGNATURE: ("403", "forbidden"),
    apigw.ResponseType.EXPIRED_TOKEN: ("403", "forbidden"),
    apigw.ResponseType.DEFAULT_4_XX: (None, "client_error"),
    apigw.ResponseType.DEFAULT_5_XX: (None, "internal_error"),
}

# Already a quoted JSON string.
ERROR_MESSAGE = "$context.error.messageString"

# One JSON line per request: CDK's standard fields, plus the caller's principal (the ARN the
# jobs are owned by) and why API Gateway refused or failed a request (already a quoted string).
ACCESS_LOG_FIELDS = {
    "requestId": "$context.requestId",
    "ip": "$context.identity.sourceIp",
    "user": "$context.identity.user",
    "caller": "$context.identity.caller",
    "userArn": "$context.identity.userArn",
    "requestTime": "$context.requestTime",
    "httpMethod": "$context.httpMethod",
    "resourcePath": "$context.resourcePath",
    "status": "$context.status",
    "protocol": "$context.protocol",
    "responseLength": "$context.responseLength",
}
ACCESS_LOG_FORMAT = (
    "{" + ",".join(f'"{k}":"{v}"' for k, v in ACCESS_LOG_FIELDS.items()) + f',"errorMessage":{ERROR_MESSAGE}' + "}"
)

# The headers every answer carries (the function adds them to its own: scheduler.core.constants
# ANSWER_HEADERS), on those API Gateway makes itself too: its errors and the health check. Each
# value a quoted literal, as API Gateway's mappings take it.
ANSWER_HEADERS = {"Cache-Control": "'no-store'", "X-Content-Type-Options": "'nosniff'"}

#: ``functions/scheduler/api/routes.py``, the API's route table (loaded by path, standard library
#: only): the resources and methods below are derived from it.
routes = _load("_scheduler_api_routes", FUNCTIONS_DIR / "scheduler" / "api" / "routes.py")


class Api(Construct):
    """``/v1`` routes of the design, each an AWS_IAM method proxied to the api function."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: Config,
        kit: LambdaKit,
        placement: Placement | None,
        environment: dict[str, str],
    ) -> None:
        super().__init__(scope, construct_id)
        # The HMAC key of pagination cursors must be the same in every container of the function.
        self.cursor_secret = secretsmanager.Secret(
            self,
            "CursorKey",
            description="Scheduler API: HMAC key of pagination cursors",
            generate_secret_string=secretsmanager.SecretStringGenerator(password_length=48, exclude_punctuation=True),
        )
        acknowledge(
            self.cursor_secret,
            {
                "AwsSolutions-SMG4": "Only signs pagination cursors (tamper-proofing, no access): rotating it "
                "merely invalidates outstanding cursors; rotate by replacing the secret and redeploying."
            },
        )
        # The ARN only: the function fetches the key at cold start (Powertools parameters, cached),
        # so the key is never readable in the function's configuration.
        environment = {**environment, C.ENV_CURSOR_SECRET_ARN: self.cursor_secret.secret_arn}
        self.function = kit.function(
            self,
            "Handler",
            handler=C.API_HANDLER,
            description="HTTP API of the scheduler (behind API Gateway, SigV4)",
            timeout=API_TIMEOUT,
            memory_size=512,
            environment=environment,
            placement=placement,
        )
        self.cursor_secret.grant_read(self.function)

        access_logs = logs.LogGroup(
            self,
            "AccessLogs",
            retention=retention(config.log_retention_days),
            removal_policy=kept(config),
        )
        self.rest_api = apigw.RestApi(
            self,
            "RestApi",
            rest_api_name=f"{config.stack_name}-api",
            description="Scheduler HTTP API (SigV4-signed requests only)",
            endpoint_types=[apigw.EndpointType.REGIONAL],
            # Execution logging needs the account-level CloudWatch role of API Gateway.
            cloud_watch_role=True,
            default_method_options=apigw.MethodOptions(authorization_type=apigw.AuthorizationType.IAM),
            deploy_options=apigw.StageOptions(
                stage_name=STAGE,
                tracing_enabled=True,
                metrics_enabled=True,
                logging_level=apigw.MethodLoggingLevel.ERROR,
                data_trace_enabled=False,  # bodies carry job secrets
                throttling_rate_limit=config.api_rate_limit,
                throttling_burst_limit=config.api_burst_limit,
                access_log_destination=apigw.LogGroupLogDestination(access_logs),
                access_log_format=apigw.AccessLogFormat.custom(ACCESS_LOG_FORMAT),
            ),
        )
        # The TLS versions and ciphers the endpoint accepts: a regional API without a policy takes
        # TLS 1.0 too. An enhanced policy needs an endpoint access mode: STRICT (the request's SNI
        # host is the API's, and it came through a regional endpoint).
        api_resource = cast(apigw.CfnRestApi, self.rest_api.node.default_child)
        api_resource.security_policy = config.api_security_policy
        if config.api_security_policy.startswith("SecurityPolicy_"):
            api_resource.endpoint_access_mode = "STRICT"
        for response_type, (status, code) in GATEWAY_ERRORS.items():
            self.rest_api.add_gateway_response(
                f"Error{response_type.response_type}",
                type=response_type,
                status_code=status,
                templates={"application/json": f'{{"error": {{"code": "{code}", "message": {ERROR_MESSAGE}}}}}'},
                response_headers=ANSWER_HEADERS,
            )

        self._parameters = self.rest_api.add_request_validator("ParametersValidator", validate_request_parameters=True)
        self._body = self.rest_api.add_request_validator(
            "BodyValidator", validate_request_body=True, validate_request_parameters=True
        )
        self._json_object = self.rest_api.add_model(
            "JsonObject",
            content_type="application/json",
            description="A JSON object; the api function validates the fields",
            schema=apigw.JsonSchema(schema=apigw.JsonSchemaVersion.DRAFT4, type=apigw.JsonSchemaType.OBJECT),
        )
        self._integration = apigw.LambdaIntegration(self.function, allow_test_invoke=False)

        for route in routes.ROUTES:
            if route.anonymous:
                self._health(self._resource(route.path), route.method)
                continue
            self._method(
                self._resource(route.path),
                route.method,
                path=bool(route.path_parameters),
                body=route.body,
                query=route.query,
                headers=route.headers,
            )

        self.url = self.rest_api.url
        self.stage = self.rest_api.deployment_stage

        acknowledge(
            self.rest_api,
            {
                "AwsSolutions-COG4": "Callers are IAM principals: every method uses AWS_IAM (SigV4) "
                "authorization, and each job belongs to the principal that created it.",
                "AwsSolutions-APIG3": "No WAF by default: every method requires a SigV4 signature and the "
                "stage is throttled; associate a web ACL with the stage where the API faces untrusted networks.",
                MANAGED_POLICY.format(name="AmazonAPIGatewayPushToCloudWatchLogs"): "AWS-managed policy of the "
                "account-level role API Gateway uses to write execution logs; it grants only CloudWatch Logs writes.",
            },
        )

    def _resource(self, path: str) -> apigw.IResource:
        """The resource of a route's path, made on first use. The job's id is ``{id}`` here."""
        resource = self.rest_api.root
        for part in path.strip("/").split("/"):
            part = "{id}" if part.startswith("{") else part
            resource = resource.get_resource(part) or resource.add_resource(part)
        return resource

    def _health(self, resource: apigw.IResource, http_method: str) -> apigw.Method:
        """The health check: unsigned (probes call it without credentials), answered by API
        Gateway itself (a mock integration), so an anonymous caller invokes no function and
        reaches no data; the stage's throttle bounds it like every method."""
        method = resource.add_method(
            http_method,
            apigw.MockIntegration(
                request_templates={"application/json": '{"statusCode": 200}'},
                integration_responses=[
                    apigw.IntegrationResponse(
                        status_code="200",
                        response_templates={"application/json": '{"status": "ok"}'},
                        response_parameters={f"method.response.header.{k}": v for k, v in ANSWER_HEADERS.items()},
                    )
                ],
            ),
            authorization_type=apigw.AuthorizationType.NONE,
            method_responses=[
                apigw.MethodResponse(
                    status_code="200",
                    response_parameters={f"method.response.header.{k}": True for k in ANSWER_HEADERS},
                )
            ],
        )
        acknowledge(
            method,
            {
                "AwsSolutions-APIG4": "The health check needs no identity (probes call it unsigned); API Gateway "
                "answers it itself with a fixed body, so it reaches no function and no data.",
                "AwsSolutions-COG4": "The health check needs no identity; every other method uses AWS_IAM.",
            },
        )
        return method

    def _method(
        self,
        resource: apigw.IResource,
        http_method: str,
        *,
        path: bool = False,
        body: bool = False,
        query: tuple[str, ...] = (),
        headers: tuple[str, ...] = (),
    ) -> apigw.Method:
        parameters = {f"method.request.querystring.{name}": False for name in query}
        parameters.update({f"method.request.header.{name}": False for name in headers})
        if path:
            parameters["method.request.path.id"] = True
        return resource.add_method(
            http_method,
            self._integration,
            authorization_type=apigw.AuthorizationType.IAM,
            request_parameters=parameters,
            request_validator=self._body if body else self._parameters,
            request_models={"application/json": self._json_object} if body else None,
        )

    def local_url(self, endpoint: str) -> str:
        """The API's base URL on LocalStack's gateway at ``endpoint``, in its path-style form
        (``<endpoint>/_aws/execute-api/<api id>/<stage>/``), which needs no DNS: the host-style
        ``<api id>.execute-api.localhost.localstack.cloud`` resolves through public DNS only."""
        return Fn.join("", [endpoint.rstrip("/"), "/_aws/execute-api/", self.rest_api.rest_api_id, f"/{STAGE}/"])

    @property
    def functions(self) -> list[lambda_.Function]:
        """The API's function."""
        return [self.function]
