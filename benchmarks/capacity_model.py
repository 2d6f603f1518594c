"""How many people speaking at once a stage holds, which limit binds first, and what an active
user-hour costs: from what ONE active speaker was measured to cost per minute.

``make capacity`` (``benchmarks/capacity_report.py``) measures one speaker first
(``benchmarks.speaker_meter``: the person of ``benchmarks.talker.SESSION`` on the local stack, with
each stage's model and speculation setting). Then, for each stage of cdk.json, every limit the
speakers' load runs into is turned into a number of people:

    people = limit / (what one speaker uses of it)

Some limits are the stage's own settings (the route throttle, the reserved concurrency synth
applies); the rest are the account's AWS quotas, taken three ways (``COLUMNS``):

* ``defaults``: AWS's documented defaults (``benchmarks.aws_quotas``); with no quota reading synth
  reserves no concurrency (``infra/reservations.py``), so none is reserved here;
* ``read``: what ``voiceide-conductor doctor`` read in the stage's pinned account and region
  (cdk.context.json, ``infra.quota_readings``), defaults for what it did not read; none without a
  reading;
* ``stated``: the plans cdk.json states (``lambdas.planned_account_concurrency``,
  ``bedrock.tokens_per_minute``, ``bedrock.requests_per_minute``): quotas asked for, not granted.

Each limit says where its figure comes from (``Limit.basis``) and whether it is a setting or an
AWS quota (``Limit.kind``). The smallest is what the stage holds; ``Capacity.first_quota`` is the
first AWS quota to bind. ``changes_to_hold`` says what it would take to hold a target and
``cost_per_user_hour`` what an hour of talk costs at list prices (``benchmarks.costs.PRICES``).

Long-term memory (Amazon Bedrock AgentCore Memory) is held apart: a stage runs without it when it has
no memory, so its quotas (``memory_limits``, at AWS's defaults: doctor reads none of them) rank on
their own in ``memory_capacity`` and ``memory_changes_to_hold`` says what holding a target with it
takes; what it asks per speaker comes from the measured turn rate and the stated assumptions of
``benchmarks.capacity_memory``. Its cost is in ``cost_per_user_hour`` beside the other services'.
Pure arithmetic: nothing here measures or prints.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from benchmarks import aws_quotas
from benchmarks import capacity_memory as memory
from benchmarks.costs import PRICES
from shared.wire.model_rules import Inference, base_model_id, request_fields, rules_for

TARGETS = {"prod": 1_000, "dev": 10}
"""People speaking at once each stage must hold."""
TURN_FUNCTION = ("turn", "watcher")
"""The turn runner and the speculation watcher: two kinds of invocation of one function."""
ROUTE_FUNCTIONS = ("message", "connect", "disconnect")
LOCAL_MODEL_ID = "us.anthropic.claude-haiku-5-5"
"""The local stack's default model (``shared.flows.config.Settings.model_id``)."""
MIN_UNRESERVED = 100
"""What Lambda keeps unreserved of an account's concurrency (a reservation may not take it)."""


# ---- what one speaker costs ---------------------------------------------------------------------


@dataclass(frozen=True)
class Flow:
    """What a speaker is measured against: a stage's model (as cdk.json names it, an inference
    profile id), its answer budget, effort and thinking, and its speculation setting."""

    model_id: str
    speculation: bool
    max_tokens: int = 1024
    effort: str = "low"
    thinking: str = "off"

    @property
    def model(self) -> str:
        """The foundation model id (priced and quoted by it)."""
        return base_model_id(self.model_id)

    @classmethod
    def local(cls, speculation: bool) -> Flow:
        """The local stack's own model and defaults."""
        return cls(LOCAL_MODEL_ID, speculation)


