"""The conductor's Lambda functions, their log groups and execution roles."""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import Duration, RemovalPolicy
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_destinations as destinations
from aws_cdk import aws_logs as logs
from constructs import Construct

from infra import bundling
from infra.config import LOG_RETENTION_DAYS, StageConfig
from infra.reservations import Reservations
from shared.adapters.store import HISTORY_BACKSTOP_SECONDS

RETENTION: dict[int, logs.RetentionDays] = dict(
    zip(LOG_RETENTION_DAYS, [member for member in logs.RetentionDays if member.name != "INFINITE"], strict=True)
)

# Item-level actions on the table, per function: exactly those its code can call (tests/infra/
# test_grants_from_calls.py derives them from the code and fails on any difference). DynamoDB
# authorizes each item of a TransactWriteItems as its own action (a Put as PutItem, an Update as
# UpdateItem), so these cover the store's transactions too; state commits are transactions, and a
# commit may delete the stored parts of a tool result sent in parts (Delete items: DeleteItem).
_GET, _PUT, _UPDATE, _DELETE, _QUERY, _BATCH_WRITE, _BATCH_GET = (
    f"dynamodb:{action}"
    for action in ("GetItem", "PutItem", "UpdateItem", "DeleteItem", "Query", "BatchWriteItem", "BatchGetItem")
)
# Every function that commits may Query the outbox: a decision that ends a stream launched alongside
# its write before any runner claimed it posts that decision's kept events (shared/flows/early_launch.py).
TABLE_ACTIONS: dict[str, tuple[str, ...]] = {
    "connect": (_GET, _PUT, _UPDATE, _DELETE, _QUERY),  # binds the connection and the session's principal
    "disconnect": (_GET, _PUT, _UPDATE, _DELETE, _QUERY),  # forgets the connection (a device leaves)
    "message": (_GET, _PUT, _UPDATE, _DELETE, _QUERY),  # reads the history window and the outbox
    "turn": (_GET, _PUT, _UPDATE, _DELETE, _QUERY),  # reads the history and what a summary folds
    "turnAbandoned": (_GET, _PUT, _UPDATE, _DELETE, _QUERY),
    "toolDeadline": (_GET, _PUT, _UPDATE, _DELETE, _QUERY),
    # reads a session and its transcript, renames and ends it (rewriting its items' expiry), erases it
    # (BatchWriteItem deletes), counts the devices of the active ones it lists (BatchGetItem); its
    # Query on the sessions index is granted on the index alone.
    "sessionsApi": (_GET, _PUT, _UPDATE, _DELETE, _QUERY, _BATCH_WRITE, _BATCH_GET),
}
# Actions on the sessions index (``by-owner``), granted on the index's ARN only: a page of sessions.
INDEX_ACTIONS: dict[str, tuple[str, ...]] = {"sessionsApi": (_QUERY,)}
# A function pins the layer version it was deployed with. When the lock changes, the update points
# every function at the new version and then deletes the replaced one (a failed update rolls back
# to it, untouched); a running invocation keeps its copy. Retaining them would keep one more
# version for every lock change, forever.
LAYER_REMOVAL_POLICY = RemovalPolicy.DESTROY
# The turn runner's asynchronous invocations: a failed or late turn is never retried (a stream must
# not run twice, and a user who waited a minute has moved on); it goes to the on-failure
# destination, which ends the turn. 60 s is the smallest event age Lambda accepts.
TURN_RETRY_ATTEMPTS = 0
TURN_MAX_EVENT_AGE = Duration.seconds(60)
# The tool-deadline function commits a few timeouts and posts them: seconds, not minutes.
TOOL_DEADLINE_TIMEOUT = Duration.seconds(30)
# The sessions API function: API Gateway's HTTP APIs give up on an integration after 30 s, and ending
# or erasing a long session touches every one of its items (one update, or one delete in 25, each),
# so it gets the most an HTTP API waits for rather than the short routes' timeout.
SESSIONS_API_TIMEOUT = Duration.seconds(29)
# The WebSocket stage's management API, for the sessions API function (shared/flows/session_service.py).
WEBSOCKET_CALLBACK_URL_ENV = "CONDUCTOR_WEBSOCKET_CALLBACK_URL"
# How long an ended session is kept (sessions.ended_retention_days): the sessions API's end sets it on
# every item, and every function's store keeps it on the ended session's later writes.
ENDED_RETENTION_ENV = "CONDUCTOR_ENDED_RETENTION_SECONDS"
# How long a history message is kept after its last write. The stack deploys the session reaper
# (infra/constructs/reaper.py), which deletes a session's history when its state expires, so history
# expires only after a far backstop (shared.adapters.store.HISTORY_BACKSTOP_SECONDS, 400 days): a session in
# use keeps all of it. Every function that writes history gets it (those that commit, the sessions API).
HISTORY_TTL_ENV = "CONDUCTOR_HISTORY_TTL_SECONDS"
HISTORY_TTL_SECONDS = HISTORY_BACKSTOP_SECONDS


