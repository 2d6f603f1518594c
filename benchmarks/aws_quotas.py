"""Every AWS quota the capacity model (``benchmarks.capacity_model``) holds a stage against: its
documented default, where it is documented, and the Service Quotas code to ask for more.

One table, ``QUOTAS``; nothing else in the benchmarks states a quota. ``documented`` is False
where the documentation gives no figure for the stage's model and the value is the nearest one
found (``note`` says which): check it in the account's Service Quotas console before relying on it
(``voiceide-conductor doctor`` reads the account's and records them; ``make capacity`` shows them).

Each default was checked against AWS's pages on ``VERIFIED_ON`` (what the page says, in short):

* API Gateway quotas (limits.html): "Throttle quota per account, per Region across HTTP APIs, REST
  APIs, WebSocket APIs, and WebSocket callback APIs": 10,000 requests per second, "a maximum bucket
  capacity of 5,000 requests", adjustable (L-8A5B8E43); 2,500 / 1,250 in some newer Regions.
* WebSocket quotas (apigateway-execution-service-websocket-limits-table.html): "New connections per
  second per account (across all WebSocket APIs) per Region": 500, adjustable (L-9ED1E49A); frame
  32 KB, message payload 128 KB, connection duration 2 hours, idle timeout 10 minutes, none adjustable.
* Lambda quotas (gettingstarted-limits.html): "Concurrent executions": 1,000 by default, "can be
  increased up to tens of thousands"; "New AWS accounts have reduced concurrency and memory quotas".
  Invoke API: "For asynchronous invocations, the maximum payload size is 1 MB".
* Lambda scaling behavior (scaling-behavior.html): "for each function, your concurrency scaling rate
  is 1,000 execution environment instances every 10 seconds".
* DynamoDB quotas (ServiceQuotas.html): on-demand, "Per table: 40,000 read request units and 40,000
  write request units" (adjustable). Warm throughput scenarios (warm-throughput-scenarios.html): "each
  individual partition is limited to 1,000 write units per second and 3,000 read units per second";
  "New on-demand tables start with a warm throughput of 12,000 read units per second and 4,000 write
  units per second" (pre-warming-on-demand-capacity-mode.html: "New on-demand tables will be able to
  sustain up to 4,000 writes per second and 12,000 reads per second").
* Bedrock (quotas-runtime.html, quotas.html, quotas-increase.html, the General Reference): the
  bedrock-runtime quotas are per model ("Cross-Region InvokeModel tokens per minute for ${model}"),
  and none of the pages gives a default for Claude Haiku 5.5 or Sonnet 5.5; "the quotas that apply to
  your account might be lower than the default values"; a raise is requested through the tokens-per-
  minute quota ("the support team will reach out and offer you the option of also increasing the
  other" quotas, requests per minute among them) and "Your request might be denied if you don't meet
  this condition" (traffic that consumes the existing allocation). How tokens are counted
  (quotas-token-burndown.html): output tokens burn down at 5x for the Claude 4 models listed.

The Amazon Bedrock AgentCore Memory quotas were read on ``AGENTCORE_VERIFIED_ON``, the quotas page as
stored on 2026-09-26 (the Service Quotas codes from the list of the bedrock-agentcore service's quotas):

* AgentCore Memory Service Quotas (bedrock-agentcore-limits.html#memory-limits), per account and
  Region: "Maximum CreateEvent requests" 200 a second, adjustable (L-59AF2B24); "per actor, per
  session, including conversational payloads" 5 a second, not adjustable (L-BC0EE484);
  RetrieveMemoryRecords 30 a second (L-EB2B5C4A) and ListMemoryRecords 30 (L-80B4FBA5), adjustable;
  "Maximum requests for all other AgentCore Memory APIs" 20 a second, BatchCreateMemoryRecords among
  them (its own code, L-890C813A); "Maximum number of tokens per minute for long-term memory
  extraction" 150,000 "for built-in strategies", adjustable (L-E3D6644C; the ``TokenCount`` metric
  in the ``Bedrock-AgentCore`` namespace shows its use); 150 memory resources per Region, 6 strategies
  per memory; a CreateEvent holds at most 100 messages of 100 KB each, 10 MB in all; events expire
  after 7 to 365 days. The page documents no maximum of events per session.
* The data plane API (API_MemoryContent.html, API_BatchCreateMemoryRecords.html; the same bounds in
  botocore's bedrock-agentcore model): a memory record's text is at most 16,000 characters, a
  BatchCreateMemoryRecords call carries at most 100 records, a RetrieveMemoryRecords ``topK`` at most 100.
"""

from __future__ import annotations

from dataclasses import dataclass

VERIFIED_ON = "2026-11-28"
AGENTCORE_VERIFIED_ON = "2026-11-28"


