"""How many people speaking at once a stage holds, which limit binds first, and what an active
user-hour costs: from what ONE active speaker was measured to cost per minute.

``make capacity`` (``benchmarks/capacity_report.py``) measures one speaker first
(``benchmarks.speaker_meter``: the person of ``benchmarks.talker.SESSION`` on the local stack, with
speculation on and off). Then, for each stage of cdk.json (``infra.config.select_stage``), every
limit the speakers' load runs into is turned into a number of people:

    people = limit / (what one speaker uses of it)

with the limits from the stage's settings (route throttle, reserved concurrency, the unreserved
pool of ``account_concurrency``, speculation on or off, the model, the Bedrock quotas it states)
and from the documented quotas (``benchmarks.aws_quotas``, one table) where it states none; each
limit says which (``Limit.basis``). The smallest is what the stage holds; the next two follow.
``changes_to_hold`` says what it would take to hold a target (cdk.json values and Service Quotas
requests) and ``cost_per_user_hour`` what an hour of talk costs at list prices
(``benchmarks.costs.PRICES``, dated there). Pure arithmetic: nothing here measures or prints.

Nothing in the table is written down by hand: change the figures or the stage and it changes.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from benchmarks import aws_quotas
from benchmarks.costs import PRICES

TARGETS = {"prod": 1_000, "dev": 10}
"""People speaking at once each stage must hold."""
TURN_FUNCTION = ("turn", "watcher")
"""The turn runner and the speculation watcher: two kinds of invocation of one function."""
ROUTE_FUNCTIONS = ("message", "connect", "disconnect")


# ---- what one speaker costs ---------------------------------------------------------------------


@dataclass
class SpeakerFigures:
    """What one person speaking costs per minute, as measured (every figure per minute of talk)."""

    speculation: bool
    minutes: float
    """How many minutes of talk the figures come from."""
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
    output_tokens: float = 0.0
    cache_read_tokens: float = 0.0
    cache_write_tokens: float = 0.0
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


# ---- a stage as the model sees it ----------------------------------------------------------------


@dataclass(frozen=True)
class StageView:
    name: str
    model: str
    """The foundation model id (without a geography prefix)."""
    max_tokens: int
    speculation: bool
    auth: str
    rate_limit: float
    burst_limit: int
    turn_reserved: int | None
    message_reserved: int | None
    account_concurrency: int
    """The account's Lambda concurrency quota: as the stage states it, else the documented default."""
    memory_mb: dict[str, int]
    account_stated: bool = True
    bedrock_tpm: int | None = None
    """The account's Bedrock tokens per minute for the model, as the stage states it (None: not stated)."""
    bedrock_rpm: int | None = None
    """The account's Bedrock requests per minute for the model, as the stage states it (None: not stated)."""
    max_turns_per_minute: int | None = None
    """The conductor's per-session turn limit (None: not known here)."""


def stage_view(config: Any) -> StageView:
    """The settings that matter here, from an ``infra.config.StageConfig``."""
    lambdas = config.lambdas
    return StageView(
        name=config.name,
        model=config.bedrock.foundation_model_id,
        max_tokens=config.bedrock.max_tokens,
        speculation=config.speculation.enabled,
        auth=config.auth,
        rate_limit=config.throttle.rate_limit,
        burst_limit=config.throttle.burst_limit,
        turn_reserved=lambdas.turn_reserved_concurrency,
        message_reserved=lambdas.reserved_concurrency,
        account_concurrency=lambdas.account_concurrency or int(aws_quotas.value("lambda_concurrency")),
        account_stated=lambdas.account_concurrency is not None,
        bedrock_tpm=getattr(config.bedrock, "tokens_per_minute", None),
        bedrock_rpm=getattr(config.bedrock, "requests_per_minute", None),
        max_turns_per_minute=config.max_turns_per_minute,
        memory_mb={
            "message": lambdas.message_memory_mb,
            "turn": lambdas.turn_memory_mb,
            "watcher": lambdas.turn_memory_mb,
            "connect": lambdas.handler_memory_mb,
            "disconnect": lambdas.handler_memory_mb,
        },
    )


def stages_of_cdk_json(names: Iterable[str] = ("dev", "prod")) -> list[StageView]:
    from infra.config import StageConfigError, read_cdk_json_context, select_stage

    context = read_cdk_json_context()
    views = []
    for name in names:
        try:
            config = select_stage(context.get("stages"), name)
        except StageConfigError:  # a reservation without the account's quota stated: as doctor reads it
            config = select_stage(context.get("stages"), name, quota_unknown_ok=True)
        views.append(stage_view(config))
    return views


