"""Per-stage settings, read from the cdk.json context key ``stages`` and validated with pydantic.

A stage is chosen with ``-c stage=<name>`` (default ``dev``). An unknown stage or an invalid
setting fails synth with a message that names the stage and the offending field.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from shared.wire.model_rules import Effort, ThinkingSetting

DEFAULT_STAGE = "dev"
CDK_JSON = Path(__file__).resolve().parent.parent / "cdk.json"

# CloudWatch Logs accepts only these retention periods (days).
LOG_RETENTION_DAYS: tuple[int, ...] = (
    1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731,
    1096, 1827, 2192, 2557, 2922, 3288, 3653,
)  # fmt: skip

# Geography prefixes of Bedrock cross-region inference profile ids ("us.anthropic.claude-...").
INFERENCE_PROFILE_PREFIXES: frozenset[str] = frozenset({"us", "us-gov", "eu", "apac", "jp", "au", "ca", "global"})

Region = Annotated[str, Field(pattern=r"^[a-z]{2}(-gov)?-[a-z]+-\d$")]
STAGE_NAME = re.compile(r"^[a-z][a-z0-9-]{0,19}$")


class StageConfigError(ValueError):
    """The stage configuration is missing or invalid."""


class UnknownStageError(StageConfigError):
    """The requested stage is not defined in the ``stages`` context."""


class _Settings(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class TokenPrices(_Settings):
    """The model's list prices in US dollars per million tokens (aws.amazon.com/bedrock/pricing/, the
    stage's region and endpoint type): what the spend alarm weighs each kind of token with."""

    input: float = Field(gt=0)
    output: float = Field(gt=0)
    cache_write: float = Field(gt=0)
    cache_read: float = Field(gt=0)
    # The day these prices were read from the pricing page: each turn's turnUsage says it.
    as_of: str | None = Field(default=None, pattern=r"^\d{4}-\d{2}-\d{2}$")


class BedrockSettings(_Settings):
    """The model the message Lambda streams from."""

    model_id: str = Field(pattern=r"^[a-z0-9-]+(\.[a-z0-9-]+)+(:\d+)?(:[a-z0-9-]+)?$")
    region: Region | None = None
    inference_profile_regions: tuple[Region, ...] = ()
    max_tokens: int = Field(default=1024, ge=1, le=64_000)
    # How hard the model thinks before it answers (BEDROCK_EFFORT, BEDROCK_THINKING): off where the
    # model allows it; adaptive-only models think adaptively at this effort. Voice wants the first
    # word soon, so both stages ask for little.
    effort: Effort = "low"
    thinking: ThinkingSetting = "off"
    # The model's prices (the spend alarm, alarms.bedrock_usd_per_hour); every stage states them.
    prices: TokenPrices | None = None
    # The account's Bedrock quotas for this model in the stage's region, as granted (Service Quotas,
    # Amazon Bedrock; ``voiceide-conductor doctor --stage <name>`` reads them): tokens and requests per
    # minute. None: the capacity model assumes the documented defaults (benchmarks/aws_quotas.py).
    tokens_per_minute: int | None = Field(default=None, ge=1)
    requests_per_minute: int | None = Field(default=None, ge=1)

    @property
    def profile_geography(self) -> str | None:
        """The geography prefix when ``model_id`` is a cross-region inference profile id."""
        prefix = self.model_id.split(".", 1)[0]
        return prefix if prefix in INFERENCE_PROFILE_PREFIXES else None

    @property
    def is_inference_profile(self) -> bool:
        return self.profile_geography is not None

    @property
    def foundation_model_id(self) -> str:
        """The foundation model id behind ``model_id`` (the profile id without its prefix)."""
        if self.is_inference_profile:
            return self.model_id.split(".", 1)[1]
        return self.model_id

    @model_validator(mode="after")
    def _profile_regions(self) -> BedrockSettings:
        if self.is_inference_profile and not self.inference_profile_regions:
            raise ValueError(
                f"model_id {self.model_id!r} is a cross-region inference profile: list the regions it "
                "routes to in inference_profile_regions"
            )
        if not self.is_inference_profile and self.inference_profile_regions:
            raise ValueError(
                f"model_id {self.model_id!r} is a foundation model id: inference_profile_regions "
                "only applies to inference profile ids (us., eu., apac., global., ...)"
            )
        return self


# What Lambda keeps unreserved of an account's concurrency in a region: a function's reserved concurrency
# may not bring the unreserved pool below 100 (Lambda refuses the deploy: "decreases account's
# UnreservedConcurrentExecution below its minimum value"), and every function without a reservation
# (connect, disconnect, the authorizer, ...) runs in that pool. The quota itself (Service Quotas, AWS
# Lambda, "Concurrent executions", L-B99A9384) is 1,000 by default but 10 or 50 in many new accounts,
# so no stage may assume it: synth reserves only what a quota ``doctor`` read proves (infra/reservations.py).
MIN_UNRESERVED_CONCURRENCY = 100
LAMBDA_CONCURRENCY_QUOTA_CODE = "L-B99A9384"