@dataclass
class SpeakerFigures:
    """What one person speaking costs per minute, as measured (every figure per minute of talk)."""

    speculation: bool
    minutes: float
    """How many minutes of talk the figures come from."""
    model: str = ""
    """The foundation model measured with (its tokenizer counts the tokens, its rules shape the requests)."""
    turns: float = 0.0
    ws_in: float = 0.0
    """Frames from the app (each a route request: partials, finals, tool results, ...)."""
    ws_in_messages: float = 0.0
    """The same metered as API Gateway bills them (32 KB each)."""
    posts: float = 0.0
    """@connections posts to the app (callback API requests)."""
    ws_out_messages: float = 0.0
    connects: float = 0.0
    disconnects: float = 0.0
    invocations: dict[str, float] = field(default_factory=dict)
    """Per function: message ($default), connect, disconnect, turn (runner), watcher (speculation)."""
    seconds: dict[str, float] = field(default_factory=dict)
    """Per function, execution seconds (= concurrency-seconds)."""
    dynamodb_requests: float = 0.0
    rru: float = 0.0
    wru: float = 0.0
    index_wru: float = 0.0
    """Write units of the sessions index (the session's STATE writes that move its index entry)."""
    bedrock_requests: float = 0.0
    input_tokens: float = 0.0
    """Input neither read from nor written to the prompt cache, as the model counts it."""
    output_tokens: float = 0.0
    cache_read_tokens: float = 0.0
    cache_write_tokens: float = 0.0
    endpoint_input_tokens: float = 0.0
    """All input as the local endpoint estimated it (characters / 4), before calibration."""
    endpoint_output_tokens: float = 0.0
    stream_seconds: float = 0.0
    """Seconds of model streams in flight."""

    def per_second(self, value: float) -> float:
        return value / 60.0

    def concurrency(self, functions: Iterable[str]) -> float:
        """Executions one speaker keeps busy on average (Little's law: seconds per minute / 60)."""
        return sum(self.seconds.get(name, 0.0) for name in functions) / 60.0

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> SpeakerFigures:
        return cls(**dict(data))


LOST_EARLY_LAUNCHES = {False: 0.0, True: 0.0}
"""By speculation setting: the share of a loaded stack's model tokens spent by turns launched
alongside a write that lost its race (``shared.flows.early_launch``: their request is wasted), as
``make load`` measured it (the lost launches' tokens in the turns' ``turnUsage`` over all the run's):
speculation off, 200 and 60 sessions, 0 of 450 and 0 of 135 early launches lost (on a stack
overloaded to a 15 s first partial, 2 of 313, 0.6 %); speculation on, none launched early.
``speaker_meter`` counts every request the model was asked, cut-short ones too, but one speaker
alone never races, so ``under_load`` adds this share."""


def under_load(figures: SpeakerFigures) -> SpeakerFigures:
    """The speaker's Bedrock figures with the lost early launches' share of them added (their
    requests are about one request's input each: requests and tokens grow alike)."""
    share = LOST_EARLY_LAUNCHES.get(figures.speculation, 0.0)
    if share <= 0.0:
        return figures
    grow = 1.0 / (1.0 - share)
    return replace(
        figures,
        bedrock_requests=figures.bedrock_requests * grow,
        input_tokens=figures.input_tokens * grow,
        output_tokens=figures.output_tokens * grow,
        cache_read_tokens=figures.cache_read_tokens * grow,
        cache_write_tokens=figures.cache_write_tokens * grow,
        endpoint_input_tokens=figures.endpoint_input_tokens * grow,
        endpoint_output_tokens=figures.endpoint_output_tokens * grow,
        stream_seconds=figures.stream_seconds * grow,
    )


# ---- a stage as the model sees it ----------------------------------------------------------------


@dataclass(frozen=True)
class StageView:
    name: str
    model: str
    """The foundation model id (without a geography prefix)."""
    max_tokens: int
    """``bedrock.max_tokens``: the answer's budget."""
    speculation: bool
    auth: str
    rate_limit: float
    burst_limit: int
    turn_reserved: int | None
    """The reservation the stage wants for the turn function (synth applies it only with a reading)."""
    message_reserved: int | None
    memory_mb: dict[str, int]
    model_id: str = ""
    """The model as cdk.json names it (an inference profile id): readings are keyed by it."""
    request_max_tokens: int = 0
    """``maxTokens`` the turn's requests carry: the budget plus room for the model's thinking
    (``shared.wire.model_rules.request_fields``); 0: ``max_tokens``."""
    effort: str = "low"
    thinking: str = "off"
    account: str | None = None
    """The AWS account the stage pins (``stages.<stage>.account``)."""
    region: str = "us-east-1"
    planned_concurrency: int | None = None
    """``lambdas.planned_account_concurrency``: the Lambda quota the operator plans to have."""
    bedrock_tpm: int | None = None
    """``bedrock.tokens_per_minute``: the Bedrock tokens-per-minute quota planned for the model."""
    bedrock_rpm: int | None = None
    """``bedrock.requests_per_minute``: the requests-per-minute quota planned for the model."""
    max_turns_per_minute: int | None = None
    """The conductor's per-session turn limit (None: not known here)."""
    warm_write_units: int | None = None
    """``capacity.warm_write_units_per_second``: the table's pre-warmed write units (None: none)."""
    index_warm_write_units: int | None = None
    memory: bool = True
    """Whether the stage has a long-term memory (``memory.enabled``; True where cdk.json does not say)."""
    memory_event_expiry_days: int | None = None
    """``memory.event_expiry_days``: how long its events are kept (None: ``capacity_memory``'s assumption)."""

    @property
    def in_flight_max_tokens(self) -> int:
        """What a request in flight holds of the tokens-per-minute quota until it ends."""
        return self.request_max_tokens or self.max_tokens

    def flow(self) -> Flow:
        return Flow(self.model_id or LOCAL_MODEL_ID, self.speculation, self.max_tokens, self.effort, self.thinking)