# ---- limits --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Limit:
    name: str
    value: float
    """The limit (in its unit)."""
    per_speaker: float
    """What one speaker uses of it (same unit)."""
    unit: str
    setting: str
    """Where it is set: a cdk.json path or a quota key of ``benchmarks.aws_quotas``."""
    basis: str = "default"
    """Where the figure comes from: "setting" (the stage's own), "stated" (a quota the stage states as
    the account's), "default" (a documented AWS default) or "assumed" (no documented default for it:
    the nearest figure found)."""

    @property
    def people(self) -> float:
        """People speaking at once it holds (inf when a speaker uses none of it)."""
        if self.per_speaker <= 0:
            return math.inf
        return self.value / self.per_speaker

    def needed_for(self, people: int) -> float:
        return people * self.per_speaker


def _functions_in_pool(stage: StageView) -> list[str]:
    """The functions that run in the account's unreserved pool."""
    pool = ["connect", "disconnect"]
    if stage.turn_reserved is None:
        pool += list(TURN_FUNCTION)
    if stage.message_reserved is None:
        pool.append("message")
    return pool


def unreserved_pool(stage: StageView) -> int:
    return stage.account_concurrency - (stage.turn_reserved or 0) - (stage.message_reserved or 0)


def tpm_per_speaker(figures: SpeakerFigures, max_tokens: int) -> float:
    """Bedrock quota tokens one speaker burns a minute: fresh input and cache writes plus output at
    the burndown rate (AWS, "How tokens are counted in Amazon Bedrock": InputTokenCount +
    CacheWriteInputTokens + OutputTokenCount x burndown; cache reads do not count), plus what
    requests in flight hold reserved (``max_tokens`` each, from the request's start until its end
    settles it)."""
    burndown = aws_quotas.value("bedrock_output_burndown")
    settled = figures.input_tokens + figures.cache_write_tokens + burndown * figures.output_tokens
    in_flight = figures.stream_seconds / 60.0
    return settled + in_flight * max_tokens


def limits(stage: StageView, figures: SpeakerFigures) -> list[Limit]:
    """Every limit one stage's speakers run into, with what one speaker uses of it."""
    q = aws_quotas.value
    route_rps = figures.per_second(figures.ws_in + figures.connects)
    found = [
        Limit(
            "API Gateway route throttle of the stage (rate)",
            stage.rate_limit,
            route_rps,
            "requests/s",
            "cdk.json throttle.rate_limit",
            "setting",
        ),
        Limit(
            "API Gateway account throttle (WebSocket in + @connections posts)",
            q("apigw_account_rps"),
            route_rps + figures.per_second(figures.posts),
            "requests/s",
            "apigw_account_rps",
        ),
        Limit(
            "API Gateway new connections per second",
            q("apigw_new_connections"),
            figures.per_second(figures.connects),
            "connections/s",
            "apigw_new_connections",
        ),
    ]
    if stage.turn_reserved is not None:
        found.append(
            Limit(
                "Lambda turn function reserved concurrency (runner + watcher)",
                stage.turn_reserved,
                figures.concurrency(TURN_FUNCTION),
                "executions",
                "cdk.json lambdas.turn_reserved_concurrency",
                "setting",
            )
        )
    if stage.message_reserved is not None:
        found.append(
            Limit(
                "Lambda $default reserved concurrency",
                stage.message_reserved,
                figures.concurrency(["message"]),
                "executions",
                "cdk.json lambdas.reserved_concurrency",
                "setting",
            )
        )
    pool = _functions_in_pool(stage)
    found.append(
        Limit(
            f"Lambda unreserved pool ({', '.join(pool)})",
            unreserved_pool(stage),
            figures.concurrency(pool),
            "executions",
            "cdk.json lambdas.account_concurrency",
            "stated" if stage.account_stated else "default",
        )
    )
    found += [
        Limit(
            "DynamoDB table read throughput (on-demand)",
            q("dynamodb_table_rru"),
            figures.per_second(figures.rru),
            "RRU/s",
            "dynamodb_table_rru",
        ),
        Limit(
            "DynamoDB table write throughput (on-demand)",
            q("dynamodb_table_wru"),
            figures.per_second(figures.wru),
            "WRU/s",
            "dynamodb_table_wru",
        ),
        Limit(
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
                "DynamoDB sessions index partition (auth none: one owner)",
                q("dynamodb_partition_wcu"),
                figures.per_second(figures.index_wru),
                "WCU/s",
                "dynamodb_partition_wcu",
            )
        )
    tpm = bedrock_limit(stage, "tokens")
    if tpm is not None:
        value, setting, basis = tpm
        found.append(
            Limit(
                f"Bedrock tokens per minute ({stage.model}, cross-Region)",
                value,
                tpm_per_speaker(figures, stage.max_tokens),
                "tokens/min",
                setting,
                basis,
            )
        )
    rpm = bedrock_limit(stage, "requests")
    if rpm is not None:
        value, setting, basis = rpm
        found.append(
            Limit(
                f"Bedrock requests per minute ({stage.model}, cross-Region)",
                value,
                figures.bedrock_requests,
                "requests/min",
                setting,
                basis,
            )
        )
    return found