class LambdaSettings(_Settings):
    """Sizing of the Lambda functions.

    ``$default`` (message) only decides, commits and launches the turn, within API Gateway's 29 s
    integration timeout; the model stream runs in the turn runner, which may take minutes.

    ``turn_reserved_concurrency`` is what the stage WANTS set aside for the turn runner (a cap too): a
    runner holds its slot for up to ``turn_timeout_seconds``, so a burst of long turns would otherwise take
    the account's whole pool and throttle ``$connect`` and ``$default``. Beyond the cap a launch waits in
    Lambda's event queue (at most a minute) and then ends as an abandoned turn. ``reserved_concurrency``
    does the same for ``$default``. Synth applies them only where the stage pins its account and a quota
    ``doctor`` recorded for it leaves ``MIN_UNRESERVED_CONCURRENCY`` unreserved (infra/reservations.py);
    otherwise the stage reserves nothing and deploys at any quota.

    ``planned_account_concurrency`` is a plan (the quota the operator means to request), for the capacity
    report's "stated, unconfirmed" figures only: synth never trusts it.
    """

    message_memory_mb: int = Field(default=512, ge=128, le=10_240)
    message_timeout_seconds: int = Field(default=29, ge=3, le=29)
    turn_memory_mb: int = Field(default=1024, ge=128, le=10_240)
    turn_timeout_seconds: int = Field(default=600, ge=30, le=900)
    turn_reserve_ms: int = Field(default=15_000, ge=1_000)
    handler_memory_mb: int = Field(default=256, ge=128, le=10_240)
    # connect/disconnect/authorizer: API Gateway gives up on an integration after 29 s.
    handler_timeout_seconds: int = Field(default=10, ge=1, le=29)
    reserved_concurrency: int | None = Field(default=None, ge=1)
    turn_reserved_concurrency: int | None = Field(default=None, ge=1)
    planned_account_concurrency: int | None = Field(default=None, ge=1)

    @property
    def reserved(self) -> int:
        """Executions the stage wants reserved (the turn runner's and ``$default``'s)."""
        return (self.turn_reserved_concurrency or 0) + (self.reserved_concurrency or 0)

    @model_validator(mode="before")
    @classmethod
    def _replaced_settings(cls, data: Any) -> Any:
        if isinstance(data, Mapping) and "account_concurrency" in data:
            raise ValueError(
                "lambdas.account_concurrency was removed: a stated quota never makes synth reserve. Pin the "
                'stage\'s account ("account") and run `voiceide-conductor doctor --stage <name>`, which records the '
                "quota it reads in cdk.context.json; a planning figure goes in lambdas.planned_account_concurrency"
            )
        return data

    @model_validator(mode="after")
    def _reserve_below_timeout(self) -> LambdaSettings:
        budget_ms = self.turn_timeout_seconds * 1000
        if self.turn_reserve_ms > budget_ms - 10_000:
            raise ValueError(
                f"turn_reserve_ms ({self.turn_reserve_ms}) must leave at least 10 s of the "
                f"turn timeout ({budget_ms} ms) for the turn"
            )
        return self


class ThrottleSettings(_Settings):
    """Default route throttling of the WebSocket stage."""

    rate_limit: float = Field(gt=0, le=10_000)
    burst_limit: int = Field(ge=1, le=5_000)


class AlarmSettings(_Settings):
    """Thresholds of the stage's alarms (docs/operations.md).

    Rate alarms fire when the rate is at or above its threshold in 3 of 5 five-minute periods, so
    one bad minute of a quiet stage does not page anyone.
    """

    # Errors the conductor sends (conductor_error/handler_error, bedrock_error), per turn;
    # failed or throttled invocations of a function, per invocation; API integration errors.
    error_rate_percent: float = Field(default=5.0, gt=0, le=100)
    # Requests API Gateway refuses before any function runs (ClientError of the WebSocket stage: throttled
    # frames, refused sign-ins, oversized frames), per request the app made.
    client_error_rate_percent: float = Field(default=10.0, gt=0, le=100)
    # p99 duration of $default and the turn runner, as a share of the function's timeout.
    duration_percent_of_timeout: float = Field(default=80.0, ge=10, le=100)
    # Bedrock spend guard: the estimated US dollars of one hour's tokens (input, output, cache reads and
    # writes, and what dropped speculations spent) at the stage's bedrock.prices.
    bedrock_usd_per_hour: float = Field(default=10.0, gt=0)
    # A second, lower spend alarm near the stage's expected load (the capacity target's hourly spend): it
    # tells someone when the stage spends what its plan expects, long before the ceiling above. None: none.
    bedrock_usd_per_hour_expected: float | None = Field(default=None, gt=0)

    @model_validator(mode="before")
    @classmethod
    def _replaced_settings(cls, data: Any) -> Any:
        if isinstance(data, Mapping) and "output_tokens_per_hour" in data:
            raise ValueError(
                "alarms.output_tokens_per_hour was replaced by alarms.bedrock_usd_per_hour: the spend alarm "
                "estimates the dollars of an hour's input, output and cache tokens (dropped speculations' too) "
                'at bedrock.prices; write e.g. "bedrock_usd_per_hour": 5'
            )
        return data

    @model_validator(mode="after")
    def _expected_below_ceiling(self) -> AlarmSettings:
        expected = self.bedrock_usd_per_hour_expected
        if expected is not None and expected >= self.bedrock_usd_per_hour:
            raise ValueError(
                f"bedrock_usd_per_hour_expected ({expected:g}) must be below bedrock_usd_per_hour "
                f"({self.bedrock_usd_per_hour:g}): it is the earlier alarm, at the load the stage expects"
            )
        return self