def request_max_tokens(model_id: str, max_tokens: int, effort: str, thinking: str) -> int:
    """``maxTokens`` of the conductor's request for this model and inference settings."""
    inference = Inference(max_tokens=max_tokens, effort=effort, thinking=thinking)  # type: ignore[arg-type]
    return int(request_fields(rules_for(model_id), inference)["inferenceConfig"]["maxTokens"])


def stage_view(config: Any) -> StageView:
    """The settings that matter here, from an ``infra.config.StageConfig``."""
    lambdas = config.lambdas
    bedrock = config.bedrock
    capacity_settings = getattr(config, "capacity", None)
    memory_settings = getattr(config, "memory", None)
    return StageView(
        name=config.name,
        model=bedrock.foundation_model_id,
        model_id=bedrock.model_id,
        max_tokens=bedrock.max_tokens,
        request_max_tokens=request_max_tokens(bedrock.model_id, bedrock.max_tokens, bedrock.effort, bedrock.thinking),
        effort=bedrock.effort,
        thinking=bedrock.thinking,
        speculation=config.speculation.enabled,
        auth=config.auth,
        rate_limit=config.throttle.rate_limit,
        burst_limit=config.throttle.burst_limit,
        turn_reserved=lambdas.turn_reserved_concurrency,
        message_reserved=lambdas.reserved_concurrency,
        account=getattr(config, "account", None),
        region=config.region,
        planned_concurrency=_first_set(lambdas, "planned_account_concurrency", "account_concurrency"),
        bedrock_tpm=_first_set(bedrock, "planned_tokens_per_minute", "tokens_per_minute"),
        bedrock_rpm=_first_set(bedrock, "planned_requests_per_minute", "requests_per_minute"),
        max_turns_per_minute=config.max_turns_per_minute,
        warm_write_units=getattr(capacity_settings, "warm_write_units_per_second", None),
        index_warm_write_units=getattr(capacity_settings, "index_warm_write_units_per_second", None),
        memory=bool(getattr(memory_settings, "enabled", True)),
        memory_event_expiry_days=getattr(memory_settings, "event_expiry_days", None),
        memory_mb={
            "message": lambdas.message_memory_mb,
            "turn": lambdas.turn_memory_mb,
            "watcher": lambdas.turn_memory_mb,
            "connect": lambdas.handler_memory_mb,
            "disconnect": lambdas.handler_memory_mb,
        },
    )


def _first_set(settings: Any, *names: str) -> int | None:
    for name in names:
        value = getattr(settings, name, None)
        if value is not None:
            return int(value)
    return None


def stages_of_cdk_json(names: Iterable[str] = ("dev", "prod")) -> list[StageView]:
    from infra.config import read_cdk_json_context, select_stage

    context = read_cdk_json_context()
    return [stage_view(select_stage(context.get("stages"), name)) for name in names]


# ---- the account's quotas, three ways ------------------------------------------------------------

COLUMNS = ("defaults", "read", "stated")
COLUMN_TITLES = {"defaults": "AWS defaults", "read": "doctor's reading", "stated": "stated, unconfirmed"}


@dataclass(frozen=True)
class QuotaValue:
    value: float | None
    """None: no figure to hold the stage to."""
    basis: str
    """"default", "assumed" (no documented default: the nearest figure), "read" or "stated"."""
    source: str
    """A quota key of ``benchmarks.aws_quotas``, a cdk.json setting or the reading's key."""