@dataclass(frozen=True)
class Quota:
    key: str
    name: str
    """As AWS names it (the Service Quotas name where there is one)."""
    value: float | None
    """The default; None where there is no figure to assume (``note`` says why)."""
    unit: str
    scope: str
    source_title: str
    source_url: str
    code: str | None = None
    """The Service Quotas code (None where the quota cannot be raised there, or has no public code)."""
    adjustable: bool = True
    documented: bool = True
    note: str = ""


APIGW_LIMITS = ("Amazon API Gateway quotas", "https://docs.aws.amazon.com/apigateway/latest/developerguide/limits.html")
APIGW_WS = (
    "Quotas for configuring and running a WebSocket in API Gateway",
    "https://docs.aws.amazon.com/apigateway/latest/developerguide/apigateway-execution-service-websocket-limits-table.html",
)
LAMBDA_LIMITS = ("Lambda quotas", "https://docs.aws.amazon.com/lambda/latest/dg/gettingstarted-limits.html")
LAMBDA_SCALING = ("Lambda scaling behavior", "https://docs.aws.amazon.com/lambda/latest/dg/scaling-behavior.html")
DYNAMODB_LIMITS = (
    "Quotas in Amazon DynamoDB",
    "https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/ServiceQuotas.html",
)
DYNAMODB_WARM = (
    "Understanding DynamoDB warm throughput in different scenarios",
    "https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/warm-throughput-scenarios.html",
)
BEDROCK_RUNTIME = (
    "Quotas for the bedrock-runtime endpoint",
    "https://docs.aws.amazon.com/bedrock/latest/userguide/quotas-runtime.html",
)
BEDROCK_BURNDOWN = (
    "How tokens are counted in Amazon Bedrock",
    "https://docs.aws.amazon.com/bedrock/latest/userguide/quotas-token-burndown.html",
)
BEDROCK_QUOTAS = ("Quotas for Amazon Bedrock", "https://docs.aws.amazon.com/bedrock/latest/userguide/quotas.html")
BEDROCK_GENERAL = ("Amazon Bedrock endpoints and quotas", "https://docs.aws.amazon.com/general/latest/gr/bedrock.html")
AGENTCORE_LIMITS = (
    "Quotas for Amazon Bedrock AgentCore (AgentCore Memory Service Quotas)",
    "https://docs.aws.amazon.com/bedrock-agentcore/latest/devguide/bedrock-agentcore-limits.html#memory-limits",
)
AGENTCORE_RECORD = (
    "Amazon Bedrock AgentCore Data Plane API Reference: MemoryContent",
    "https://docs.aws.amazon.com/bedrock-agentcore/latest/APIReference/API_MemoryContent.html",
)

