"""The whole conductor in one process, with no AWS account: the deployed handlers behind local endpoints.

* DynamoDB: moto in server mode on a free loopback port, with the conductor's table.
* Bedrock: ``LocalBedrockServer`` running the offline brain (or any responder), unless
  ``use_real_bedrock`` leaves the real service and the user's credentials in charge.
* API Gateway: ``LocalApiGateway`` invoking ``lambdas.{connect,message,disconnect}.handler``, and on
  the same port the sessions API's HTTP API (``/sessions``) invoking ``lambdas.sessions_api.handler``
  with payload-2.0 events; it reaches the WebSockets through the management API
  (``CONDUCTOR_WEBSOCKET_CALLBACK_URL``).
* Memory (``memory=True``, the default): ``LocalAgentCoreMemoryServer``, the AgentCore Memory data
  plane with deterministic stand-ins for extraction and search, serving the memory
  ``voiceide_local-0123456789`` (``CONDUCTOR_MEMORY_ID``); ``memory=False`` leaves the conductor
  remembering nothing.
* MCP servers (``mcp_servers``): the demo MCP server (``conductor_local.mcp_demo``) started with the
  stack for ``"demo"``, and any other server by URL, named to the handlers in
  ``CONDUCTOR_MCP_SERVERS``; none by default (the variable unset).
* Lambda: ``LocalLambdaServer`` serving the ``Invoke`` API for the turn runner
  (``lambdas.turn.handler``), which ``$default`` launches asynchronously as it does on AWS, and
  its on-failure destination (``lambdas.turn_abandoned.handler``).
* Sign-in (``auth="cognito"``): a user pool, app client and test user in the moto server's
  cognito-idp (``conductor_local.cognito.user_pool``), and ``lambdas.authorizer.handler`` in front of
  ``$connect`` verifying the pool's tokens, as deployed. Every route then sees
  ``requestContext.authorizer`` (the user's ``sub`` as ``principalId``), and a connection
  without a principal is refused. The sessions API gets API Gateway's JWT authorizer for the same
  pool: requests without a valid token are answered 401 before the Lambda runs.

The handlers find the local endpoints through boto3's standard ``AWS_ENDPOINT_URL_<SERVICE>``
variables, set here for the stack's lifetime and restored on ``stop()``.
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import logging
import os
import secrets
import sys
from collections.abc import Callable, Mapping, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal

import boto3

from conductor_local.agentcore_memory.store import LOCAL_MEMORY_ID
from conductor_local.cognito.user_pool import LocalUserPool, create_user_pool
from conductor_local.dynamodb.tables import create_tables
from conductor_local.gateway.console import CONSOLE_DIR
from conductor_local.gateway.http_api import HttpApi, JwtAuthorizer
from conductor_local.gateway.server import AUTHORIZER_ROUTE, LocalApiGateway, RouteHandlers
from conductor_local.lambda_runtime.context import LocalLambdaContext
from conductor_local.lambda_runtime.turn_functions import HANDLER_TIMEOUT_S, TURN_FUNCTION, turn_functions
from conductor_local.mcp_demo.servers import ServerSpec, read_specs, servers_env, servers_setting
from conductor_local.service_process import ServiceProcess
from shared.adapters.jwt_auth import CognitoSettings

if TYPE_CHECKING:
    from conductor_local.bedrock.offline_brain import ModelPace
    from conductor_local.mcp_demo.server import DemoMcpServer

DEFAULT_TABLE = "voiceide-conductor-local"
DEFAULT_REGION = "us-east-1"
MESSAGE_TIMEOUT_S = 29.0
"""The message Lambda's timeout as deployed (infra/config.py); connect/disconnect get 10 s."""
SESSIONS_API_FUNCTION = "voiceide-conductor-sessions-api"
SESSIONS_API_TIMEOUT_S = 29.0
"""The sessions API function's timeout as deployed (infra/constructs/functions.py)."""
CALLBACK_URL_ENV = "CONDUCTOR_WEBSOCKET_CALLBACK_URL"
"""Where the sessions API's Lambda reaches the WebSockets: the management API's endpoint."""
MEMORY_ID_ENV = "CONDUCTOR_MEMORY_ID"
"""The memory the handlers remember people in (absent: they remember nothing)."""
LOCAL_CREDENTIALS = {"AWS_ACCESS_KEY_ID": "local", "AWS_SECRET_ACCESS_KEY": "local"}
DEV_PRICES = {"input": 0.11, "output": 0.55, "cache_write": 0.1375, "cache_read": 0.011, "as_of": "2026-11-27"}
"""The dev stage's list prices (cdk.json, ``stages.dev.bedrock.prices``; a test keeps them equal): the
local stack prices each turn as dev does (``CONDUCTOR_PRICES``), so ``turnUsage`` carries a cost."""
AuthMode = Literal["none", "cognito"]
AUTH_MODES: tuple[AuthMode, ...] = ("none", "cognito")