@dataclass(frozen=True)
class AccountQuotas:
    """The account's quotas a stage is held to in one column."""

    column: str
    lambda_concurrency: QuotaValue
    bedrock_tpm: QuotaValue
    bedrock_rpm: QuotaValue
    reserves: bool
    """Whether the stage's reservations are in force (synth applies them with a reading that holds
    them; the stated column supposes the plans read)."""
    note: str = ""
    """Why the reservations are not in force, or what else the column supposes."""


def _default(key: str | None) -> QuotaValue:
    quota = aws_quotas.QUOTAS.get(key) if key else None
    if quota is None or quota.value is None:
        return QuotaValue(None, "default", key or "")
    return QuotaValue(float(quota.value), "default" if quota.documented else "assumed", quota.key)


def _fits(stage: StageView, concurrency: float | None) -> bool:
    wanted = (stage.turn_reserved or 0) + (stage.message_reserved or 0)
    return concurrency is not None and wanted <= concurrency - MIN_UNRESERVED


def account_quotas(stage: StageView, column: str, reading: Any = None) -> AccountQuotas | None:
    """The quotas of ``column`` for ``stage``; ``reading`` (an ``infra.quota_readings.QuotaReading``)
    for the ``read`` column, which is None without one."""
    wanted = (stage.turn_reserved or 0) + (stage.message_reserved or 0)
    tpm = _default(f"bedrock_tpm:{stage.model}")
    rpm = _default(f"bedrock_rpm:{stage.model}")
    lam = _default("lambda_concurrency")
    if column == "defaults":
        note = "no quota reading: synth reserves nothing" if wanted else ""
        return AccountQuotas(column, lam, tpm, rpm, reserves=False, note=note)
    if column == "read":
        if reading is None:
            return None
        key = f"cdk.context.json voiceide:quotas:{reading.account}:{reading.region}"
        if reading.lambda_concurrency is not None:
            lam = QuotaValue(float(reading.lambda_concurrency), "read", key)
        model = reading.bedrock.get(stage.model_id) or reading.bedrock.get(stage.model)
        if model is not None and model.tokens_per_minute is not None:
            tpm = QuotaValue(float(model.tokens_per_minute), "read", key)
        if model is not None and model.requests_per_minute is not None:
            rpm = QuotaValue(float(model.requests_per_minute), "read", key)
        if not wanted:
            return AccountQuotas(column, lam, tpm, rpm, reserves=False, note=f"read {reading.read_at}")
        if reading.lambda_concurrency is None:
            return AccountQuotas(
                column, lam, tpm, rpm, False, f"read {reading.read_at}; no Lambda quota read: synth reserves nothing"
            )
        if not _fits(stage, lam.value):
            return AccountQuotas(
                column,
                lam,
                tpm,
                rpm,
                False,
                f"read {reading.read_at}; synth refuses: the reservations ({wanted:,}) leave less than "
                f"{MIN_UNRESERVED} of {lam.value:,.0f} unreserved",
            )
        return AccountQuotas(column, lam, tpm, rpm, reserves=True, note=f"read {reading.read_at}")
    if column == "stated":
        if stage.planned_concurrency is not None:
            lam = QuotaValue(float(stage.planned_concurrency), "stated", "cdk.json lambdas.planned_account_concurrency")
        if stage.bedrock_tpm is not None:
            tpm = QuotaValue(float(stage.bedrock_tpm), "stated", "cdk.json bedrock.tokens_per_minute")
        if stage.bedrock_rpm is not None:
            rpm = QuotaValue(float(stage.bedrock_rpm), "stated", "cdk.json bedrock.requests_per_minute")
        fits = _fits(stage, lam.value)
        note = ""
        if wanted and not fits:
            note = f"the reservations ({wanted:,}) leave less than {MIN_UNRESERVED} of {lam.value:,.0f} unreserved"
        elif wanted:
            note = "as if doctor had read the plans: synth reserves"
        return AccountQuotas(column, lam, tpm, rpm, reserves=wanted > 0 and fits, note=note)
    raise ValueError(f"unknown column {column!r}: one of {', '.join(COLUMNS)}")