_Q = [
    # ---- API Gateway ---------------------------------------------------------------------------
    Quota(
        "apigw_account_rps",
        "Throttle quota per account, per Region across HTTP APIs, REST APIs, WebSocket APIs, "
        "and WebSocket callback APIs",
        10_000,
        "requests/s",
        "account and Region, shared by every API (WebSocket messages in and @connections posts alike)",
        *APIGW_LIMITS,
        code="L-8A5B8E43",
    ),
    Quota(
        "apigw_account_burst",
        "Burst of the account throttle (token bucket capacity)",
        5_000,
        "requests",
        "account and Region",
        *APIGW_LIMITS,
        adjustable=False,
        note="set by API Gateway from the account's RPS quota; not requested separately",
    ),
    Quota(
        "apigw_new_connections",
        "New connections per second per account (across all WebSocket APIs) per Region",
        500,
        "connections/s",
        "account and Region",
        *APIGW_WS,
        code="L-9ED1E49A",
    ),
    Quota("apigw_frame_bytes", "WebSocket frame size", 32 * 1024, "bytes", "per frame", *APIGW_WS, adjustable=False),
    Quota(
        "apigw_message_bytes", "Message payload size", 128 * 1024, "bytes", "per message", *APIGW_WS, adjustable=False
    ),
    Quota(
        "apigw_connection_hours",
        "Connection duration for WebSocket API",
        2,
        "hours",
        "per connection",
        *APIGW_WS,
        adjustable=False,
    ),
    Quota(
        "apigw_idle_minutes", "Idle Connection Timeout", 10, "minutes", "per connection", *APIGW_WS, adjustable=False
    ),
    # The stage's route throttle (cdk.json throttle.rate_limit / burst_limit) is the stage's own
    # setting, not a quota: it may not exceed the account throttle above.
    # ---- Lambda ---------------------------------------------------------------------------------
    Quota(
        "lambda_concurrency",
        "Concurrent executions",
        1_000,
        "executions",
        "account and Region; reservations come out of it and 100 stay unreserved",
        *LAMBDA_LIMITS,
        code="L-B99A9384",
        note="new accounts start lower; AWS raises it with usage",
    ),
    Quota(
        "lambda_scaling_per_10s",
        "Concurrency scaling rate",
        1_000,
        "new execution environments per 10 s",
        "per function",
        *LAMBDA_SCALING,
        adjustable=False,
        note="refilled continuously, unused rate does not accumulate",
    ),
    Quota(
        "lambda_async_payload_bytes",
        "Invocation payload (asynchronous)",
        1024 * 1024,
        "bytes",
        "per invocation",
        *LAMBDA_LIMITS,
        adjustable=False,
    ),
    # ---- DynamoDB (on-demand) --------------------------------------------------------------------
    Quota(
        "dynamodb_table_rru",
        "Table-level read throughput limit",
        40_000,
        "read request units/s",
        "per table (and per GSI), on-demand",
        *DYNAMODB_LIMITS,
        code="L-CF0CBE56",
    ),
    Quota(
        "dynamodb_table_wru",
        "Table-level write throughput limit",
        40_000,
        "write request units/s",
        "per table (and per GSI), on-demand",
        *DYNAMODB_LIMITS,
        code="L-AB614373",
    ),
    Quota(
        "dynamodb_partition_rcu",
        "Per-partition read throughput",
        3_000,
        "read units/s",
        "per partition (one partition key value at most)",
        *DYNAMODB_WARM,
        adjustable=False,
    ),
    Quota(
        "dynamodb_partition_wcu",
        "Per-partition write throughput",
        1_000,
        "write units/s",
        "per partition (one partition key value at most), GSI partitions too",
        *DYNAMODB_WARM,
        adjustable=False,
    ),
    Quota(
        "dynamodb_new_table_wru",
        "Initial throughput of a new on-demand table (writes)",
        4_000,
        "write request units/s",
        "per table and per new GSI, until its traffic has risen (double the previous peak within 30 minutes)",
        *DYNAMODB_WARM,
        adjustable=False,
        note="a ramp, not a ceiling: pre-warm (warm throughput, capacity.warm_write_units_per_second) before a launch",
    ),
    Quota(
        "dynamodb_new_table_rru",
        "Initial throughput of a new on-demand table (reads)",
        12_000,
        "read request units/s",
        "per table and per new GSI, until its traffic has risen",
        *DYNAMODB_WARM,
        adjustable=False,
        note="a ramp, not a ceiling",
    ),
    # ---- Bedrock (bedrock-runtime, cross-Region inference profiles) -------------------------------
    Quota(
        "bedrock_tpm:anthropic.claude-haiku-5-5",
        "Cross-Region InvokeModel tokens per minute for Anthropic Claude Haiku 5.5",
        1_000_000,
        "tokens/min (input + cache writes + output x burndown)",
        "account, Region and model",
        *BEDROCK_RUNTIME,
        code=None,
        documented=False,
        note=(
            "no default is documented for the Claude 5.5 models (quotas-runtime, quotas and the General Reference "
            "give none; Bedrock's quota codes are per model and not published). 1,000,000 is assumed: the "
            "cross-Region value AWS Support confirmed for a Claude Sonnet 4 account after a request "
            "(ministryofjustice/analytical-platform#8139, 2025); accounts differ widely (20,000 applied in a new "
            "account for Claude 3.7 Sonnet, RooCodeInc/Roo-Code#3000; a 30,000,000 default shown for Claude Opus "
            "4.8, binbashar/le-tf-infra-aws#1111, 2026). Read the account's with voiceide-conductor doctor"
        ),
    ),
    Quota(
        "bedrock_tpm:anthropic.claude-sonnet-5-5",
        "Cross-Region InvokeModel tokens per minute for Anthropic Claude Sonnet 5.5",
        1_000_000,
        "tokens/min (input + cache writes + output x burndown)",
        "account, Region and model",
        *BEDROCK_RUNTIME,
        code=None,
        documented=False,
        note="as for Haiku 5.5: assumed, not a documented default for this model; doctor reads the account's",
    ),
    Quota(
        "bedrock_rpm:anthropic.claude-haiku-5-5",
        "Cross-Region InvokeModel requests per minute for Anthropic Claude Haiku 5.5",
        None,
        "requests/min",
        "account, Region and model",
        *BEDROCK_QUOTAS,
        code=None,
        documented=False,
        note=(
            "Bedrock has a per-model requests-per-minute quota beside the tokens one (requested together); no "
            "default is documented for Claude 5.5 models: a stage is held to it only where it states it "
            "(bedrock.requests_per_minute; `voiceide-conductor doctor` reads the account's)"
        ),
    ),
    Quota(
        "bedrock_rpm:anthropic.claude-sonnet-5-5",
        "Cross-Region InvokeModel requests per minute for Anthropic Claude Sonnet 5.5",
        None,
        "requests/min",
        "account, Region and model",
        *BEDROCK_QUOTAS,
        code=None,
        documented=False,
        note="as for Haiku 5.5: no documented default; held only where the stage states it",
    ),
    Quota(
        "bedrock_output_burndown",
        "Burndown rate of output tokens (Anthropic Claude 4 models and later)",
        5,
        "quota tokens per output token",
        "per request",
        *BEDROCK_BURNDOWN,
        adjustable=False,
        note="documented for Claude Opus 4 / Sonnet 4 and later 4.x models; taken to hold for Claude 5.5",
    ),
    # ---- AgentCore Memory (bedrock-agentcore data plane) -----------------------------------------
    Quota(
        "agentcore_create_event_rps",
        "Rate of CreateEvent requests",
        200,
        "requests/s",
        "account and Region",
        *AGENTCORE_LIMITS,
        code="L-59AF2B24",
    ),
    Quota(
        "agentcore_create_event_session_rps",
        "Rate of CreateEvent requests per actor per session including conversational payloads",
        5,
        "requests/s",
        "per actor and session",
        *AGENTCORE_LIMITS,
        code="L-BC0EE484",
        adjustable=False,
    ),
    Quota(
        "agentcore_retrieve_rps",
        "Rate of RetrieveMemoryRecords requests",
        30,
        "requests/s",
        "account and Region",
        *AGENTCORE_LIMITS,
        code="L-EB2B5C4A",
    ),
    Quota(
        "agentcore_list_records_rps",
        "Rate of ListMemoryRecords requests",
        30,
        "requests/s",
        "account and Region",
        *AGENTCORE_LIMITS,
        code="L-80B4FBA5",
    ),
    Quota(
        "agentcore_batch_create_rps",
        "Rate of BatchCreateMemoryRecords requests",
        20,
        "requests/s",
        "account and Region",
        *AGENTCORE_LIMITS,
        code="L-890C813A",
        note='the page\'s "all other AgentCore Memory APIs" figure; Service Quotas names this one apart',
    ),
    Quota(
        "agentcore_extraction_tpm",
        "Tokens per minute for long-term memory extraction",
        150_000,
        "tokens/min",
        "account and Region, built-in strategies",
        *AGENTCORE_LIMITS,
        code="L-E3D6644C",
        note="how extraction counts tokens is not documented (the TokenCount metric shows the account's use)",
    ),
    Quota("agentcore_memories", "AgentCore Memory resources", 150, "memories", "account and Region", *AGENTCORE_LIMITS),
    Quota(
        "agentcore_strategies_per_memory",
        "Memory strategies per memory",
        6,
        "strategies",
        "per memory",
        *AGENTCORE_LIMITS,
        adjustable=False,
    ),
    Quota(
        "agentcore_messages_per_event",
        "Messages per event",
        100,
        "messages",
        "per CreateEvent",
        *AGENTCORE_LIMITS,
        code="L-898013A7",
        adjustable=False,
    ),
    Quota(
        "agentcore_message_bytes",
        "Message size",
        100 * 1024,
        "bytes",
        "per message of a CreateEvent",
        *AGENTCORE_LIMITS,
        code="L-1D35AE05",
        adjustable=False,
    ),
    Quota(
        "agentcore_event_bytes",
        "Event size",
        10 * 1024 * 1024,
        "bytes",
        "per CreateEvent",
        *AGENTCORE_LIMITS,
        code="L-9484366D",
        adjustable=False,
    ),
    Quota(
        "agentcore_event_expiry_days",
        "Maximum EventExpirationDuration days",
        365,
        "days",
        "per event (at least 7)",
        *AGENTCORE_LIMITS,
        adjustable=False,
    ),
    Quota(
        "agentcore_record_chars",
        "Memory record text (MemoryContent text)",
        16_000,
        "characters",
        "per record",
        *AGENTCORE_RECORD,
        adjustable=False,
    ),
]

QUOTAS: dict[str, Quota] = {quota.key: quota for quota in _Q}


def quota(key: str) -> Quota:
    return QUOTAS[key]


def value(key: str) -> float:
    found = QUOTAS[key].value
    if found is None:
        raise ValueError(f"{key}: no default to assume ({QUOTAS[key].note})")
    return float(found)


def bedrock_tpm(model: str) -> Quota | None:
    """The tokens-per-minute quota of a foundation model id (without its geography prefix)."""
    return QUOTAS.get(f"bedrock_tpm:{model}")


def bedrock_rpm(model: str) -> Quota | None:
    """The requests-per-minute quota of a foundation model id (without its geography prefix)."""
    return QUOTAS.get(f"bedrock_rpm:{model}")
