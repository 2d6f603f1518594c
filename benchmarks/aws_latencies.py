"""What AWS and the phone's network add to a turn, as deployed: every figure the as-deployed benchmark
(``benchmarks.as_deployed``) injects into the local stack, each with its distribution and its source.

A latency is log-normal, given by its p50 and p99 in milliseconds (``sigma = ln(p99 / p50) / z99``):
service latencies have a long right tail and no negative values. A source is a URL (an AWS page or a
published measurement); where nothing is published the figure says ``assumed:`` and why.

The figures are client-observed round trips from a Lambda function in the same region (us-east-1,
both stages), TLS connections kept alive (botocore reuses them in a warm container).
"""

from __future__ import annotations

import math
import random
import threading
from dataclasses import dataclass

Z99 = 2.3263478740408408
"""The standard normal's 99th percentile."""


@dataclass(frozen=True)
class Latency:
    name: str
    p50_ms: float
    p99_ms: float
    source: str
    """A URL, or ``assumed: <why>``."""

    @property
    def mu(self) -> float:
        return math.log(self.p50_ms)

    @property
    def sigma(self) -> float:
        return math.log(self.p99_ms / self.p50_ms) / Z99

    def sample_ms(self, rng: random.Random) -> float:
        return math.exp(self.mu + self.sigma * rng.gauss(0.0, 1.0))


DYNAMODB_PAGE = "https://aws.amazon.com/dynamodb/ (single-digit millisecond performance at any scale)"
DYNAMODB_LATENCY_KC = (
    "https://repost.aws/knowledge-center/dynamodb-high-latency (GetItem/PutItem: single-digit ms average; "
    "Query depends on the result's size)"
)

DYNAMODB: dict[str, Latency] = {
    "GetItem": Latency("DynamoDB GetItem", 5, 20, DYNAMODB_LATENCY_KC),
    "Query": Latency("DynamoDB Query (a history window)", 8, 35, DYNAMODB_LATENCY_KC),
    "PutItem": Latency("DynamoDB PutItem", 6, 25, DYNAMODB_LATENCY_KC),
    "UpdateItem": Latency("DynamoDB UpdateItem", 6, 25, DYNAMODB_LATENCY_KC),
    "DeleteItem": Latency("DynamoDB DeleteItem", 6, 25, DYNAMODB_LATENCY_KC),
    "TransactWriteItems": Latency(
        "DynamoDB TransactWriteItems",
        12,
        50,
        "https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/transaction-apis.html "
        "(two reads/writes of every item: prepare and commit); assumed: about twice a PutItem, "
        "no latency is published for transactions",
    ),
    "TransactGetItems": Latency(
        "DynamoDB TransactGetItems", 10, 40, "assumed: twice a GetItem (a transactional read reads twice)"
    ),
    "BatchWriteItem": Latency("DynamoDB BatchWriteItem", 10, 40, DYNAMODB_PAGE),
    "BatchGetItem": Latency("DynamoDB BatchGetItem", 8, 35, DYNAMODB_PAGE),
}
DYNAMODB_DEFAULT = Latency("DynamoDB (another operation)", 6, 25, DYNAMODB_PAGE)