# What a new on-demand DynamoDB table (and each new global secondary index) serves at once, before it
# has scaled: 12,000 read and 4,000 write units a second. Warm throughput below these changes nothing.
ON_DEMAND_WARM_READ_UNITS = 12_000
ON_DEMAND_WARM_WRITE_UNITS = 4_000


class CapacitySettings(_Settings):
    """What the stage's table must serve from its first minute (docs/capacity.md: write units a second per
    person speaking): DynamoDB warm throughput of the table and of its sessions index. A new on-demand table
    starts at ``ON_DEMAND_WARM_*``; above that, the stage pre-warms it, a one-time charge per raise (the
    value can never be lowered again). None: the on-demand start, nothing paid."""

    warm_read_units_per_second: int | None = Field(default=None, ge=ON_DEMAND_WARM_READ_UNITS)
    warm_write_units_per_second: int | None = Field(default=None, ge=ON_DEMAND_WARM_WRITE_UNITS)
    index_warm_read_units_per_second: int | None = Field(default=None, ge=ON_DEMAND_WARM_READ_UNITS)
    index_warm_write_units_per_second: int | None = Field(default=None, ge=ON_DEMAND_WARM_WRITE_UNITS)


class SessionsSettings(_Settings):
    """The sessions API (docs/sessions-api.md)."""

    # How long an ended session is kept (CONDUCTOR_ENDED_RETENTION_SECONDS, every function): ending one
    # sets the expiry (DynamoDB TTL) of all its items to this long after the end, and the ended state's
    # later writes keep that date. Erasing deletes at once.
    ended_retention_days: int = Field(default=30, ge=1)

    @property
    def ended_retention_seconds(self) -> int:
        return self.ended_retention_days * 24 * 3600


# How long AgentCore Memory keeps a memory's events (the raw turns its strategies extract from), in days:
# AWS::BedrockAgentCore::Memory's EventExpiryDuration accepts 3 to 365, the CreateMemory API documents
# 7 to 3650; a stage stays within both.
MEMORY_EVENT_EXPIRY_DAYS = (7, 365)


class MemorySettings(_Settings):
    """Long-term memory across sessions (docs/deploying.md, "Memory across sessions"): one Amazon Bedrock
    AgentCore Memory per stage (infra/constructs/memory.py). ``event_expiry_days``: how long the memory keeps
    each turn's event; the records its strategies extract from them stay until forgotten. Off: no memory
    resource, and no function gets ``CONDUCTOR_MEMORY_ID`` (the conductor remembers nothing)."""

    enabled: bool = False
    event_expiry_days: int = Field(default=30, ge=MEMORY_EVENT_EXPIRY_DAYS[0], le=MEMORY_EVENT_EXPIRY_DAYS[1])


# MCP servers (docs/deploying.md, "Tools on MCP servers"): the name the model sees a server's tools under
# (mcp.<server>.<tool>), and the one a stage's AgentCore Gateway takes.
MCP_SERVER_NAME = re.compile(r"^[a-z][a-z0-9-]{0,19}$")
GATEWAY_SERVER_NAME = "gateway"
# A secret's complete ARN, as Secrets Manager shows it (the name and its 6-character suffix): IAM matches a
# grant's resource against that ARN, so a partial ARN (no suffix) would grant nothing.
SECRET_ARN = (
    r"^arn:aws[a-z-]*:secretsmanager:[a-z]{2}(-gov)?-[a-z]+-\d:\d{12}:secret:[A-Za-z0-9/_+=.@-]+-[A-Za-z0-9]{6}$"
)
# A Lambda function's ARN, unqualified or with a version or alias (AWS::BedrockAgentCore::GatewayTarget LambdaArn).
LAMBDA_FUNCTION_ARN = (
    r"^arn:aws[a-z-]*:lambda:[a-z]{2}(-gov)?-[a-z]+-\d:\d{12}:function:[A-Za-z0-9_-]{1,64}"
    r"(:(\$LATEST|[A-Za-z0-9_-]{1,128}))?$"
)
# A gateway target's name: the gateway offers its tools as <target>___<tool>.
GATEWAY_TARGET_NAME = r"^[a-z][a-z0-9]*(-[a-z0-9]+)*$"
# What a gateway's inline tool schema may say (AWS::BedrockAgentCore::GatewayTarget SchemaDefinition).
TOOL_SCHEMA_TYPES = frozenset({"string", "number", "integer", "boolean", "object", "array"})
TOOL_SCHEMA_KEYS = frozenset({"type", "description", "properties", "required", "items"})
ToolName = Annotated[str, Field(min_length=1, max_length=128)]


def https_url(url: str) -> str:
    """``url`` when it is an https:// URL with a host; deployed stages reach MCP servers over TLS only."""
    parts = urlsplit(url)
    if parts.scheme != "https" or not parts.hostname:
        raise ValueError(
            f"{url!r} is not an https:// URL: a deployed stage reaches MCP servers over https only (the local "
            "stack takes http URLs through CONDUCTOR_MCP_SERVERS)"
        )
    return url