# ---- limits --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Limit:
    key: str
    """Stable across columns: route, account_rps, new_connections, turn_reserved, message_reserved,
    pool, dynamodb_read, dynamodb_write, dynamodb_index, dynamodb_partition, bedrock_tpm, bedrock_rpm;
    the memory's: memory_extraction, memory_create_event, memory_retrieve, memory_batch_create."""
    name: str
    value: float
    """The limit (in its unit)."""
    per_speaker: float
    """What one speaker uses of it (same unit)."""
    unit: str
    setting: str
    """Where it is set: a cdk.json path, a quota key of ``benchmarks.aws_quotas`` or a reading."""
    basis: str = "default"
    """Where the figure comes from: "setting" (the stage's own), "default" (AWS's documented default),
    "assumed" (no documented default: the nearest figure found), "read" (doctor read it) or "stated"
    (a plan in cdk.json)."""

    @property
    def kind(self) -> str:
        """ "setting" (the stage's own) or "quota" (the account's AWS quota)."""
        return "setting" if self.basis == "setting" else "quota"

    @property
    def people(self) -> float:
        """People speaking at once it holds (inf when a speaker uses none of it)."""
        if self.per_speaker <= 0:
            return math.inf
        return max(0.0, self.value) / self.per_speaker

    def needed_for(self, people: int) -> float:
        return people * self.per_speaker


def reserved(stage: StageView, quotas: AccountQuotas) -> tuple[int | None, int | None]:
    """The turn function's and $default's reservations in force in ``quotas``' column."""
    if not quotas.reserves:
        return None, None
    return stage.turn_reserved, stage.message_reserved


def functions_in_pool(turn: int | None, message: int | None) -> list[str]:
    """The functions that run in the account's unreserved pool."""
    pool = ["connect", "disconnect"]
    if turn is None:
        pool += list(TURN_FUNCTION)
    if message is None:
        pool.append("message")
    return pool


def unreserved_pool(stage: StageView, quotas: AccountQuotas) -> float:
    turn, message = reserved(stage, quotas)
    return (quotas.lambda_concurrency.value or 0) - (turn or 0) - (message or 0)


def tpm_per_speaker(figures: SpeakerFigures, max_tokens: int) -> float:
    """Bedrock quota tokens one speaker burns a minute: fresh input and cache writes plus output at
    the burndown rate (AWS, "How tokens are counted in Amazon Bedrock": InputTokenCount +
    CacheWriteInputTokens + OutputTokenCount x burndown; cache reads do not count), plus what
    requests in flight hold: Bedrock reserves a request's input and ``maxTokens`` when it starts, cache
    reads included, and settles the reservation when it ends (aws/agent-toolkit-for-aws, skills/
    core-skills/amazon-bedrock/references/quota-health.md); the input is in the settled part already."""
    burndown = aws_quotas.value("bedrock_output_burndown")
    settled = figures.input_tokens + figures.cache_write_tokens + burndown * figures.output_tokens
    in_flight = figures.stream_seconds / 60.0
    read_per_request = figures.cache_read_tokens / figures.bedrock_requests if figures.bedrock_requests else 0.0
    return settled + in_flight * (max_tokens + read_per_request)


