"""Per-container wiring: settings, boto3 clients and the service, built once and reused.

Observability stays out here, at the edge: the service layer gets a ``Metrics`` object, and the
adapters' calls (DynamoDB, Bedrock, the management API, the turn launch) are traced by wrapping
them when they are built, so an X-Ray trace shows where a turn's time went while ``shared``
never imports Powertools. Tracing is off outside Lambda and with ``POWERTOOLS_TRACE_DISABLED``;
then the X-Ray SDK is not even imported (``tracer``).
"""

from __future__ import annotations

import functools
import inspect
import os
import threading
from collections import Counter
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from contextlib import AbstractContextManager, asynccontextmanager, contextmanager
from functools import cache
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, overload

import botocore.session
from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.tracing.base import BaseProvider
from aws_lambda_powertools.utilities.typing import LambdaContext
from botocore.config import Config

from shared.adapters.agentcore_memory import AgentCoreMemory
from shared.adapters.brain import BedrockBrain, bedrock_client_config, prompt_cache_enabled
from shared.adapters.deadline_alarms import SqsDeadlineAlarms
from shared.adapters.gateway import ConnectionGateway
from shared.adapters.memory_write_log import MemoryWriteLog
from shared.adapters.store import SessionStore
from shared.adapters.turn_launcher import LambdaTurnLauncher
from shared.core.wrapper import wrapper_tool_spec
from shared.flows.commit import Committer
from shared.flows.config import Settings
from shared.flows.delivery import Delivery
from shared.flows.memory_keeper import MemoryKeeper
from shared.flows.memory_recall import MemoryRecall
from shared.flows.memory_tools import MemoryTools
from shared.flows.turn_runner import TurnRunner

if TYPE_CHECKING:  # what only some functions or tasks use, imported by the functions that build it
    from shared.adapters.mcp_client import McpClients
    from shared.adapters.session_records import SessionRecords
    from shared.flows.conductor_service import ConductorService
    from shared.flows.mcp_registry import McpRegistry, McpTurns
    from shared.flows.mcp_runner import McpRunner
    from shared.flows.memory_service import MemoryService
    from shared.flows.session_reaper import SessionReaper
    from shared.flows.session_service import SessionService
    from shared.flows.speculation_watcher import SpeculationWatcher

SERVICE_NAME = os.environ.get("POWERTOOLS_SERVICE_NAME", "voiceide-conductor")

logger = Logger(service=SERVICE_NAME)
metrics = Metrics(namespace=os.environ.get("POWERTOOLS_METRICS_NAMESPACE", "VoiceIDE"), service=SERVICE_NAME)


class _NoSegment:
    """What a disabled tracer's handler subsegment takes: annotations and metadata, dropped."""

    def put_annotation(self, key: str, value: Any) -> None:
        return None

    def put_metadata(self, key: str, value: Any, namespace: str = "default") -> None:
        return None


class NoTraces(BaseProvider):
    """A disabled tracer's provider: records nothing, as the X-Ray SDK's recorder does when the SDK
    is disabled, without importing the SDK (its recorder alone is a large part of a cold import:
    outside Lambda it builds an X-Ray client for its sampling rules)."""

    @contextmanager
    def in_subsegment(self, name: Any = None, **kwargs: Any) -> Iterator[Any]:
        yield _NoSegment()

    @asynccontextmanager
    async def in_subsegment_async(self, name: Any = None, **kwargs: Any) -> AsyncIterator[Any]:
        yield _NoSegment()

    def put_annotation(self, key: str, value: Any) -> None:
        return None

    def put_metadata(self, key: str, value: Any, namespace: str = "default") -> None:
        return None

    def patch(self, modules: Sequence[str]) -> None:
        return None

    def patch_all(self) -> None:
        return None


def build_tracer() -> Tracer:
    """The handlers' tracer. Where traces are sent (in Lambda, without ``POWERTOOLS_TRACE_DISABLED``,
    as Powertools decides it), the X-Ray SDK's recorder with botocore patched: every AWS call becomes
    a subsegment, nothing else is patched. Elsewhere a disabled tracer on ``NoTraces``."""
    if not Tracer._is_tracer_disabled():
        return Tracer(service=SERVICE_NAME, patch_modules=["botocore"])
    return Tracer(service=SERVICE_NAME, disabled=True, provider=NoTraces())


tracer = build_tracer()


Handler = Callable[[dict[str, Any], LambdaContext], dict[str, Any]]
"""A Lambda handler: the event and the invocation's context in, the response out."""


@overload
def lambda_entry(handler: Handler, /) -> Handler: ...


@overload
def lambda_entry(*, correlation_id_path: str) -> Callable[[Handler], Handler]: ...