def check_tool_schema(schema: Any, where: str = "input_schema") -> None:
    """Raise ValueError unless ``schema`` is the JSON Schema subset a gateway's inline tool schema holds:
    ``type`` (one of ``TOOL_SCHEMA_TYPES``), ``description``, ``properties`` and ``required`` (objects),
    ``items`` (arrays)."""
    if not isinstance(schema, Mapping):
        raise ValueError(f"{where} must be an object")
    unknown = set(schema) - TOOL_SCHEMA_KEYS
    if unknown:
        raise ValueError(
            f"{where} has {', '.join(sorted(unknown))}: a gateway's inline schema takes only "
            f"{', '.join(sorted(TOOL_SCHEMA_KEYS))}"
        )
    kind = schema.get("type")
    if kind not in TOOL_SCHEMA_TYPES:
        raise ValueError(f"{where}.type must be one of {', '.join(sorted(TOOL_SCHEMA_TYPES))}")
    properties = schema.get("properties", {})
    if properties and kind != "object":
        raise ValueError(f"{where}: properties apply to an object only")
    if not isinstance(properties, Mapping):
        raise ValueError(f"{where}.properties must be an object")
    for name, child in properties.items():
        check_tool_schema(child, f"{where}.properties.{name}")
    required = schema.get("required", [])
    if not isinstance(required, list) or not set(required) <= set(properties):
        raise ValueError(f"{where}.required must list names of its properties")
    if "items" in schema:
        if kind != "array":
            raise ValueError(f"{where}: items apply to an array only")
        check_tool_schema(schema["items"], f"{where}.items")


class ToolRules(_Settings):
    """What the stage says of one server's tools, by the tool's name on that server."""

    allow: tuple[ToolName, ...] = ()  # run without asking even if not read-only
    deny: tuple[ToolName, ...] = ()  # never offered
    background: tuple[ToolName, ...] = ()  # always run in the background

    @model_validator(mode="after")
    def _rules_agree(self) -> ToolRules:
        for other in ("allow", "background"):
            both = set(self.deny) & set(getattr(self, other))
            if both:
                names = ", ".join(sorted(both))
                raise ValueError(f"{names}: in both deny and {other} (a denied tool is never offered)")
        return self


class McpServerSettings(ToolRules):
    """A server the conductor calls directly (streamable HTTP). ``auth`` "bearer": the token is the value of
    the Secrets Manager secret ``token_secret_arn``, read by the functions that call the server (only they
    may read it). A literal token is the local stack's only, never a template's."""

    name: str
    url: str
    auth: Literal["none", "bearer"] = "none"
    token_secret_arn: str | None = Field(default=None, pattern=SECRET_ARN)

    @model_validator(mode="before")
    @classmethod
    def _no_literal_token(cls, data: Any) -> Any:
        if isinstance(data, Mapping) and "token" in data:
            raise ValueError(
                "a literal token is for the local stack only (CONDUCTOR_MCP_SERVERS): put the token in a Secrets "
                'Manager secret and name its ARN in token_secret_arn, with "auth": "bearer"'
            )
        return data

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if not MCP_SERVER_NAME.match(value):
            raise ValueError(f"server name {value!r}: 1-20 lowercase letters, digits or '-', starting with a letter")
        return value

    @field_validator("url")
    @classmethod
    def _url(cls, value: str) -> str:
        return https_url(value)

    @model_validator(mode="after")
    def _token(self) -> McpServerSettings:
        if self.auth == "bearer" and self.token_secret_arn is None:
            raise ValueError(
                f'server {self.name!r}: "auth": "bearer" needs token_secret_arn (the secret holding the token)'
            )
        if self.auth == "none" and self.token_secret_arn is not None:
            raise ValueError(f'server {self.name!r}: token_secret_arn needs "auth": "bearer"')
        return self


class GatewayTool(_Settings):
    """One tool of a Lambda target: what the gateway lists and validates the call's arguments against."""

    name: str = Field(pattern=r"^[A-Za-z0-9_-]{1,64}$")
    description: str = Field(min_length=1, max_length=1024)
    input_schema: dict[str, Any]

    @field_validator("input_schema")
    @classmethod
    def _schema(cls, value: dict[str, Any]) -> dict[str, Any]:
        check_tool_schema(value)
        return value


class McpServerTarget(_Settings):
    """An MCP server behind the gateway, by its https URL. It is called with no outbound credentials (the
    gateway's "No authorization"): a server that needs a token is named in ``mcp.servers`` instead."""

    type: Literal["mcp_server"]
    name: str = Field(pattern=GATEWAY_TARGET_NAME, max_length=32)
    description: str | None = Field(default=None, min_length=1, max_length=200)
    url: str

    @field_validator("url")
    @classmethod
    def _url(cls, value: str) -> str:
        return https_url(value)