POST_TO_CONNECTION = Latency(
    "API Gateway PostToConnection (Lambda -> management API, answered)",
    15,
    60,
    "assumed: AWS publishes no latency for the management API; an HTTPS round trip to the regional "
    "execute-api endpoint from Lambda is some 10-20 ms (measure it with the X-Ray subsegment "
    "ConnectionGateway.post once deployed)",
)
APIGW_INGRESS = Latency(
    "API Gateway WebSocket: client frame -> $default integration invoked",
    20,
    80,
    "https://markaicode-hugo.pages.dev/websocket-gold-price-lambda-optimization (a published measurement: "
    "WebSocket routes add 40-120 ms); assumed p50 lower: that figure includes the route's Lambda call",
)
APIGW_EGRESS = Latency(
    "API Gateway WebSocket: posted message -> written to the client's socket",
    8,
    40,
    "assumed: AWS publishes no figure; the post has been answered, the gateway only forwards the frame",
)
LAMBDA_ASYNC_ACCEPT = Latency(
    "Lambda Invoke (Event): request -> 202 accepted",
    15,
    60,
    "https://docs.aws.amazon.com/lambda/latest/dg/invocation-async.html (the event is queued and 202 "
    "returned); assumed: no latency is published, an Invoke round trip like any regional API call",
)
LAMBDA_ASYNC_START = Latency(
    "Lambda asynchronous event: accepted -> the handler starts (warm)",
    40,
    250,
    "https://docs.aws.amazon.com/lambda/latest/dg/invocation-async.html (a separate process reads the "
    "queue and invokes the function); assumed: no latency is published for the hand-off",
)
LAMBDA_INIT = Latency(
    "Lambda cold start: sandbox and Python 3.13 runtime start (before the handler's imports)",
    150,
    400,
    "https://github.com/singledigit/lambda-benchmark (published cold starts of minimal Python 3.13 "
    "functions, arm64 and x86: a hello-world handler isolates the platform's share)",
)
COLD_START_RATE = 0.01
COLD_START_RATE_SOURCE = (
    "https://aws.amazon.com/blogs/compute/operating-lambda-performance-optimization-part-1/ "
    "(cold starts typically occur in under 1% of invocations, production workloads)"
)

PHONE_NETWORKS: dict[str, Latency] = {
    "4g": Latency(
        "phone on 4G/LTE: round trip to the AWS region",
        60,
        250,
        "https://arxiv.org/html/2507.18834v1 (CDN-measured mobile latency: only the top 5% of users see "
        "under 20 ms even at the minimum); assumed p50/p99 for LTE to a regional endpoint",
    ),
    "5g": Latency(
        "phone on 5G: round trip to the AWS region",
        40,
        180,
        "https://arxiv.org/html/2507.18834v1; assumed p50/p99 for 5G (non-standalone) to a regional endpoint",
    ),
    "wifi": Latency(
        "phone on home Wi-Fi: round trip to the AWS region",
        25,
        120,
        "assumed: a broadband path to a regional endpoint; Wi-Fi contention makes the tail",
    ),
}


PUBLISHED_TTFT_INPUT_TOKENS = 1_000
PUBLISHED_TTFT_SOURCE = (
    "https://artificialanalysis.ai/methodology/performance-benchmarking (the site's default workload, "
    "which its TTFT figures quote: about 1,000 input tokens, 1,000 output; longer prompts give a longer TTFT)"
)
PROMPT_CACHE_LATENCY_SOURCE = (
    "https://www.anthropic.com/news/prompt-caching (Claude 3.5 Sonnet, time to first token: a 100,000-token "
    "book 11.5 s uncached, 2.4 s cached; a 10,000-token many-shot prompt 1.6 s, 1.1 s; a 10-turn conversation "
    "with a long system prompt about 10 s, 2.5 s); https://docs.aws.amazon.com/bedrock/latest/userguide/"
    "prompt-caching.html (cached input skips recomputation; AWS quotes up to 85 % lower latency)"
)


@dataclass(frozen=True)
class Prefill:
    """What the input adds to the time to first token beyond the published figure: the model reads
    every uncached token (written to the cache or not) at ``uncached_ms_per_token`` and a token read
    from the cache at ``cached_ms_per_token``; the published TTFT already holds the reading of
    ``reference_tokens`` uncached tokens. Claude's own token counts (not the local endpoint's
    characters / 4)."""

    uncached_ms_per_token: float
    cached_ms_per_token: float
    source: str
    reference_tokens: int = PUBLISHED_TTFT_INPUT_TOKENS

    def extra_ms(self, uncached_tokens: float, cached_tokens: float = 0.0) -> float:
        """Milliseconds added to a TTFT drawn from the published figure (never negative: a request
        shorter than the reference is not modeled faster)."""
        read = self.uncached_ms_per_token * (uncached_tokens - self.reference_tokens)
        return max(0.0, read + self.cached_ms_per_token * cached_tokens)