def lambda_entry(
    handler: Handler | None = None, /, *, correlation_id_path: str | None = None
) -> Handler | Callable[[Handler], Handler]:
    """How every handler is entered (Powertools, here at the edge only); the ``$connect`` authorizer
    alone keeps to a logger of its own (no trace, no metrics, none of the service's imports):

    * the logger takes the invocation's context (``cold_start``, the request id) with the keys of
      the previous invocation cleared, the per-thread ones too, and the correlation id at
      ``correlation_id_path`` when one is given; it never logs the event
      (``POWERTOOLS_LOGGER_LOG_EVENT`` is overridden): a ``$connect``'s query string holds the
      client's token;
    * the invocation is one trace segment, without its response (what users said);
    * the metrics it adds are flushed as one EMF record when it returns.
    """
    if handler is None:
        return functools.partial(lambda_entry, correlation_id_path=correlation_id_path)
    run = handler

    @functools.wraps(run)
    def cleared(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
        logger.thread_safe_clear_keys()
        return run(event, context)

    measured = metrics.log_metrics(cleared)
    traced_handler = tracer.capture_lambda_handler(measured, capture_response=False)
    return logger.inject_lambda_context(
        traced_handler, correlation_id_path=correlation_id_path, clear_state=True, log_event=False
    )


Adapter = TypeVar("Adapter")

# The store calls a trace shows as subsegments (named Class.method).
STORE_CALLS = (
    *("put_connection", "get_connection", "delete_connection", "load", "commit", "history", "messages"),
    *("outbox", "transcript_items", "expired_session_keys", "delete_items"),
)

_AWS_CONFIG = Config(connect_timeout=3, read_timeout=10, retries={"mode": "standard", "total_max_attempts": 5})


@cache
def _aws_session() -> botocore.session.Session:
    """The container's one botocore session (boto3's default session, without boto3: importing boto3
    pulls in s3transfer, some 60 ms of a cold start for nothing the handlers use)."""
    return botocore.session.get_session()


def aws_client(service: str, **options: Any) -> Any:
    """A low-level client of ``service``, as ``boto3.client`` builds it (region, credentials and
    ``AWS_ENDPOINT_URL_*`` from the environment)."""
    return _aws_session().create_client(service, **options)


class PowertoolsMetrics:
    """The service layer's ``Metrics``, as Powertools metrics of the invocation (flushed as EMF)."""

    def count(self, name: str, value: int = 1) -> None:
        if value:
            metrics.add_metric(name=name, unit=MetricUnit.Count, value=value)

    def timing(self, name: str, milliseconds: float) -> None:
        metrics.add_metric(name=name, unit=MetricUnit.Milliseconds, value=round(milliseconds, 1))


class CallCounts:
    """The AWS calls of the current invocation (Lambda runs one at a time per container), as the
    botocore clients make them: DynamoDB requests and posts to connections."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: Counter[str] = Counter()

    def reset(self) -> None:
        with self._lock:
            self._counts.clear()

    def counting(self, name: str) -> Callable[..., None]:
        def count(**_: Any) -> None:
            with self._lock:
                self._counts[name] += 1

        return count

    def get(self, name: str) -> int:
        with self._lock:
            return self._counts[name]


call_counts = CallCounts()
DYNAMODB_REQUESTS_METRIC = "DynamoDBRequests"
POSTS_METRIC = "Posts"


class SubsegmentProvider(Protocol):
    """What ``traced`` needs of a tracer's provider (the X-Ray SDK's recorder in Lambda)."""

    def in_subsegment(self, name: str) -> AbstractContextManager[Any]: ...


def traced(adapter: Adapter, *methods: str, provider: SubsegmentProvider | None = None) -> Adapter:
    """Record every call of the adapter's ``methods`` as a subsegment named ``Class.method``.

    Arguments and results are never recorded (they hold what users said); an error is, by the
    subsegment, without logging it (a lost race is an expected ``VersionConflict``). A generator
    method (the model stream) is one subsegment from its request to its last item or its close.
    With tracing disabled (locally, in tests) the adapter is left as it is.
    """
    if provider is None:
        if tracer.disabled:
            return adapter
        provider = tracer.provider
    for name in methods:
        method = getattr(adapter, name)
        setattr(adapter, name, _in_subsegment(provider, f"{type(adapter).__name__}.{name}", method))
    return adapter


def _in_subsegment(provider: SubsegmentProvider, name: str, method: Callable[..., Any]) -> Callable[..., Any]:
    if inspect.isgeneratorfunction(method):

        @functools.wraps(method)
        def stream(*args: Any, **kwargs: Any) -> Any:
            with provider.in_subsegment(name):
                try:
                    return (yield from method(*args, **kwargs))
                except GeneratorExit:  # closed early (barge-in, new turn): not a fault
                    return None

        return stream

    @functools.wraps(method)
    def call(*args: Any, **kwargs: Any) -> Any:
        with provider.in_subsegment(name):
            return method(*args, **kwargs)

    return call


@cache
def settings() -> Settings:
    return Settings.from_env()


@cache
def store() -> SessionStore:
    client = aws_client("dynamodb", config=_AWS_CONFIG)
    client.meta.events.register("before-call.dynamodb", call_counts.counting(DYNAMODB_REQUESTS_METRIC))
    store = SessionStore(
        client,
        settings().table_name,
        ttl_seconds=settings().session_ttl_seconds,
        ended_ttl_seconds=settings().ended_retention_seconds,
        history_ttl_seconds=settings().history_ttl_seconds,
    )
    return traced(store, *STORE_CALLS)


@cache
def service() -> ConductorService:
    from shared.flows.conductor_service import ConductorService  # not the turn function's

    config = settings()
    lambda_client = aws_client("lambda", config=_AWS_CONFIG)
    return ConductorService(
        store=store(),
        gateway=gateway(),
        launcher=traced(LambdaTurnLauncher(lambda_client, config.turn_function), "launch"),
        runner=turn_runner(),
        settings=config,
        logger=logger,
        metrics=PowertoolsMetrics(),
    )


@cache
def gateway() -> ConnectionGateway:
    def management_client(endpoint: str) -> Any:
        client = aws_client("apigatewaymanagementapi", endpoint_url=endpoint, config=_AWS_CONFIG)
        client.meta.events.register("before-call.apigatewaymanagementapi", call_counts.counting(POSTS_METRIC))
        return client

    return traced(ConnectionGateway(management_client), "post", "close")


@cache
def turn_runner() -> TurnRunner:
    config = settings()
    bedrock = aws_client(
        "bedrock-runtime",
        region_name=config.bedrock_region,
        config=bedrock_client_config(
            config.bedrock_connect_timeout_s, config.stream_idle_timeout_s, config.bedrock_max_attempts
        ),
    )
    brain = BedrockBrain(
        bedrock,
        model_id=config.model_id,
        system_prompt=config.system_prompt,
        tool_spec=wrapper_tool_spec(config.catalog),
        inference=config.inference,
        prompt_cache=prompt_cache_enabled(config.prompt_cache, config.model_id),
        history_window=config.history_window,
    )
    traced(brain, "stream")
    metrics_sink = PowertoolsMetrics()
    committer = Committer(store(), config, metrics_sink)
    delivery = Delivery(store=store(), gateway=gateway(), committer=committer, logger=logger, metrics=metrics_sink)
    memory = MemoryKeeper(
        store=store(), summarizer=brain, committer=committer, settings=config, logger=logger, metrics=metrics_sink
    )
    remembered = person_memory()
    lambda_client = aws_client("lambda", config=_AWS_CONFIG)
    return TurnRunner(
        store=store(),
        brain=brain,
        committer=committer,
        delivery=delivery,
        settings=config,
        logger=logger,
        metrics=metrics_sink,
        alarms=deadline_alarms(),
        memory=memory,
        memory_tools=None if remembered is None else memory_tools(remembered, metrics_sink),
        recall=None if remembered is None else MemoryRecall(remembered, config, logger, metrics_sink),
        mcp=mcp_turns(committer, delivery, LambdaTurnLauncher(lambda_client, config.turn_function)),
    )


MCP_SERVERS_ENV = "CONDUCTOR_MCP_SERVERS"


@cache
def mcp_clients() -> McpClients | None:
    """The stage's MCP servers (``CONDUCTOR_MCP_SERVERS``); None names none, and the SDK is never imported."""
    from shared.adapters.mcp.config import servers_from_env
    from shared.adapters.mcp_client import McpClients

    servers = servers_from_env(os.environ.get(MCP_SERVERS_ENV))
    return McpClients(servers) if servers else None