class LambdaTarget(_Settings):
    """A Lambda function behind the gateway, by its ARN, with the tools it serves: the gateway invokes it with
    its own role (the only outbound authorization Lambda targets take)."""

    type: Literal["lambda"]
    name: str = Field(pattern=GATEWAY_TARGET_NAME, max_length=32)
    description: str | None = Field(default=None, min_length=1, max_length=200)
    function_arn: str = Field(pattern=LAMBDA_FUNCTION_ARN)
    tools: tuple[GatewayTool, ...] = Field(min_length=1)

    @model_validator(mode="after")
    def _unique_tools(self) -> LambdaTarget:
        names = [tool.name for tool in self.tools]
        if len(set(names)) != len(names):
            raise ValueError(f"target {self.name!r} names a tool twice")
        return self


GatewayTarget = Annotated[McpServerTarget | LambdaTarget, Field(discriminator="type")]


class GatewaySettings(ToolRules):
    """The stage's Amazon Bedrock AgentCore Gateway (infra/constructs/mcp.py): one MCP endpoint in front of
    ``targets``, signed in to with the stage's Cognito tokens; the conductor sees it as the server
    ``gateway``. ``allow``/``deny``/``background`` name its tools as the gateway lists them."""

    enabled: bool = False
    targets: tuple[GatewayTarget, ...] = ()

    @model_validator(mode="after")
    def _targets(self) -> GatewaySettings:
        if self.targets and not self.enabled:
            raise ValueError('gateway targets are listed but the gateway is off: set "enabled": true or drop them')
        names = [target.name for target in self.targets]
        if len(set(names)) != len(names):
            twice = sorted({name for name in names if names.count(name) > 1})
            raise ValueError(f"gateway target names must be unique: {', '.join(twice)}")
        return self


class McpSettings(_Settings):
    """Tools on MCP servers (docs/deploying.md, "Tools on MCP servers"): the servers the conductor calls
    (``CONDUCTOR_MCP_SERVERS`` of the message function and the turn runner) and the stage's gateway."""

    servers: tuple[McpServerSettings, ...] = ()
    gateway: GatewaySettings = GatewaySettings()

    @model_validator(mode="after")
    def _unique_names(self) -> McpSettings:
        names = [server.name for server in self.servers]
        if self.gateway.enabled:
            names.append(GATEWAY_SERVER_NAME)
        twice = sorted({name for name in names if names.count(name) > 1})
        if twice:
            reason = f" ({GATEWAY_SERVER_NAME!r} is the gateway's)" if GATEWAY_SERVER_NAME in twice else ""
            raise ValueError(f"MCP server names must be unique: {', '.join(twice)}{reason}")
        return self

    @property
    def active(self) -> bool:
        """Whether the conductor calls any MCP server on this stage."""
        return bool(self.servers) or self.gateway.enabled

    @property
    def token_secret_arns(self) -> tuple[str, ...]:
        """The secrets holding the servers' tokens, each once."""
        return tuple(sorted({s.token_secret_arn for s in self.servers if s.token_secret_arn is not None}))


class SpeculationSettings(_Settings):
    """Speculative turns (docs/performance.md, "Speculative turns"): the model starts on the app's partial
    transcript once it has stayed the same ``stable_ms``, before the final one; the final confirms it
    (the answer is already on its way) or it is dropped, having cost its input tokens and the few
    output tokens written before it was stopped. Its watcher runs in the turn function: while a
    person speaks, their session holds one of that function's executions
    (``lambdas.turn_reserved_concurrency``)."""

    enabled: bool = False
    stable_ms: int = Field(default=300, ge=100, le=2000)


class FairShareSettings(_Settings):
    """Fair sharing between sessions (``shared.core.admission``): a partial transcript with new words
    sooner than ``min_partial_interval_ms`` after the last one kept is dropped (CONDUCTOR_MIN_PARTIAL_
    INTERVAL_MS); a session's events other than partials beyond ``max_events_per_second`` are answered
    ``rate_limited`` (CONDUCTOR_MAX_EVENTS_PER_SECOND)."""

    min_partial_interval_ms: int = Field(default=150, ge=0, le=5000)
    max_events_per_second: int = Field(default=50, ge=1, le=1000)


AuthMode = Literal["cognito", "dev-signed-token"]
AUTH_MODES: tuple[str, ...] = ("cognito", "dev-signed-token")
NO_AUTH_REFUSAL = (
    "auth 'none' is for the local stack only (voiceide-conductor local); deployed stages use cognito or "
    "dev-signed-token"
)
USER_POOL_ID = r"^(?P<region>[a-z]{2}(-gov)?-[a-z]+-\d)_[0-9a-zA-Z]+$"
APP_CLIENT_ID = r"^[\w+]{1,128}$"