def limits(stage: StageView, figures: SpeakerFigures, quotas: AccountQuotas | None = None) -> list[Limit]:
    """Every limit one stage's speakers run into in ``quotas``' column (the stated one by default),
    with what one speaker uses of it."""
    quotas = quotas or account_quotas(stage, "stated")
    assert quotas is not None
    q = aws_quotas.value
    route_rps = figures.per_second(figures.ws_in + figures.connects)
    found = [
        Limit(
            "route",
            "API Gateway route throttle of the stage (rate)",
            stage.rate_limit,
            route_rps,
            "requests/s",
            "cdk.json throttle.rate_limit",
            "setting",
        ),
        Limit(
            "account_rps",
            "API Gateway account throttle (WebSocket in + @connections posts)",
            q("apigw_account_rps"),
            route_rps + figures.per_second(figures.posts),
            "requests/s",
            "apigw_account_rps",
        ),
        Limit(
            "new_connections",
            "API Gateway new connections per second",
            q("apigw_new_connections"),
            figures.per_second(figures.connects),
            "connections/s",
            "apigw_new_connections",
        ),
    ]
    turn, message = reserved(stage, quotas)
    if turn is not None:
        found.append(
            Limit(
                "turn_reserved",
                "Lambda turn function reserved concurrency (runner + watcher)",
                turn,
                figures.concurrency(TURN_FUNCTION),
                "executions",
                "cdk.json lambdas.turn_reserved_concurrency",
                "setting",
            )
        )
    if message is not None:
        found.append(
            Limit(
                "message_reserved",
                "Lambda $default reserved concurrency",
                message,
                figures.concurrency(["message"]),
                "executions",
                "cdk.json lambdas.reserved_concurrency",
                "setting",
            )
        )
    pool = functions_in_pool(turn, message)
    concurrency = quotas.lambda_concurrency
    found.append(
        Limit(
            "pool",
            f"Lambda unreserved pool ({', '.join(pool)})",
            unreserved_pool(stage, quotas),
            figures.concurrency(pool),
            "executions",
            concurrency.source,
            concurrency.basis,
        )
    )
    found += [
        Limit(
            "dynamodb_read",
            "DynamoDB table read throughput (on-demand)",
            q("dynamodb_table_rru"),
            figures.per_second(figures.rru),
            "RRU/s",
            "dynamodb_table_rru",
        ),
        Limit(
            "dynamodb_write",
            "DynamoDB table write throughput (on-demand)",
            q("dynamodb_table_wru"),
            figures.per_second(figures.wru),
            "WRU/s",
            "dynamodb_table_wru",
        ),
        Limit(
            "dynamodb_index",
            "DynamoDB sessions index write throughput",
            q("dynamodb_table_wru"),
            figures.per_second(figures.index_wru),
            "WRU/s",
            "dynamodb_table_wru",
        ),
    ]
    if stage.auth == "none":  # every session belongs to one person: one partition of the index
        found.append(
            Limit(
                "dynamodb_partition",
                "DynamoDB sessions index partition (auth none: one owner)",
                q("dynamodb_partition_wcu"),
                figures.per_second(figures.index_wru),
                "WCU/s",
                "dynamodb_partition_wcu",
            )
        )
    for key, quota, name, per_speaker, unit in (
        (
            "bedrock_tpm",
            quotas.bedrock_tpm,
            "tokens",
            tpm_per_speaker(figures, stage.in_flight_max_tokens),
            "tokens/min",
        ),
        ("bedrock_rpm", quotas.bedrock_rpm, "requests", figures.bedrock_requests, "requests/min"),
    ):
        if quota.value is None:
            continue
        found.append(
            Limit(
                key,
                f"Bedrock {name} per minute ({stage.model}, cross-Region)",
                quota.value,
                per_speaker,
                unit,
                quota.source,
                quota.basis,
            )
        )
    return found


@dataclass(frozen=True)
class Capacity:
    stage: StageView
    people: float
    ranked: list[Limit]
    """Every limit, the one that binds first at the head."""
    quotas: AccountQuotas | None = None

    @property
    def binding(self) -> list[Limit]:
        return self.ranked[:3]

    @property
    def first_quota(self) -> Limit | None:
        """The first AWS quota to bind (the stage's own settings aside)."""
        return next((limit for limit in self.ranked if limit.kind == "quota"), None)

    @property
    def first_setting(self) -> Limit | None:
        return next((limit for limit in self.ranked if limit.kind == "setting"), None)


def capacity(stage: StageView, figures: SpeakerFigures, quotas: AccountQuotas | None = None) -> Capacity:
    quotas = quotas or account_quotas(stage, "stated")
    ranked = sorted(limits(stage, figures, quotas), key=lambda limit: limit.people)
    return Capacity(stage, ranked[0].people if ranked else math.inf, ranked, quotas)


# ---- what it would take ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Change:
    setting: str
    current: float
    needed: float
    how: str
    """A cdk.json change or a Service Quotas request."""