def removal_policy(config: StageConfig) -> RemovalPolicy:
    """What happens to a stateful resource (table, user pool, keys, queues, log groups, secrets) when
    it leaves the stack. A retaining stage keeps it on a stack deletion or a replacement, but not
    when the create that made it rolls back (CloudFormation ``DeletionPolicy: RetainExceptOnCreate``):
    a failed first deploy leaves no orphan behind to block the retry, and never held any data."""
    return RemovalPolicy.RETAIN_ON_UPDATE_OR_DELETE if config.retain else RemovalPolicy.DESTROY


def layer_description(skip_install: bool) -> str:
    """What a layer version holds, as ``aws lambda list-layer-versions`` shows it: the lock it was
    built from (its sha256), or that it is empty."""
    if skip_install:
        return "EMPTY (synthesized with skip_bundle_deps): not deployable"
    return (
        f"VoiceIDE conductor dependencies (arm64, py{bundling.PYTHON_VERSION}) from "
        f"lambdas/{bundling.LOCK.name} sha256:{bundling.lock_digest()[:16]}"
    )


def log_group(scope: Construct, construct_id: str, config: StageConfig) -> logs.LogGroup:
    """A log group with the stage's retention and removal policy."""
    return logs.LogGroup(
        scope,
        construct_id,
        retention=RETENTION[config.log_retention_days],
        removal_policy=removal_policy(config),
    )


@dataclass(frozen=True)
class FunctionSpec:
    """What differs between the conductor's functions."""

    name: str
    handler: str
    description: str
    memory_mb: int
    timeout: Duration
    reserved_concurrency: int | None = None