class CognitoPoolSettings(_Settings):
    """The user pool whose tokens open ``$connect`` (``auth: cognito``).

    Without ``user_pool_id`` the stack creates the pool and one app client for the iOS app (public:
    no client secret). With it, the stack uses that existing pool and accepts tokens of the listed
    ``client_ids`` only (at least one).
    """

    user_pool_id: str | None = Field(default=None, pattern=USER_POOL_ID)
    client_ids: tuple[Annotated[str, Field(pattern=APP_CLIENT_ID)], ...] = ()
    # "required": every user enrols an authenticator app (TOTP) at first sign-in.
    mfa: Literal["optional", "required"] = "optional"
    # "plus": Cognito's threat protection (compromised credentials, risky sign-ins), billed per user.
    feature_plan: Literal["essentials", "plus"] = "essentials"
    # Threat protection of password sign-in (needs feature_plan "plus"): "audit" scores and logs every
    # sign-in's risk without acting on it, "full" also blocks or asks for MFA. None: "full" on plus, else off.
    threat_protection: Literal["off", "audit", "full"] | None = None
    self_sign_up: bool = False
    # The app signs in with SRP (ALLOW_USER_SRP_AUTH) and refresh tokens only. True also allows the plain
    # password flow (ALLOW_USER_PASSWORD_AUTH) that the command-line client (voiceide-client) uses: a
    # development stage's setting, never a retaining stage's.
    password_sign_in: bool = False
    # Invitations, password resets and verification e-mails through Amazon SES from a verified identity
    # (address, or a verified domain: ses_verified_domain) instead of Cognito's built-in e-mail, which
    # sends a few dozen a day: a retaining stage that creates its pool must set ses_from_email (synth
    # refuses it otherwise). ses_region: the identity's region where it is not the stage's.
    ses_from_email: str | None = Field(default=None, pattern=r"^[^@\s]+@[^@\s]+\.[^@\s]+$")
    ses_from_name: str | None = Field(default=None, min_length=1, max_length=64)
    ses_reply_to: str | None = Field(default=None, pattern=r"^[^@\s]+@[^@\s]+\.[^@\s]+$")
    ses_region: Region | None = None
    ses_verified_domain: str | None = Field(default=None, pattern=r"^[a-z0-9.-]+\.[a-z]{2,}$")
    # Hosted UI (and Sign in with Apple through the pool): a Cognito domain prefix and the app's
    # redirect URLs (e.g. "voiceide://signin"); none: sign-in only through the app's own screens.
    domain_prefix: str | None = Field(default=None, pattern=r"^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$")
    callback_urls: tuple[str, ...] = ()
    logout_urls: tuple[str, ...] = ()

    @property
    def existing(self) -> bool:
        return self.user_pool_id is not None

    @property
    def pool_region(self) -> str | None:
        """The region of an existing pool (its id starts with it)."""
        match = re.match(USER_POOL_ID, self.user_pool_id or "")
        return match["region"] if match else None

    @model_validator(mode="after")
    def _pool_and_clients(self) -> CognitoPoolSettings:
        if self.existing and not self.client_ids:
            raise ValueError("user_pool_id is set: list the app client ids whose tokens are accepted in client_ids")
        if not self.existing and self.client_ids:
            raise ValueError(
                "client_ids only apply with user_pool_id (an existing pool); without it the stack "
                "creates the pool and its app client"
            )
        if self.existing and (self.domain_prefix or self.callback_urls or self.logout_urls):
            raise ValueError(
                "domain_prefix, callback_urls and logout_urls configure a pool the stack creates; "
                "an existing pool (user_pool_id) keeps its own"
            )
        if self.callback_urls and not self.domain_prefix:
            raise ValueError("callback_urls need domain_prefix (the hosted UI redirects to them)")
        if self.existing and (self.ses_settings or self.password_sign_in or self.threat_protection):
            raise ValueError(
                "ses_*, password_sign_in and threat_protection configure a pool the stack creates; an existing "
                "pool (user_pool_id) keeps its own"
            )
        if self.threat_mode != "off" and self.feature_plan != "plus":
            raise ValueError(
                f'threat_protection "{self.threat_mode}" needs feature_plan "plus" (Cognito offers threat '
                "protection on the Plus plan only)"
            )
        if (self.ses_settings - {"ses_from_email"}) and not self.ses_from_email:
            raise ValueError("ses_from_name, ses_reply_to, ses_region and ses_verified_domain need ses_from_email")
        domain = self.ses_verified_domain
        if domain and self.ses_from_email and not self.ses_from_email.endswith(f"@{domain}"):
            raise ValueError(
                f"ses_from_email {self.ses_from_email!r} is not an address of ses_verified_domain {domain!r}"
            )
        return self

    @property
    def ses_settings(self) -> set[str]:
        """The SES settings the stage gives."""
        return {name for name in self.model_fields_set if name.startswith("ses_") and getattr(self, name)}

    @property
    def threat_mode(self) -> Literal["off", "audit", "full"]:
        """Threat protection as applied: ``threat_protection``, or "full" on the Plus plan and off otherwise."""
        if self.threat_protection is not None:
            return self.threat_protection
        return "full" if self.feature_plan == "plus" else "off"