def changes_to_hold(
    stage: StageView, figures: SpeakerFigures, people: int, quotas: AccountQuotas | None = None
) -> list[Change]:
    """What must be raised (and to what) for the stage to hold ``people`` speaking at once, against
    ``quotas``' column (the stated one by default)."""
    quotas = quotas or account_quotas(stage, "stated")
    assert quotas is not None
    changes: list[Change] = []
    q = aws_quotas.quota
    route_rps = figures.per_second(figures.ws_in + figures.connects)
    rate = math.ceil(people * route_rps)
    if rate > stage.rate_limit:
        burst = max(stage.burst_limit, 2 * rate)
        changes.append(Change("throttle.rate_limit", stage.rate_limit, rate, f"cdk.json: throttle.rate_limit {rate}"))
        changes.append(
            Change("throttle.burst_limit", stage.burst_limit, burst, f"cdk.json: throttle.burst_limit {burst}")
        )
    account_rps = people * (route_rps + figures.per_second(figures.posts))
    if account_rps > aws_quotas.value("apigw_account_rps"):
        quota = q("apigw_account_rps")
        changes.append(
            Change(quota.key, quota.value or 0, math.ceil(account_rps), _request(quota, math.ceil(account_rps)))
        )
    connections = people * figures.per_second(figures.connects)
    if connections > aws_quotas.value("apigw_new_connections"):
        quota = q("apigw_new_connections")
        changes.append(
            Change(quota.key, quota.value or 0, math.ceil(connections), _request(quota, math.ceil(connections)))
        )
    # Lambda: the turn function's reservation, $default's, and an unreserved pool for the rest.
    turn, message = reserved(stage, quotas)
    turn_needed = math.ceil(people * figures.concurrency(TURN_FUNCTION))
    if turn is not None and turn_needed > turn:
        changes.append(
            Change(
                "lambdas.turn_reserved_concurrency",
                turn,
                turn_needed,
                f"cdk.json: lambdas.turn_reserved_concurrency {turn_needed}",
            )
        )
        turn = turn_needed
    message_needed = math.ceil(people * figures.concurrency(["message"]))
    if message is not None and message_needed > message:
        changes.append(
            Change(
                "lambdas.reserved_concurrency",
                message,
                message_needed,
                f"cdk.json: lambdas.reserved_concurrency {message_needed}",
            )
        )
        message = message_needed
    pool_needed = max(MIN_UNRESERVED, math.ceil(people * figures.concurrency(functions_in_pool(turn, message))))
    account_needed = (turn or 0) + (message or 0) + pool_needed
    concurrency = quotas.lambda_concurrency
    if account_needed > (concurrency.value or 0):
        how = _request(q("lambda_concurrency"), account_needed)
        if concurrency.basis == "stated":
            how = f"cdk.json: lambdas.planned_account_concurrency {account_needed}, after {how}"
        changes.append(Change(concurrency.source, concurrency.value or 0, account_needed, how))
    for key, per_second in (
        ("dynamodb_table_rru", figures.rru / 60),
        ("dynamodb_table_wru", max(figures.wru, figures.index_wru) / 60),
    ):
        if people * per_second > aws_quotas.value(key):
            quota = q(key)
            changes.append(
                Change(
                    quota.key,
                    quota.value or 0,
                    math.ceil(people * per_second),
                    _request(quota, math.ceil(people * per_second)),
                )
            )
    if stage.auth == "none" and people * figures.index_wru / 60 > aws_quotas.value("dynamodb_partition_wcu"):
        changes.append(
            Change("auth", 0, 0, 'cdk.json: "auth": "cognito" (one index partition per person instead of one for all)')
        )
    for value, per_speaker, quota in (
        (quotas.bedrock_tpm, tpm_per_speaker(figures, stage.in_flight_max_tokens), aws_quotas.bedrock_tpm(stage.model)),
        (quotas.bedrock_rpm, figures.bedrock_requests, aws_quotas.bedrock_rpm(stage.model)),
    ):
        needed = math.ceil(people * per_speaker)
        if value.value is None or quota is None or needed <= value.value:
            continue
        how = _request(quota, needed)
        if value.basis == "stated":
            how = f"{value.source.removeprefix('cdk.json ')} {needed}, after {how}"
        changes.append(Change(value.source, value.value, needed, how))
    return changes


def _request(quota: aws_quotas.Quota, value: int) -> str:
    if quota.code:
        return (
            f"Service Quotas request: {quota.name} ({quota.code}) to {value:,} "
            f"(aws service-quotas request-service-quota-increase --service-code {_service(quota)} "
            f"--quota-code {quota.code} --desired-value {value})"
        )
    return (
        f'Service Quotas request: "{quota.name}" to {value:,} (its code is per model: '
        f"aws service-quotas list-service-quotas --service-code bedrock --query "
        f"\"Quotas[?QuotaName=='{quota.name}'].QuotaCode\")"
    )


def _service(quota: aws_quotas.Quota) -> str:
    prefix = quota.key.split("_", 1)[0]
    return {"apigw": "apigateway", "agentcore": "bedrock-agentcore"}.get(prefix, prefix)


# ---- long-term memory (AgentCore Memory) ----------------------------------------------------------


def memory_assumptions(stage: StageView) -> memory.MemoryAssumptions:
    """``capacity_memory``'s assumptions with what the stage sets of its memory (its events' expiry)."""
    if stage.memory_event_expiry_days is None:
        return memory.ASSUMED
    return replace(memory.ASSUMED, event_retention_days=float(stage.memory_event_expiry_days))