@cache
def mcp_registry() -> McpRegistry | None:
    clients = mcp_clients()
    if clients is None:
        return None
    from shared.core.mcp_tools import ServerRules
    from shared.flows.mcp_registry import McpRegistry

    rules = [
        ServerRules(server.name, frozenset(server.allow), frozenset(server.deny), frozenset(server.background))
        for server in clients.servers
    ]
    return McpRegistry(clients, rules, logger, PowertoolsMetrics())


def mcp_turns(committer: Committer, delivery: Delivery, launcher: LambdaTurnLauncher) -> McpTurns | None:
    registry = mcp_registry()
    if registry is None:
        return None
    from shared.flows.mcp_registry import McpTurns

    return McpTurns(registry, committer, delivery, traced(launcher, "launch"))


@cache
def mcp_runner() -> McpRunner:
    """The calls of tools on MCP servers, made in the turn function (``TurnTask.mcp_calls``)."""
    from shared.flows.mcp_runner import McpRunner

    runner, clients, registry = turn_runner(), mcp_clients(), mcp_registry()
    if clients is None or registry is None:
        raise RuntimeError(f"a task of MCP calls, but {MCP_SERVERS_ENV} names no server")
    return McpRunner(
        store=store(),
        committer=runner.committer,
        delivery=runner.delivery,
        registry=registry,
        clients=clients,
        settings=settings(),
        logger=logger,
        metrics=PowertoolsMetrics(),
        continue_stream=runner.run,
    )