class StageConfig(_Settings):
    """Everything that differs between deployments of the conductor."""

    name: str
    region: Region
    account: str | None = Field(default=None, pattern=r"^\d{12}$")
    service_name: str = Field(default="voiceide-conductor", pattern=r"^[A-Za-z0-9_.-]{1,64}$")
    metrics_namespace: str = Field(default="VoiceIDE/Conductor", pattern=r"^[A-Za-z0-9_./#:-]{1,255}$")
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    log_retention_days: int
    removal_policy: Literal["retain", "destroy"]
    # Who may open $connect and call the sessions API: "cognito" (the stage's user pool; the default) or
    # "dev-signed-token" (HMAC tokens minted with the stage's secret; CI rigs, no sessions API). Every
    # deployed stage requires sign-in: "none" exists only in the local stack.
    auth: AuthMode = "cognito"
    cognito: CognitoPoolSettings = CognitoPoolSettings()
    # The conductor's per-session limit on turns (CONDUCTOR_MAX_TURNS_PER_MINUTE).
    max_turns_per_minute: int = Field(default=30, ge=1, le=600)
    # "Still running …" for a foreground tool call (CONDUCTOR_PROGRESS_AFTER_MS / _EVERY_MS; 0: off).
    progress_after_ms: int = Field(default=3000, ge=0, le=600_000)
    progress_every_ms: int = Field(default=10_000, ge=2000, le=600_000)
    # A person's spend a day in US dollars at bedrock.prices (CONDUCTOR_DAILY_BUDGET_USD; 0: no ceiling).
    daily_budget_usd: float = Field(default=0.0, ge=0)
    # Who hears the stage's alarms: an e-mail address subscribed to the stage's alarm topic, and/or an
    # existing SNS topic (chat, paging) every alarm notifies as well. With neither, synth warns.
    alarm_email: str | None = Field(default=None, pattern=r"^[^@\s]+@[^@\s]+\.[^@\s]+$")
    alarm_topic_arn: str | None = Field(
        default=None, pattern=r"^arn:aws[a-z-]*:sns:[a-z]{2}(-gov)?-[a-z]+-\d:\d{12}:[A-Za-z0-9_-]{1,256}(\.fifo)?$"
    )
    max_tool_rounds: int = Field(default=8, ge=1, le=50)
    # WebSocket access logging needs API Gateway's CloudWatch Logs role, one setting per account and
    # region: exactly one stage there owns it (sets it, keeps it on deletion); the others rely on it.
    api_gateway_cloudwatch_role: bool = False
    # Access logs of the WebSocket stage. API Gateway refuses to deploy a stage with access logging in a
    # region whose account setting names no CloudWatch Logs role, so by default ("auto") a stage logs
    # only when it sets that role itself (api_gateway_cloudwatch_role): a stage deploys into a fresh
    # account. "on": the role is known to be set (by another stage or by hand); "off": never.
    access_logging: Literal["auto", "on", "off"] = "auto"
    bedrock: BedrockSettings
    lambdas: LambdaSettings = LambdaSettings()
    throttle: ThrottleSettings
    alarms: AlarmSettings = AlarmSettings()
    sessions: SessionsSettings = SessionsSettings()
    memory: MemorySettings = MemorySettings()
    speculation: SpeculationSettings = SpeculationSettings()
    fair_share: FairShareSettings = FairShareSettings()
    capacity: CapacitySettings = CapacitySettings()
    mcp: McpSettings = McpSettings()

    @model_validator(mode="before")
    @classmethod
    def _replaced_settings(cls, data: Any) -> Any:
        if isinstance(data, Mapping) and "authorizer" in data:
            raise ValueError(
                "'authorizer' was replaced by 'auth': write \"auth\": \"cognito\" (sign-in through the stage's "
                'Cognito user pool) or "auth": "dev-signed-token" (HMAC tokens of a CI rig)'
            )
        if isinstance(data, Mapping) and data.get("auth") == "none":
            raise ValueError(NO_AUTH_REFUSAL)
        return data

    @model_validator(mode="after")
    def _auth(self) -> StageConfig:
        if self.auth != "cognito" and "cognito" in self.model_fields_set:
            raise ValueError(f'\'cognito\' settings apply only with "auth": "cognito" (this stage has {self.auth!r})')
        return self

    @model_validator(mode="after")
    def _gateway_sign_in(self) -> StageConfig:
        if self.mcp.gateway.enabled and self.auth != "cognito":
            raise ValueError(
                f'mcp.gateway needs "auth": "cognito": the gateway accepts tokens of the stage\'s user pool only '
                f"(this stage has {self.auth!r})"
            )
        return self

    @model_validator(mode="after")
    def _prices(self) -> StageConfig:
        if self.bedrock.prices is None:
            raise ValueError(
                f"bedrock.prices is missing: the spend alarm (alarms.bedrock_usd_per_hour) weighs tokens by the "
                f'model\'s price; put "prices": {{"input": …, "output": …, "cache_write": …, "cache_read": …}} '
                f"(USD per million tokens, aws.amazon.com/bedrock/pricing/) in stages.{self.name}.bedrock"
            )
        return self

    @field_validator("name")
    @classmethod
    def _stage_name(cls, value: str) -> str:
        if not STAGE_NAME.match(value):
            raise ValueError("stage names are 1-20 lowercase letters, digits or '-', starting with a letter")
        return value

    @field_validator("log_retention_days")
    @classmethod
    def _retention(cls, value: int) -> int:
        if value not in LOG_RETENTION_DAYS:
            raise ValueError(f"log_retention_days must be one of {', '.join(map(str, LOG_RETENTION_DAYS))}")
        return value

    @property
    def retain(self) -> bool:
        return self.removal_policy == "retain"

    @property
    def authorizer(self) -> bool:
        """Whether ``$connect`` has a Lambda authorizer: on every deployed stage (no auth mode is open)."""
        return self.auth in AUTH_MODES

    @property
    def alarm_listeners(self) -> tuple[str, ...]:
        """Who hears the stage's alarms: the e-mail address and the topic it names (empty: nobody)."""
        return tuple(who for who in (self.alarm_email, self.alarm_topic_arn) if who)

    @property
    def access_logs(self) -> bool:
        """Whether the WebSocket stage writes access logs (see ``access_logging``)."""
        if self.access_logging == "auto":
            return self.api_gateway_cloudwatch_role
        return self.access_logging == "on"

    @property
    def http_access_logs(self) -> bool:
        """Whether the sessions API's HTTP stage writes access logs: unless ``access_logging`` is
        "off". An HTTP API delivers its access logs through CloudWatch Logs' log delivery (permissions
        of whoever deploys), never through the account's API Gateway logging role, so "auto" logs on
        every stage: the reason it holds back WebSocket logs does not apply."""
        return self.access_logging != "off"

    @property
    def sessions_api(self) -> bool:
        """Whether the stage serves the sessions API: with Cognito sign-in (API Gateway's JWT authorizer
        checks the pool's tokens on every route). A "dev-signed-token" stage has none: API Gateway
        cannot check its HMAC tokens, and an API open to anyone would hand out every user's sessions."""
        return self.auth == "cognito"

    @property
    def bedrock_region(self) -> str:
        return self.bedrock.region or self.region

    @property
    def stack_name(self) -> str:
        return f"VoiceIDEConductor-{self.name}"