def memory_limits(figures: SpeakerFigures, a: memory.MemoryAssumptions = memory.ASSUMED) -> list[Limit]:
    """The AgentCore Memory quotas one speaker's turns run into, at AWS's defaults."""
    used = memory.minute_usage(figures.turns, a)
    q = aws_quotas.quota
    return [
        Limit(
            "memory_extraction",
            "AgentCore Memory long-term extraction tokens per minute (built-in strategies)",
            aws_quotas.value("agentcore_extraction_tpm"),
            used.extraction_tokens,
            "tokens/min",
            q("agentcore_extraction_tpm").key,
        ),
        Limit(
            "memory_create_event",
            "AgentCore Memory CreateEvent requests",
            aws_quotas.value("agentcore_create_event_rps"),
            used.events / 60,
            "requests/s",
            q("agentcore_create_event_rps").key,
        ),
        Limit(
            "memory_retrieve",
            "AgentCore Memory RetrieveMemoryRecords requests",
            aws_quotas.value("agentcore_retrieve_rps"),
            used.retrievals / 60,
            "requests/s",
            q("agentcore_retrieve_rps").key,
        ),
        Limit(
            "memory_batch_create",
            "AgentCore Memory BatchCreateMemoryRecords requests",
            aws_quotas.value("agentcore_batch_create_rps"),
            used.record_writes / 60,
            "requests/s",
            q("agentcore_batch_create_rps").key,
        ),
    ]


def memory_capacity(stage: StageView, figures: SpeakerFigures, a: memory.MemoryAssumptions | None = None) -> Capacity:
    """The memory's quotas ranked: the first binds at ``people`` speaking at once."""
    ranked = sorted(memory_limits(figures, a or memory_assumptions(stage)), key=lambda limit: limit.people)
    return Capacity(stage, ranked[0].people, ranked)


def memory_changes_to_hold(
    figures: SpeakerFigures, people: int, a: memory.MemoryAssumptions = memory.ASSUMED
) -> list[Change]:
    """The AgentCore Memory quota requests holding ``people`` speaking at once takes."""
    changes = []
    for limit in memory_limits(figures, a):
        needed = math.ceil(limit.needed_for(people))
        if needed > limit.value:
            quota = aws_quotas.quota(limit.setting)
            changes.append(Change(quota.key, limit.value, needed, _request(quota, needed)))
    return changes


def session_holds_event_rate(figures: SpeakerFigures) -> bool:
    """Whether one session's committed turns stay within CreateEvent's rate per actor and session."""
    return figures.turns / 60 <= aws_quotas.value("agentcore_create_event_session_rps")


def block_tokens_per_speaker(figures: SpeakerFigures, a: memory.MemoryAssumptions = memory.ASSUMED) -> float:
    """Uncached input tokens a minute the remembered block adds at its cap (every request carries it
    after the cached prefix): they count against Bedrock's tokens per minute too."""
    return figures.bedrock_requests * a.block_tokens


# ---- cost ------------------------------------------------------------------------------------------


def cost_per_user_hour(
    stage: StageView, figures: SpeakerFigures, a: memory.MemoryAssumptions | None = None
) -> dict[str, float]:
    """USD per hour of one person speaking, by service, at ``PRICES``; AgentCore Memory's (0 for a stage
    without one) at the measured turn rate and ``a`` (the stage's ``memory_assumptions`` by default)."""
    a = a or memory_assumptions(stage)
    hour = 60.0
    gb_s = sum(seconds * stage.memory_mb.get(function, 512) / 1024 for function, seconds in figures.seconds.items())
    invocations = sum(figures.invocations.values())
    model = stage.model
    price = PRICES.get
    return {
        "API Gateway": hour
        * (
            (figures.ws_in_messages + figures.ws_out_messages) * PRICES["apigw_message"]
            + PRICES["apigw_connection_minute"]
        ),
        "Lambda": hour * (gb_s * PRICES["lambda_gb_s"] + invocations * PRICES["lambda_request"]),
        "DynamoDB": hour
        * (figures.rru * PRICES["dynamodb_rru"] + (figures.wru + figures.index_wru) * PRICES["dynamodb_wru"]),
        "Bedrock": hour
        * (
            figures.input_tokens * price(f"{model}:input", 0.0)
            + figures.output_tokens * price(f"{model}:output", 0.0)
            + figures.cache_read_tokens * price(f"{model}:cache_read", 0.0)
            + figures.cache_write_tokens * price(f"{model}:cache_write", 0.0)
        ),
        "AgentCore Memory": sum(memory.cost(memory.hour_usage(figures.turns, a), a).values()) if stage.memory else 0.0,
    }