# AgentCore Memory answers in tens of milliseconds: a memory that hangs must not hold a turn long.
_MEMORY_CONFIG = Config(connect_timeout=2, read_timeout=5, retries={"mode": "standard", "total_max_attempts": 3})
MEMORY_CALLS = (
    *("retrieve", "page", "record", "create", "delete", "delete_many"),
    *("add_turn", "sessions", "erase_session"),
)


@cache
def person_memory() -> AgentCoreMemory | None:
    """The stage's AgentCore Memory (None: ``CONDUCTOR_MEMORY_ID`` unset, nothing is remembered)."""
    memory_id = settings().memory_id
    if not memory_id:
        return None

    def memory_client() -> Any:  # made on the first call: most message invocations never make one
        return aws_client("bedrock-agentcore", config=_MEMORY_CONFIG)

    return traced(AgentCoreMemory(memory_client, memory_id), *MEMORY_CALLS)


def memory_tools(memory: AgentCoreMemory, metrics_sink: PowertoolsMetrics) -> MemoryTools:
    client = aws_client("dynamodb", config=_AWS_CONFIG)
    client.meta.events.register("before-call.dynamodb", call_counts.counting(DYNAMODB_REQUESTS_METRIC))
    return MemoryTools(memory, MemoryWriteLog(client, settings().table_name), settings(), logger, metrics_sink)


@cache
def speculation_watcher() -> SpeculationWatcher:
    from shared.flows.speculation_watcher import SpeculationWatcher

    return SpeculationWatcher(turn_runner())


@cache
def deadline_alarms() -> SqsDeadlineAlarms | None:
    """Tool-call deadline alarms on the deadline queue; None without ``CONDUCTOR_DEADLINE_QUEUE_URL``."""
    queue_url = os.environ.get("CONDUCTOR_DEADLINE_QUEUE_URL")
    if not queue_url:
        return None
    return SqsDeadlineAlarms(aws_client("sqs", config=_AWS_CONFIG), queue_url)


# The sessions API: the WebSocket stage's management endpoint (https://<api>.execute-api.<region>.
# amazonaws.com/<stage>), to tell an ended or erased session's connection and close it.
WEBSOCKET_CALLBACK_URL_ENV = "CONDUCTOR_WEBSOCKET_CALLBACK_URL"


@cache
def session_records() -> SessionRecords:
    from shared.adapters.session_records import SessionRecords

    client = aws_client("dynamodb", config=_AWS_CONFIG)
    client.meta.events.register("before-call.dynamodb", call_counts.counting(DYNAMODB_REQUESTS_METRIC))
    return traced(SessionRecords(client, settings().table_name), "page", "erase", "session_keys", "set_expiry")


@cache
def session_service() -> SessionService:
    from shared.flows.session_service import SessionService

    return SessionService(
        store=store(),
        records=session_records(),
        committer=Committer(store(), settings(), PowertoolsMetrics()),
        gateway=gateway(),
        websocket_endpoint=os.environ.get(WEBSOCKET_CALLBACK_URL_ENV) or None,
        ended_retention_seconds=settings().ended_retention_seconds,
        items_follow_state=settings().history_ttl_seconds is not None,
    )


@cache
def memory_service() -> MemoryService:
    from shared.flows.memory_service import MemoryService

    return MemoryService(
        person_memory(), session_records(), Committer(store(), settings(), PowertoolsMetrics()), logger
    )


@cache
def session_reaper() -> SessionReaper:
    from shared.flows.session_reaper import SessionReaper

    return SessionReaper(store())


def reset() -> None:
    """Forget the container's clients and settings (the local stack and tests re-point them)."""
    if mcp_clients.cache_info().currsize and (clients := mcp_clients()) is not None:
        clients.close()  # its event loop's thread and open sessions
    for built in (
        *(_aws_session, settings, store, service, gateway, turn_runner, speculation_watcher, deadline_alarms),
        *(person_memory, memory_service, mcp_clients, mcp_registry, mcp_runner, session_records, session_service),
        session_reaper,
    ):
        built.cache_clear()