def read_cdk_json_context(path: Path = CDK_JSON) -> dict[str, Any]:
    """The ``context`` block of cdk.json (empty when the file has none)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except json.JSONDecodeError as exc:
        raise StageConfigError(f"{path} is not valid JSON: {exc}") from exc
    context = data.get("context", {})
    if not isinstance(context, dict):
        raise StageConfigError(f"{path}: 'context' must be an object")
    return context


def parse_stages_context(raw: Any) -> Mapping[str, Any]:
    """The ``stages`` context value as a mapping (``-c stages=<json>`` arrives as a string)."""
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise StageConfigError(f"context 'stages' is not valid JSON: {exc}") from exc
    if not isinstance(raw, Mapping) or not raw:
        raise StageConfigError("context 'stages' must be a non-empty object of stage name -> settings (see cdk.json)")
    return raw


# A context key that overrides one setting of one stage: ``-c stages.prod.alarm_email=oncall@example.com``,
# ``-c stages.prod.cognito.ses_from_email=no-reply@example.com``. The deploying operator gives what cdk.json
# must not hold (an address, an account's own settings) without editing it.
OVERRIDE_PREFIX = "stages."


def apply_overrides(stages: Any, context: Mapping[str, Any]) -> dict[str, Any]:
    """``stages`` with every ``stages.<stage>.<setting>[.<setting>...]`` key of ``context`` set in it.

    A value from the command line is a string: ``null`` means None, a JSON array or object is parsed,
    anything else stays a string (the settings' validation reads numbers and booleans from strings)."""
    merged = json.loads(json.dumps(parse_stages_context(stages)))
    for key, value in sorted(context.items()):
        if not key.startswith(OVERRIDE_PREFIX):
            continue
        path = key[len(OVERRIDE_PREFIX) :].split(".")
        if len(path) < 2 or not all(path):
            raise StageConfigError(f"context {key!r}: write -c stages.<stage>.<setting>=<value>")
        if path[0] not in merged:
            known = ", ".join(sorted(merged))
            raise StageConfigError(f"context {key!r} names no stage of cdk.json (known: {known})")
        node = merged
        for part in path[:-1]:
            child = node.get(part)
            if child is None:
                child = node[part] = {}
            if not isinstance(child, dict):
                raise StageConfigError(f"context {key!r}: {part!r} is not a group of settings")
            node = child
        node[path[-1]] = _override_value(value)
    return merged


def _override_value(value: Any) -> Any:
    if not isinstance(value, str):
        return value
    text = value.strip()
    if text == "null":
        return None
    if text and text[0] in "[{":
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            raise StageConfigError(f"context value {value!r} is not valid JSON: {exc}") from exc
    return value


def select_stage(stages: Any, stage: str | None) -> StageConfig:
    """Validate and return the settings of ``stage`` (``dev`` when None) from ``stages``.

    What a stage needs before it deploys (someone to alarm, a proven reservation) is checked by synth
    only (infra/stage_checks.py, infra/reservations.py): doctor and the capacity model read every stage."""
    stages = parse_stages_context(stages)
    name = stage or DEFAULT_STAGE
    if name not in stages:
        known = ", ".join(sorted(stages))
        raise UnknownStageError(f"Unknown stage {name!r}. Known stages: {known}. Choose one with -c stage=<name>.")
    settings = stages[name]
    if not isinstance(settings, Mapping):
        raise StageConfigError(f"stage {name!r}: settings must be an object")
    try:
        return StageConfig.model_validate({**settings, "name": name})
    except ValidationError as exc:
        raise StageConfigError(f"stage {name!r} has invalid settings:\n{exc}") from exc


def is_true(value: Any) -> bool:
    """Context flags arrive as strings from ``-c key=value`` and as booleans from cdk.json."""
    if isinstance(value, bool):
        return value
    return str(value).strip().lower() in {"1", "true", "yes", "on"}