def lambda_context(route_key: str) -> LocalLambdaContext:
    """A fresh context per invocation, named and timed like the deployed function for the route."""
    if route_key == AUTHORIZER_ROUTE:
        name, timeout = "authorizer", HANDLER_TIMEOUT_S
    elif route_key in ("$connect", "$disconnect"):
        name, timeout = route_key[1:], HANDLER_TIMEOUT_S
    else:
        name, timeout = "message", MESSAGE_TIMEOUT_S
    return LocalLambdaContext(function_name=f"voiceide-conductor-{name}", timeout_seconds=timeout)


def _print_line(line: str) -> None:
    """A log line on stdout; what its encoding cannot write is escaped, never an error."""
    encoding = getattr(sys.stdout, "encoding", None) or "utf-8"
    print(line.encode(encoding, "backslashreplace").decode(encoding), flush=True)


class LocalStack:
    """Starts and stops the three local services and the handlers; usable as a context manager.

    ``port=0`` picks a free port (see ``port``/``ws_url``). ``brain_responder`` replaces the
    offline brain (a ``LocalBedrockServer`` responder); ``handlers`` replaces the deployed
    handlers; ``env`` adds environment variables for the handlers (e.g. conductor limits).
    ``model_pace`` makes the offline brain stream as fast as a real model (``ModelPace``: time to
    first token, delta size, tokens per second); None (the default) answers at once.

    ``auth="cognito"`` puts sign-in in front of ``$connect``: a user pool with a test user in
    the moto server (``user_pool`` says where, and the test user's credentials), the deployed
    authorizer configured for it (added to ``handlers`` too when they bring none), and
    ``CONDUCTOR_REQUIRE_PRINCIPAL=true``. ``auth="none"`` (the default) has no authorizer.
    """

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 8080,
        *,
        use_real_bedrock: bool = False,
        quiet: bool = False,
        brain_responder: Callable[[str, dict[str, Any]], Any] | None = None,
        handlers: RouteHandlers | None = None,
        env: Mapping[str, str] | None = None,
        table_name: str = DEFAULT_TABLE,
        stage: str = "local",
        on_log: Callable[[str], None] | None = None,
        auth: AuthMode = "none",
        model_pace: ModelPace | None = None,
        service_processes: bool = False,
        allowed_origins: tuple[str, ...] = (),
        memory: bool = True,
        mcp_servers: Sequence[str] = (),
        mcp_demo_ci_seconds: float | None = None,
    ) -> None:
        """``service_processes``: DynamoDB, Bedrock, the memory and the Lambda service (the turn runner)
        each in a process of its own, reached over HTTP only, to use the other cores under load; by default
        they run in this process, where tests and the benchmark's meters look into them.

        The gateway serves the voice console at ``console_url``; browser origins other than its own
        are refused at the handshake unless listed in ``allowed_origins`` (``*``: any).

        ``memory``: the local AgentCore Memory, its endpoint and memory id given to the handlers
        (``AWS_ENDPOINT_URL_BEDROCK_AGENTCORE``, ``CONDUCTOR_MEMORY_ID``); False: no memory (the
        variables unset).

        ``mcp_servers``: the MCP servers the conductor calls tools on, each ``"demo"`` (the demo server,
        started and stopped with the stack: ``mcp_demo``; its ``ci.run`` lasts ``mcp_demo_ci_seconds``,
        8 s by default), an http(s) URL (named ``mcp1``, ``mcp2``…) or ``"name=URL"``; given to the
        handlers as ``CONDUCTOR_MCP_SERVERS`` (a bad value: ValueError)."""
        if auth not in AUTH_MODES:
            raise ValueError(f"auth must be one of {', '.join(AUTH_MODES)}, not {auth!r}")
        self.mcp_servers: tuple[ServerSpec, ...] = read_specs(mcp_servers)
        self._mcp_demo_ci_seconds = mcp_demo_ci_seconds
        self.mcp_demo: DemoMcpServer | None = None
        """With ``"demo"`` among ``mcp_servers``: the demo MCP server (its ``calls``, ``set_tools``)."""
        self.host = host
        self.auth = auth
        self.use_real_bedrock = use_real_bedrock
        self.table_name = table_name
        self._port = port
        self._stage = stage
        self._brain_responder = brain_responder
        self.model_pace = model_pace
        self._handlers = handlers
        self._extra_env = dict(env or {})
        self._on_log = None if quiet else (on_log or _print_line)
        self._moto: Any = None
        self._service_processes = service_processes
        self.allowed_origins = allowed_origins
        self.bedrock_server: Any = None
        """The ``LocalBedrockServer`` (None with real Bedrock); its ``responder`` may be swapped."""
        self.memory = memory
        self.memory_server: Any = None
        """The ``LocalAgentCoreMemoryServer`` (its ``store`` holds what was remembered); None without memory."""
        self.gateway: LocalApiGateway | None = None
        self.lambda_server: Any = None
        """The ``LocalLambdaServer`` running the turn runner (``wait_idle()`` waits for turns)."""
        self.dynamodb_endpoint = ""
        self.deadline_queue_url = ""
        self.deadline_poller: Any = None
        """Feeds the tool-call deadline queue to the tool-deadline function (Lambda's event source mapping)."""
        self.region = DEFAULT_REGION
        self.user_pool: LocalUserPool | None = None
        """With ``auth="cognito"``: the local user pool, its app client and test user."""
        self._saved_env: dict[str, str | None] = {}

    # ---- lifecycle ------------------------------------------------------------------------

    def start(self) -> LocalStack:
        if self.gateway is not None:
            raise RuntimeError("the stack is already started")
        try:
            self.region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or DEFAULT_REGION
            self._start_dynamodb()
            if self.auth == "cognito":
                self._create_user_pool()
            if not self.use_real_bedrock:
                self._start_bedrock()
            if self.memory:
                self._start_memory()
            if any(server.is_demo for server in self.mcp_servers):
                self._start_mcp_demo()
            if not self._service_processes:
                self._start_lambda()
            self._set_env()
            if self._service_processes:
                self._start_lambda()
            handlers = self._handlers or _deployed_handlers()
            if self.auth == "cognito" and handlers.authorizer is None:
                handlers = dataclasses.replace(handlers, authorizer=_deployed_authorizer)
            authorizer = None
            if self.user_pool is not None:
                pool = self.user_pool
                authorizer = JwtAuthorizer(CognitoSettings.of(pool.issuer, [pool.client_id], pool.jwks_url))
            http_api = HttpApi(
                handlers.sessions,
                authorizer=authorizer,
                context_factory=lambda: LocalLambdaContext(SESSIONS_API_FUNCTION, SESSIONS_API_TIMEOUT_S),
                region=self.region,
                on_log=self._on_log,
            )
            self.gateway = LocalApiGateway(
                handlers,
                self.host,
                self._port,
                stage=self._stage,
                context_factory=lambda_context,
                on_log=self._on_log,
                region=self.region,
                console_dir=CONSOLE_DIR,
                console_config=self._console_config(),
                allowed_origins=self.allowed_origins,
                http_api=http_api,
            ).start()
            self._export({CALLBACK_URL_ENV: self.gateway.callback_url})
            # the console (and --allow-origin pages) sign in at the moto server's user pool
            self._moto.allow_origins(self.gateway.browser_origins)
            from conductor_local.sqs.deadline_queue import start_poller

            self.deadline_poller = start_poller(
                self.dynamodb_endpoint, self.deadline_queue_url, self.lambda_server.url, self.region
            )
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Disconnect every client, stop the services and restore the environment."""
        if self.deadline_poller is not None:
            self.deadline_poller.stop()
            self.deadline_poller = None
        if self.gateway is not None:
            self.gateway.stop()
            self.gateway = None
        if self.bedrock_server is not None:
            self.bedrock_server.stop()
            self.bedrock_server = None
        if self.memory_server is not None:
            self.memory_server.stop()
            self.memory_server = None
        if self.lambda_server is not None:
            self.lambda_server.stop()
            self.lambda_server = None
        if self.mcp_demo is not None:
            self.mcp_demo.stop()
            self.mcp_demo = None
        if self._moto is not None:
            self._moto.stop()
            self._moto = None
        self.user_pool = None
        self._restore_env()
        if self._handlers is None:
            _reset_handler_clients()

    def __enter__(self) -> LocalStack:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    # ---- addresses ------------------------------------------------------------------------

    @property
    def port(self) -> int:
        return self._running_gateway().port

    @property
    def ws_url(self) -> str:
        """``ws://HOST:PORT/``; clients add ``?sessionId=<uuid v4>`` (see ``session_url``)."""
        return self._running_gateway().url

    @property
    def console_url(self) -> str:
        """The voice console (``/console/``), on the gateway's own origin."""
        return self._running_gateway().console_url

    def _console_config(self) -> dict[str, Any]:
        """What the console reads from ``/console/config.json``: how to sign in, when it must."""
        if self.user_pool is None:
            return {"auth": "none"}
        pool = self.user_pool
        return {
            "auth": "cognito",
            "region": self.region,
            "clientId": pool.client_id,
            "cognitoEndpoint": pool.endpoint,
            "testUser": {"username": pool.username, "password": pool.password},
        }

    def session_url(self, session_id: str) -> str:
        return f"{self.ws_url}?sessionId={session_id}"

    @property
    def sessions_url(self) -> str:
        """The sessions API's base URL, ``http://HOST:PORT/sessions`` (the gateway's own port)."""
        return self._running_gateway().sessions_url

    @property
    def callback_url(self) -> str:
        """The management API endpoint (``apigatewaymanagementapi`` ``endpoint_url``)."""
        return self._running_gateway().callback_url

    @property
    def bedrock_endpoint(self) -> str | None:
        return None if self.bedrock_server is None else self.bedrock_server.url

    @property
    def memory_endpoint(self) -> str | None:
        """The local AgentCore Memory's URL (None without memory)."""
        return None if self.memory_server is None else self.memory_server.url

    def mcp_server_setting(self) -> list[dict[str, str]]:
        """The MCP servers as the handlers get them (``CONDUCTOR_MCP_SERVERS``), in the order given."""
        return servers_setting(self.mcp_servers, None if self.mcp_demo is None else self.mcp_demo.url)

    def dynamodb_client(self) -> Any:
        """A boto3 DynamoDB client for the stack's table, to look at what the handlers stored."""
        return boto3.client(
            "dynamodb",
            endpoint_url=self.dynamodb_endpoint,
            region_name=self.region,
            aws_access_key_id=LOCAL_CREDENTIALS["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=LOCAL_CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
        )

    def cognito_client(self) -> Any:
        """A boto3 cognito-idp client on the stack's moto server (e.g. to add users)."""
        return boto3.client(
            "cognito-idp",
            endpoint_url=self.dynamodb_endpoint,
            region_name=self.region,
            aws_access_key_id=LOCAL_CREDENTIALS["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=LOCAL_CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
        )

    def _running_gateway(self) -> LocalApiGateway:
        if self.gateway is None:
            raise RuntimeError("the stack is not started")
        return self.gateway

    # ---- parts ----------------------------------------------------------------------------

    def _start_dynamodb(self) -> None:
        from conductor_local.dynamodb.server import LocalMotoServer

        logging.getLogger("werkzeug").setLevel(logging.WARNING)  # no access log line per request
        if self._service_processes:
            self._moto = ServiceProcess("dynamodb")
        else:
            self._moto = LocalMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        self._moto.start()
        host, port = self._moto.get_host_and_port()
        self.dynamodb_endpoint = f"http://{host}:{port}"
        create_tables(self.dynamodb_client(), self.table_name)
        from conductor_local.sqs.deadline_queue import create_deadline_queue, sqs_client

        self.deadline_queue_url = create_deadline_queue(sqs_client(self.dynamodb_endpoint, self.region))

    def _create_user_pool(self) -> None:
        self.user_pool = create_user_pool(self.cognito_client(), self.dynamodb_endpoint, self.region)

    def _start_bedrock(self) -> None:
        from conductor_local.bedrock.server import LocalBedrockServer

        responder = self._brain_responder
        if responder is None and self._service_processes:
            pace = self.model_pace
            spec = "instant" if pace is None else f"{pace.first_token_s * 1000:g}:{pace.tokens_per_s:g}"
            self.bedrock_server = ServiceProcess("bedrock", [spec]).start()
            return
        if responder is None:
            from conductor_local.bedrock.offline_brain import OfflineBrain

            responder = OfflineBrain(pace=self.model_pace)
        thinking = self.model_pace.seconds_per_token if self.model_pace is not None else None
        self.bedrock_server = LocalBedrockServer(responder, "127.0.0.1", 0, think_seconds_per_token=thinking).start()

    def _start_memory(self) -> None:
        from conductor_local.agentcore_memory.server import LocalAgentCoreMemoryServer

        if self._service_processes:
            self.memory_server = ServiceProcess("memory").start()
            return
        self.memory_server = LocalAgentCoreMemoryServer("127.0.0.1", 0).start()

    def _start_mcp_demo(self) -> None:
        from conductor_local.mcp_demo.server import DEFAULT_CI_SECONDS, DemoMcpServer

        seconds = self._mcp_demo_ci_seconds
        self.mcp_demo = DemoMcpServer(ci_seconds=DEFAULT_CI_SECONDS if seconds is None else seconds).start()

    def _start_lambda(self) -> None:
        from conductor_local.lambda_runtime.server import LocalLambdaServer
        from conductor_local.sqs.deadline_queue import deadline_functions

        if self._service_processes:  # it runs the handlers with the environment set by now
            self.lambda_server = ServiceProcess("lambda").start()
            self._export({"AWS_ENDPOINT_URL_LAMBDA": self.lambda_server.url})
            return
        self.lambda_server = LocalLambdaServer(turn_functions() | deadline_functions()).start()

    def _set_env(self) -> None:
        region = self.region
        env: dict[str, str | None] = {
            "AWS_ENDPOINT_URL_DYNAMODB": self.dynamodb_endpoint,
            "AWS_ENDPOINT_URL_LAMBDA": self.lambda_server.url if self.lambda_server is not None else None,
            "AWS_ENDPOINT_URL_SQS": self.dynamodb_endpoint,
            "CONDUCTOR_DEADLINE_QUEUE_URL": self.deadline_queue_url,
            "CONDUCTOR_TURN_FUNCTION": TURN_FUNCTION,
            "CONDUCTOR_TABLE": self.table_name,
            "AWS_REGION": region,
            "AWS_DEFAULT_REGION": region,
        }
        # the memory the handlers remember people in (none: the conductor remembers nothing)
        env["AWS_ENDPOINT_URL_BEDROCK_AGENTCORE"] = self.memory_endpoint
        env[MEMORY_ID_ENV] = LOCAL_MEMORY_ID if self.memory_server is not None else None
        # the MCP servers the conductor calls tools on (none: the variable unset)
        env |= servers_env(self.mcp_servers, None if self.mcp_demo is None else self.mcp_demo.url)
        if self.bedrock_server is not None:
            env["AWS_ENDPOINT_URL_BEDROCK_RUNTIME"] = self.bedrock_server.url
            # Nothing here talks to AWS: keep any real credentials of the user out of reach.
            env |= {**LOCAL_CREDENTIALS, "AWS_SESSION_TOKEN": None, "AWS_PROFILE": None}
        defaults = {
            "POWERTOOLS_SERVICE_NAME": "voiceide-conductor",
            "POWERTOOLS_METRICS_NAMESPACE": "VoiceIDE/Conductor",
            "POWERTOOLS_TRACE_DISABLED": "true",
            "POWERTOOLS_METRICS_DISABLED": "true",
            # Speculative turns are on locally, as in the dev stage (cdk.json's ``speculation``).
            "CONDUCTOR_SPECULATION": "true",
            # Each turn's estimated cost at the dev stage's prices; no daily ceiling, as in dev.
            "CONDUCTOR_PRICES": json.dumps(DEV_PRICES),
            # The sessions API's page cursor key (deployed: a Secrets Manager secret), one per stack.
            "CONDUCTOR_CURSOR_KEY": secrets.token_hex(32),
        }
        env |= {name: value for name, value in defaults.items() if name not in os.environ}
        if self.user_pool is not None:
            env |= {**self.user_pool.authorizer_env(), "CONDUCTOR_REQUIRE_PRINCIPAL": "true"}
        env |= self._extra_env
        self._export(env)

    def _export(self, env: Mapping[str, str | None]) -> None:
        """Set (None: unset) these variables until the stack stops."""
        for name, value in env.items():
            self._saved_env.setdefault(name, os.environ.get(name))
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value

    def _restore_env(self) -> None:
        for name, value in self._saved_env.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        self._saved_env.clear()


def _deployed_handlers() -> RouteHandlers:
    """The Lambda handlers, imported only now that the environment points at the local stack."""
    _reset_handler_clients()
    return RouteHandlers(
        connect=importlib.import_module("lambdas.connect").handler,
        message=importlib.import_module("lambdas.message").handler,
        disconnect=importlib.import_module("lambdas.disconnect").handler,
        sessions=_deployed_sessions_api,
    )


def _deployed_sessions_api(event: Any, context: Any) -> Any:
    """The sessions API's Lambda, imported at its first invocation (its environment is set by then)."""
    return importlib.import_module("lambdas.sessions_api").handler(event, context)


def _deployed_authorizer(event: Any, context: Any) -> Any:
    """The ``$connect`` authorizer, imported at its first invocation (its environment is set by then)."""
    return importlib.import_module("lambdas.authorizer").handler(event, context)


def _reset_handler_clients() -> None:
    """Drop the clients a handler container built, so they are rebuilt from the current environment."""
    runtime = sys.modules.get("lambdas.runtime")
    if runtime is not None:
        runtime.reset()