def bedrock_limit(stage: StageView, metric: str) -> tuple[float, str, str] | None:
    """The stage's Bedrock quota of ``metric`` ("tokens" or "requests" per minute): ``(value,
    setting, basis)``, the stated value where the stage states one, else the quota table's default;
    None when neither gives a figure."""
    stated = stage.bedrock_tpm if metric == "tokens" else stage.bedrock_rpm
    setting = "tokens_per_minute" if metric == "tokens" else "requests_per_minute"
    if stated is not None:
        return float(stated), f"cdk.json bedrock.{setting}", "stated"
    quota = aws_quotas.bedrock_tpm(stage.model) if metric == "tokens" else aws_quotas.bedrock_rpm(stage.model)
    if quota is None or quota.value is None:
        return None
    return float(quota.value), quota.key, "default" if quota.documented else "assumed"


@dataclass(frozen=True)
class Capacity:
    stage: StageView
    people: float
    ranked: list[Limit]
    """Every limit, the one that binds first at the head."""

    @property
    def binding(self) -> list[Limit]:
        return self.ranked[:3]


def capacity(stage: StageView, figures: SpeakerFigures) -> Capacity:
    ranked = sorted(limits(stage, figures), key=lambda limit: limit.people)
    return Capacity(stage, ranked[0].people if ranked else math.inf, ranked)


# ---- what it would take ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Change:
    setting: str
    current: float
    needed: float
    how: str
    """A cdk.json change or a Service Quotas request."""


def changes_to_hold(stage: StageView, figures: SpeakerFigures, people: int) -> list[Change]:
    """What must be raised (and to what) for the stage to hold ``people`` speaking at once."""
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
    turn_needed = math.ceil(people * figures.concurrency(TURN_FUNCTION))
    turn = stage.turn_reserved
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
    message = stage.message_reserved
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
    pool_needed = max(100, math.ceil(people * figures.concurrency(_functions_in_pool(stage))))
    account_needed = (turn or 0) + (message or 0) + pool_needed
    if account_needed > stage.account_concurrency:
        quota = q("lambda_concurrency")
        changes.append(
            Change(
                "lambdas.account_concurrency",
                stage.account_concurrency,
                account_needed,
                f"cdk.json: lambdas.account_concurrency {account_needed}, after {_request(quota, account_needed)}",
            )
        )
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
    for metric, per_speaker in (
        ("tokens", tpm_per_speaker(figures, stage.max_tokens)),
        ("requests", figures.bedrock_requests),
    ):
        needed = math.ceil(people * per_speaker)
        limit = bedrock_limit(stage, metric)
        quota = aws_quotas.bedrock_tpm(stage.model) if metric == "tokens" else aws_quotas.bedrock_rpm(stage.model)
        if limit is None or quota is None or needed <= limit[0]:
            continue
        value, setting, basis = limit
        how = _request(quota, needed)
        if basis == "stated":
            how = f"{setting.removeprefix('cdk.json ')} {needed}, after {how}"
        changes.append(Change(setting if basis == "stated" else quota.key, value, needed, how))
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
    return quota.key.split("_", 1)[0].replace("apigw", "apigateway")


# ---- cost ------------------------------------------------------------------------------------------


def cost_per_user_hour(stage: StageView, figures: SpeakerFigures) -> dict[str, float]:
    """USD per hour of one person speaking, by service, at ``PRICES``."""
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
    }