class ConductorFunctions(Construct):
    """connect / message / disconnect, the turn runner and its on-failure destination, the
    tool-deadline function (and the optional authorizer), sharing one code asset and one
    dependency layer, each with its own role, log group and only the permissions it needs."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: StageConfig,
        table: dynamodb.ITable,
        skip_bundle_deps: bool,
        reservations: Reservations | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        self.config = config
        self.table = table
        self.authorizer: lambda_.Function | None = None
        self.sessions_api: lambda_.Function | None = None
        self.code = bundling.project_code()
        self.dependencies = lambda_.LayerVersion(
            self,
            "Dependencies",
            code=bundling.dependency_code(skip_install=skip_bundle_deps),
            compatible_runtimes=[bundling.RUNTIME],
            compatible_architectures=[bundling.ARCHITECTURE],
            description=layer_description(skip_bundle_deps),
            removal_policy=LAYER_REMOVAL_POLICY,
        )
        lambdas = config.lambdas
        # What the stage may reserve: lambdas.* only where a recorded quota reading proves it fits.
        reserved = reservations or Reservations()
        self.environment: dict[str, str] = {
            "CONDUCTOR_TABLE": table.table_name,
            "BEDROCK_MODEL_ID": config.bedrock.model_id,
            "BEDROCK_REGION": config.bedrock_region,
            "BEDROCK_MAX_TOKENS": str(config.bedrock.max_tokens),
            "BEDROCK_EFFORT": config.bedrock.effort,
            "BEDROCK_THINKING": config.bedrock.thinking,
            "CONDUCTOR_MAX_TOOL_ROUNDS": str(config.max_tool_rounds),
            "CONDUCTOR_TURN_RESERVE_MS": str(lambdas.turn_reserve_ms),
            "CONDUCTOR_REQUIRE_PRINCIPAL": "true" if config.authorizer else "false",
            "CONDUCTOR_MAX_TURNS_PER_MINUTE": str(config.max_turns_per_minute),
            "CONDUCTOR_SPECULATION": "true" if config.speculation.enabled else "false",
            "CONDUCTOR_SPECULATION_STABLE_MS": str(config.speculation.stable_ms),
            # Every store keeps an ended session's expiry on its later writes: all functions agree on it.
            ENDED_RETENTION_ENV: str(config.sessions.ended_retention_seconds),
            HISTORY_TTL_ENV: str(HISTORY_TTL_SECONDS),
            # Fair sharing: $default drops early partials and refuses events over a session's budget;
            # the speculation watcher (turn function) reads the partial interval too.
            "CONDUCTOR_MIN_PARTIAL_INTERVAL_MS": str(config.fair_share.min_partial_interval_ms),
            "CONDUCTOR_MAX_EVENTS_PER_SECOND": str(config.fair_share.max_events_per_second),
            # Each turn's usage is priced from the stage's one price table (cdk.json bedrock.prices).
            "CONDUCTOR_PRICES": config.bedrock.prices.model_dump_json() if config.bedrock.prices else "",
            "CONDUCTOR_PROGRESS_AFTER_MS": str(config.progress_after_ms),
            "CONDUCTOR_PROGRESS_EVERY_MS": str(config.progress_every_ms),
            "CONDUCTOR_DAILY_BUDGET_USD": str(config.daily_budget_usd),
            "POWERTOOLS_SERVICE_NAME": config.service_name,
            "POWERTOOLS_LOG_LEVEL": config.log_level,
            "POWERTOOLS_METRICS_NAMESPACE": config.metrics_namespace,
        }
        short = Duration.seconds(lambdas.handler_timeout_seconds)
        self.connect = self._function(
            FunctionSpec(
                "connect",
                "lambdas.connect.handler",
                "WebSocket $connect: maps the connection to its session",
                lambdas.handler_memory_mb,
                short,
            )
        )
        self.message = self._function(
            FunctionSpec(
                "message",
                "lambdas.message.handler",
                "WebSocket $default: decides on each frame and launches turns",
                lambdas.message_memory_mb,
                Duration.seconds(lambdas.message_timeout_seconds),
                reserved.message,
            )
        )
        self.disconnect = self._function(
            FunctionSpec(
                "disconnect",
                "lambdas.disconnect.handler",
                "WebSocket $disconnect: forgets the connection",
                lambdas.handler_memory_mb,
                short,
            )
        )
        self.turn_abandoned = self._function(
            FunctionSpec(
                "turnAbandoned",
                "lambdas.turn_abandoned.handler",
                "Ends a turn whose runner never ran or died (the runner's on-failure destination)",
                lambdas.handler_memory_mb,
                short,
            )
        )
        self.turn = self._function(
            FunctionSpec(
                "turn",
                "lambdas.turn.handler",
                "Turn runner: streams the model for one turn, launched by $default",
                lambdas.turn_memory_mb,
                Duration.seconds(lambdas.turn_timeout_seconds),
                # A turn holds its execution for minutes: capped, long turns cannot starve the routes.
                reserved.turn,
            )
        )
        self.turn.configure_async_invoke(
            retry_attempts=TURN_RETRY_ATTEMPTS,
            max_event_age=TURN_MAX_EVENT_AGE,
            on_failure=destinations.LambdaDestination(self.turn_abandoned, response_only=False),
        )
        self.tool_deadline = self._function(
            FunctionSpec(
                "toolDeadline",
                "lambdas.tool_deadline.handler",
                "Times out the tool calls the app did not answer by their deadline (the deadline queue)",
                lambdas.handler_memory_mb,
                TOOL_DEADLINE_TIMEOUT,
            )
        )
        # Both launch the model: $default for a transcript, the tool-deadline function once a round
        # of calls is complete. The unqualified function only ($LATEST): no version wildcard.
        for fn in (self.message, self.tool_deadline):
            fn.add_environment("CONDUCTOR_TURN_FUNCTION", self.turn.function_name)
            fn.add_to_role_policy(
                iam.PolicyStatement(actions=["lambda:InvokeFunction"], resources=[self.turn.function_arn])
            )
        for name, fn in self.table_users.items():
            fn.add_to_role_policy(iam.PolicyStatement(actions=list(TABLE_ACTIONS[name]), resources=[table.table_arn]))

    def add_authorizer(self, auth_environment: dict[str, str]) -> lambda_.Function:
        """The ``$connect`` REQUEST authorizer function; ``auth_environment`` says what it checks
        (``CONDUCTOR_AUTH_MODE`` and that mode's settings)."""
        lambdas = self.config.lambdas
        self.authorizer = self._function(
            FunctionSpec(
                "authorizer",
                "lambdas.authorizer.handler",
                f"WebSocket $connect authorizer ({auth_environment['CONDUCTOR_AUTH_MODE']})",
                lambdas.handler_memory_mb,
                Duration.seconds(lambdas.handler_timeout_seconds),
            ),
            environment={
                "POWERTOOLS_SERVICE_NAME": self.config.service_name,
                "POWERTOOLS_LOG_LEVEL": self.config.log_level,
                **auth_environment,
            },
        )
        return self.authorizer

    def add_sessions_api(self, *, index_name: str, callback_url: str) -> lambda_.Function:
        """The sessions API's function (``lambdas.sessions_api.handler``, behind the HTTP API): the
        table and its sessions index ``index_name``, and the WebSocket stage's management API
        (``callback_url``) to tell an open connection its session ended or was erased and close it.
        API Gateway invokes it synchronously: a failure is answered to the caller (no destination,
        no dead-letter queue); its errors and throttles alarm like the others'."""
        config = self.config
        lambdas = config.lambdas
        self.sessions_api = self._function(
            FunctionSpec(
                "sessionsApi",
                "lambdas.sessions_api.handler",
                "HTTPS sessions API: lists, shows, renames, ends and erases a person's sessions",
                lambdas.handler_memory_mb,
                SESSIONS_API_TIMEOUT,
            ),
            environment={
                "CONDUCTOR_TABLE": self.table.table_name,
                "CONDUCTOR_REQUIRE_PRINCIPAL": self.environment["CONDUCTOR_REQUIRE_PRINCIPAL"],
                WEBSOCKET_CALLBACK_URL_ENV: callback_url,
                ENDED_RETENTION_ENV: self.environment[ENDED_RETENTION_ENV],
                HISTORY_TTL_ENV: self.environment[HISTORY_TTL_ENV],
                "POWERTOOLS_SERVICE_NAME": config.service_name,
                "POWERTOOLS_LOG_LEVEL": config.log_level,
                "POWERTOOLS_METRICS_NAMESPACE": config.metrics_namespace,
            },
        )
        self.sessions_api.add_to_role_policy(
            iam.PolicyStatement(actions=list(TABLE_ACTIONS["sessionsApi"]), resources=[self.table.table_arn])
        )
        self.sessions_api.add_to_role_policy(
            iam.PolicyStatement(
                actions=list(INDEX_ACTIONS["sessionsApi"]), resources=[f"{self.table.table_arn}/index/{index_name}"]
            )
        )
        return self.sessions_api

    @property
    def table_users(self) -> dict[str, lambda_.Function]:
        """The functions that use the table, by their name in ``TABLE_ACTIONS`` (the sessions API's
        when the stage has it)."""
        users = {
            "connect": self.connect,
            "disconnect": self.disconnect,
            "message": self.message,
            "turn": self.turn,
            "turnAbandoned": self.turn_abandoned,
            "toolDeadline": self.tool_deadline,
        }
        if self.sessions_api is not None:
            users["sessionsApi"] = self.sessions_api
        return users

    @property
    def handlers(self) -> tuple[lambda_.Function, ...]:
        return (self.connect, self.message, self.disconnect)

    @property
    def every(self) -> tuple[lambda_.Function, ...]:
        """Every function of the stack, the authorizer and the sessions API's included when there are."""
        extra = tuple(fn for fn in (self.authorizer, self.sessions_api) if fn is not None)
        return (*self.handlers, self.turn, self.turn_abandoned, self.tool_deadline, *extra)

    @property
    def posting(self) -> tuple[lambda_.Function, ...]:
        """The functions that post events to the app's connections (``$disconnect``: to the
        devices that stay, when one leaves)."""
        return (self.message, self.disconnect, self.turn, self.turn_abandoned, self.tool_deadline)

    def _function(self, spec: FunctionSpec, environment: dict[str, str] | None = None) -> lambda_.Function:
        scope = Construct(self, spec.name.capitalize())
        group = log_group(scope, "Logs", self.config)
        role = iam.Role(
            scope,
            "Role",
            assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
            description=f"VoiceIDE conductor {spec.name} function ({self.config.name})",
        )
        role.add_to_policy(
            iam.PolicyStatement(actions=["logs:CreateLogStream", "logs:PutLogEvents"], resources=[group.log_group_arn])
        )
        return lambda_.Function(
            scope,
            "Function",
            description=spec.description,
            runtime=bundling.RUNTIME,
            architecture=bundling.ARCHITECTURE,
            handler=spec.handler,
            code=self.code,
            layers=[self.dependencies],
            memory_size=spec.memory_mb,
            timeout=spec.timeout,
            reserved_concurrent_executions=spec.reserved_concurrency,
            environment=environment if environment is not None else self.environment,
            tracing=lambda_.Tracing.ACTIVE,
            log_group=group,
            role=role,
        )