SONNET_PREFILL = Prefill(
    0.1,
    0.015,
    f"{PROMPT_CACHE_LATENCY_SOURCE}; {PUBLISHED_TTFT_SOURCE}; "
    "assumed: the 100,000-token row less a ~1 s base (the short-prompt TTFT) "
    "gives 0.105 ms per uncached token and 0.014 ms per cached one; the 10,000-token row gives 0.05 ms saved "
    "per cached token (fixed overheads weigh more there): 0.1 and 0.015 taken. The newest published "
    "before/after measurement is Claude 3.5 Sonnet's (2024): newer hardware may read faster",
)
HAIKU_PREFILL = Prefill(
    0.05,
    0.0075,
    f"{PROMPT_CACHE_LATENCY_SOURCE}; {PUBLISHED_TTFT_SOURCE}; "
    "assumed: half of Sonnet's per-token figures (no Haiku measurement with "
    "and without the cache is published; Haiku is the smaller, faster model at a third of Sonnet's price)",
)


@dataclass(frozen=True)
class ModelLatency:
    stage: str
    model: str
    first_token: Latency
    tokens_per_s: float
    """The model's output speed once streaming (a rate, not sampled)."""
    prefill: Prefill = SONNET_PREFILL
    """What the request's input adds to ``first_token`` (whose figure is for ~1,000 input tokens)."""

    def first_token_p50_ms(self, uncached_tokens: float, cached_tokens: float = 0.0) -> float:
        """The modeled median time to first token of a request of that many Claude tokens."""
        return self.first_token.p50_ms + self.prefill.extra_ms(uncached_tokens, cached_tokens)


MODELS: dict[str, ModelLatency] = {
    "dev": ModelLatency(
        "dev",
        "Claude Haiku 5.5",
        Latency(
            "Bedrock time to first token, Claude Haiku",
            500,
            1500,
            "https://artificialanalysis.ai (Claude 4.5 Haiku: TTFT 0.48 s, as quoted at "
            "https://shadabchow.com/blogs/ai-models/claude-4-5-haiku-reasoning; the newest published Haiku); "
            "assumed p99 three times p50",
        ),
        90.0,
        HAIKU_PREFILL,
    ),
    "prod": ModelLatency(
        "prod",
        "Claude Sonnet 5.5",
        Latency(
            "Bedrock time to first token, Claude Sonnet",
            1200,
            3000,
            "https://www.bridgebench.ai/speedbench/claude-sonnet-4-6 (Claude Sonnet 4.6: median TTFT 1,207 ms; "
            "Artificial Analysis put Sonnet 4.5 at 1.80 s, https://lattice.uptownhr.com/claude-opus-4-5/"
            "speed-analysis); assumed p99 2.5 times p50",
        ),
        90.0,
        SONNET_PREFILL,
    ),
}

ANCHORS: tuple[tuple[str, str], ...] = (
    (
        "a cascaded voice agent (STT -> LLM -> TTS): some 800 ms from the end of speech to the agent's voice",
        "https://www.sippulse.ai/blog/voice-ai-agent-architecture-stt-llm-tts",
    ),
    (
        "sub-500 ms voice-to-voice is reached only by overlapping stages; past ~800 ms people repeat themselves",
        "https://speko.ai/blog/cutting-voice-agent-latency/",
    ),
)


def every_latency() -> list[Latency]:
    """Every injected figure, for the report and the tests."""
    return [
        *DYNAMODB.values(),
        DYNAMODB_DEFAULT,
        POST_TO_CONNECTION,
        APIGW_INGRESS,
        APIGW_EGRESS,
        LAMBDA_ASYNC_ACCEPT,
        LAMBDA_ASYNC_START,
        LAMBDA_INIT,
        *PHONE_NETWORKS.values(),
        *(model.first_token for model in MODELS.values()),
    ]


class Sampler:
    """Seeded draws from the figures above (one sampler per process: deterministic for a seed)."""

    def __init__(self, seed: int = 1) -> None:
        self._rng = random.Random(seed)
        self._lock = threading.Lock()  # the stack's threads draw at once; gauss() keeps state

    def ms(self, latency: Latency) -> float:
        with self._lock:
            return latency.sample_ms(self._rng)

    def chance(self, probability: float) -> bool:
        with self._lock:
            return self._rng.random() < probability

    def dynamodb_ms(self, operation: str) -> float:
        return self.ms(DYNAMODB.get(operation, DYNAMODB_DEFAULT))
