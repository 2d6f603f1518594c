"""What 1,000 turns cost at us-east-1 list prices, from the calls a benchmark counted.

PRICES is the one table of prices (USD). Where each comes from:

* API Gateway WebSocket: $1.00 per million messages (first billion a month), metered in 32 KB
  increments, and $0.25 per million connection minutes (aws.amazon.com/api-gateway/pricing/,
  "WebSocket APIs", US East (N. Virginia)).
* Lambda on Arm (the functions are built for ARM_64, infra/bundling.py): $0.0000133334 per GB-s
  and $0.20 per million requests (aws.amazon.com/lambda/pricing/, US East (N. Virginia), Arm price).
* DynamoDB on-demand, Standard table class: $0.625 per million write request units and $0.125 per
  million read request units (aws.amazon.com/dynamodb/pricing/on-demand/, US East (N. Virginia),
  since the November 2024 price reduction).
* Bedrock: each stage's ``bedrock.prices`` in cdk.json, the one table the conductor prices its
  turns with (``turnUsage``) and the spend alarm weighs tokens with; its ``as_of`` dates it.
* Amazon Bedrock AgentCore Memory (aws.amazon.com/bedrock/agentcore/pricing/, "Memory"; checked on
  ``AGENTCORE_PRICES_AS_OF`` through quotations of the page, which AWS changed on 2026-10-06):
  short-term memory was $0.25 per 1,000 new events until 2026-10-05; since 2026-10-06 it is $1.00
  per GB ingested and $0.20 per GB retrieved, each event counted at 12 KB at least and 64 KB at most,
  and $0.10 per GB-month stored (the event's own size, prorated hourly until it expires). Long-term
  memory: $0.75 per 1,000 memory records stored a month (built-in strategies; $0.25 with built-in
  overrides or self-managed strategies) and $0.50 per 1,000 retrievals (aws/agent-toolkit-for-aws,
  plugins/aws-agents/skills/agents-optimize/references/cost.md, and other copies of the page; the
  per-GB rates and the 12 KB / 64 KB clamp from Yoonsoo Park, "AgentCore Memory's New Pricing Is
  Cheaper Until Your Agent Rereads Its History", 2026-10-09, quoting the AWS Health notice of
  2026-10-02 and reproducing the page's example: 100,000 events of 3 KB cost $1.20 to ingest, so
  KB and GB are decimal). Whether a retrieval is a RetrieveMemoryRecords call or each record it
  returns the quotations do not settle: a call is priced as one here.
* Amazon Bedrock AgentCore Gateway (aws.amazon.com/bedrock/agentcore/pricing/, "Gateway"; checked on
  ``AGENTCORE_GATEWAY_PRICES_AS_OF`` through quotations of the page): $0.005 per 1,000 API invocations
  (ListTools, InvokeTool, Ping), $0.025 per 1,000 Search API calls (the gateway's semantic tool search) and
  $0.02 per 100 tools indexed for search a month (aws/agent-toolkit-for-aws,
  plugins/aws-agents/skills/agents-optimize/references/cost.md, for the first two; Serverworks, "AgentCore
  Gateway + Policy の料金体系を整理する", quoting the page as of 2026-03-11, for all three). A tool call
  through the gateway costs that invocation beside whatever its target costs (a Lambda target's
  invocation).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from shared.wire.model_rules import rules_for

WEBSOCKET_MESSAGE_BYTES = 32 * 1024

PRICES_AS_OF = "2026-11-27"
"""When the AWS service prices below were last checked against the pages named above."""
AGENTCORE_PRICES_AS_OF = "2026-11-28"
"""When the AgentCore Memory prices below were checked."""
AGENTCORE_GATEWAY_PRICES_AS_OF = "2026-11-28"
"""When the AgentCore Gateway prices below were checked."""
STM_BILLED_MIN_BYTES = 12_000
STM_BILLED_MAX_BYTES = 64_000
"""Short-term memory counts each event ingested or retrieved as at least 12 KB and at most 64 KB."""
BYTES_PER_GB = 1e9
HOURS_PER_MONTH = 730


def model_prices() -> dict[str, float]:
    """Per token, ``<foundation model id>:input|output|cache_write|cache_read``, from the stages'
    ``bedrock.prices`` (USD per million tokens) in cdk.json."""
    from infra.config import read_cdk_json_context, select_stage

    stages = read_cdk_json_context().get("stages") or {}
    found: dict[str, float] = {}
    for name in stages:
        bedrock = select_stage(stages, name).bedrock
        if bedrock.prices is not None:
            for kind in ("input", "output", "cache_write", "cache_read"):
                found[f"{bedrock.foundation_model_id}:{kind}"] = getattr(bedrock.prices, kind) / 1e6
    return found


PRICES: dict[str, float] = {
    "apigw_message": 1.00 / 1e6,
    "apigw_connection_minute": 0.25 / 1e6,
    "lambda_gb_s": 0.0000133334,
    "lambda_request": 0.20 / 1e6,
    "dynamodb_wru": 0.625 / 1e6,
    "dynamodb_rru": 0.125 / 1e6,
    "agentcore_event_ingest_gb": 1.00,
    "agentcore_event_retrieve_gb": 0.20,
    "agentcore_event_storage_gb_month": 0.10,
    "agentcore_event_until_2026_10_05": 0.25 / 1000,
    "agentcore_record_month": 0.75 / 1000,
    "agentcore_record_month_self_managed": 0.25 / 1000,
    "agentcore_retrieval": 0.50 / 1000,
    "agentcore_gateway_invocation": 0.005 / 1000,
    "agentcore_gateway_search": 0.025 / 1000,
    "agentcore_gateway_tool_index_month": 0.02 / 100,
} | model_prices()


def event_billed_bytes(size: int) -> int:
    """What short-term memory counts an event of ``size`` bytes as, ingested or retrieved."""
    return min(max(size, STM_BILLED_MIN_BYTES), STM_BILLED_MAX_BYTES)


def websocket_messages(sizes: list[int]) -> int:
    """Metered messages for frames of these byte sizes (each 32 KB or part of it is one)."""
    return sum(max(1, math.ceil(size / WEBSOCKET_MESSAGE_BYTES)) for size in sizes)


@dataclass
class TurnUsage:
    """What the turns of a scenario used, summed over ``turns`` turns."""

    turns: int = 0
    message_bytes: list[int] = field(default_factory=list)
    """Every frame both ways (posts to the app, events from it)."""
    connection_s: float = 0.0
    lambda_invocations: dict[str, int] = field(default_factory=dict)
    lambda_seconds: dict[str, float] = field(default_factory=dict)
    """Per function (message, turn, ...), the billed duration (each invocation rounded up to 1 ms)."""
    wru: float = 0.0
    rru: float = 0.0
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    cacheable_tokens: int = 0
    """Input a prompt cache would serve (the prefix before the newest message), when the endpoint
    reported no cache figures."""


@dataclass(frozen=True)
class Stage:
    name: str
    model: str
    memory_mb: dict[str, int]


def stages() -> list[Stage]:
    """The dev and prod stages of cdk.json, through infra/config.py."""
    from infra.config import read_cdk_json_context, select_stage

    context = read_cdk_json_context()
    found = []
    for name in ("dev", "prod"):
        config = select_stage(context.get("stages"), name)
        lambdas = config.lambdas
        found.append(
            Stage(
                name,
                config.bedrock.foundation_model_id,
                {
                    "message": lambdas.message_memory_mb,
                    "turn": lambdas.turn_memory_mb,
                    "connect": lambdas.handler_memory_mb,
                    "disconnect": lambdas.handler_memory_mb,
                },
            )
        )
    return found


def caches(usage: TurnUsage, model: str) -> bool:
    """Whether the cacheable prefix (per turn, on average) reaches ``model``'s caching minimum:
    below it Bedrock silently caches nothing."""
    minimum = rules_for(model).cache_min_tokens
    return minimum is not None and usage.turns > 0 and usage.cacheable_tokens / usage.turns >= minimum


def cost_per_1000(usage: TurnUsage, stage: Stage) -> dict[str, float]:
    """USD per 1,000 turns, by part; ``bedrock`` without prompt caching, ``bedrock_cached`` with."""
    if not usage.turns:
        return {}
    scale = 1000 / usage.turns
    gb_s = sum(
        seconds * stage.memory_mb.get(function, 512) / 1024 for function, seconds in usage.lambda_seconds.items()
    )
    model = stage.model
    all_input = usage.input_tokens + usage.cache_read_tokens + usage.cache_write_tokens
    if usage.cache_read_tokens or usage.cache_write_tokens:
        read, write, fresh = usage.cache_read_tokens, usage.cache_write_tokens, usage.input_tokens
    elif caches(usage, model):
        read, write, fresh = usage.cacheable_tokens, 0, all_input - usage.cacheable_tokens
    else:  # under the model's minimum Bedrock caches nothing: every token at the input price
        read, write, fresh = 0, 0, all_input
    price = PRICES.get
    parts = {
        "apigw": websocket_messages(usage.message_bytes) * PRICES["apigw_message"]
        + usage.connection_s / 60 * PRICES["apigw_connection_minute"],
        "lambda": gb_s * PRICES["lambda_gb_s"] + sum(usage.lambda_invocations.values()) * PRICES["lambda_request"],
        "dynamodb": usage.wru * PRICES["dynamodb_wru"] + usage.rru * PRICES["dynamodb_rru"],
        "bedrock": all_input * price(f"{model}:input", 0.0) + usage.output_tokens * price(f"{model}:output", 0.0),
        "bedrock_cached": fresh * price(f"{model}:input", 0.0)
        + read * price(f"{model}:cache_read", 0.0)
        + write * price(f"{model}:cache_write", 0.0)
        + usage.output_tokens * price(f"{model}:output", 0.0),
    }
    return {name: value * scale for name, value in parts.items()}
