"""A local service (DynamoDB, Bedrock, the memory, the Lambda service) in a process of its own.

On AWS each is a service of its own; locally they can share the stack's Python interpreter (where
tests look into them) or, under load, run beside it on another core:
``python -m conductor_local.service_process dynamodb|bedrock <pace>|memory|lambda``. The child serves
until its stdin closes (the stack stopped, or went away); the first line it prints is its URL.
The Lambda service runs the deployed handlers with the environment the stack set before it started.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Protocol


class Server(Protocol):
    @property
    def url(self) -> str: ...

    def stop(self) -> None: ...


ALLOW_ORIGINS = "allow-origins"
"""The line (then the origins, space-separated) telling a running service which browser origins
it may answer (``LocalMotoServer.allow_origins``); services without browsers ignore it."""


class ServiceProcess:
    """One of this module's services (``SERVICES``) in a child process."""

    def __init__(self, service: str, args: Sequence[str] = ()) -> None:
        if service not in SERVICES:
            raise ValueError(f"no local service {service!r}")
        self.service = service
        self.args = list(args)
        self.url = ""
        self._process: subprocess.Popen[str] | None = None

    def start(self) -> ServiceProcess:
        root = str(Path(__file__).resolve().parents[1])
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, (root, os.environ.get("PYTHONPATH"))))}
        self._process = subprocess.Popen(
            [sys.executable, "-m", __name__, self.service, *self.args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        assert self._process.stdout is not None
        self.url = self._process.stdout.readline().strip()
        if not self.url.startswith("http://"):
            self.stop()
            raise RuntimeError(f"the local {self.service} service did not start")
        return self

    def cpu_seconds(self) -> float | None:
        """CPU time the service's process has used so far (None where ``/proc`` cannot tell)."""
        if self._process is None:
            return None
        try:
            fields = Path(f"/proc/{self._process.pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            return None
        user, system = int(fields[11]), int(fields[12])  # utime and stime, the 14th and 15th fields
        return (user + system) / os.sysconf("SC_CLK_TCK")

    def allow_origins(self, origins: Iterable[str]) -> None:
        """Tell the service which browser origins it may answer (the console's own)."""
        if self._process is None or self._process.stdin is None:
            raise RuntimeError(f"the local {self.service} service is not running")
        self._process.stdin.write(" ".join([ALLOW_ORIGINS, *origins]) + "\n")
        self._process.stdin.flush()

    def get_host_and_port(self) -> tuple[str, int]:
        host, _, port = self.url.removeprefix("http://").rpartition(":")
        return host, int(port)

    def stop(self) -> None:
        process, self._process = self._process, None
        if process is None:
            return
        if process.stdin is not None:
            process.stdin.close()  # the service's signal to stop
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        if process.stdout is not None:
            process.stdout.close()


def _dynamodb(args: Sequence[str]) -> Server:
    from conductor_local.dynamodb.server import LocalMotoServer

    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # no access log line per request
    server = LocalMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    return server


def _bedrock(args: Sequence[str]) -> Server:
    from conductor_local.bedrock.offline_brain import ModelPace, OfflineBrain
    from conductor_local.bedrock.server import LocalBedrockServer

    pace = ModelPace.parse(args[0]) if args else None
    thinking = pace.seconds_per_token if pace is not None else None
    return LocalBedrockServer(OfflineBrain(pace=pace), "127.0.0.1", 0, think_seconds_per_token=thinking).start()


def _memory(args: Sequence[str]) -> Server:
    from conductor_local.agentcore_memory.server import LocalAgentCoreMemoryServer

    return LocalAgentCoreMemoryServer("127.0.0.1", 0).start()


def _lambda(args: Sequence[str]) -> Server:
    from conductor_local.lambda_runtime.server import LocalLambdaServer
    from conductor_local.lambda_runtime.turn_functions import turn_functions
    from conductor_local.sqs.deadline_queue import deadline_functions

    server = LocalLambdaServer(turn_functions() | deadline_functions()).start()
    os.environ["AWS_ENDPOINT_URL_LAMBDA"] = server.url  # a handler that launches a turn calls this service
    return server


SERVICES: dict[str, Callable[[Sequence[str]], Server]] = {
    "dynamodb": _dynamodb,
    "bedrock": _bedrock,
    "memory": _memory,
    "lambda": _lambda,
}


def main(argv: Sequence[str]) -> None:
    """Start the named service, say its URL, serve until stdin closes."""
    server = SERVICES[argv[0]](argv[1:])
    print(server.url, flush=True)
    for line in sys.stdin:  # until stdin closes
        words = line.split()
        allow = getattr(server, "allow_origins", None)
        if words[:1] == [ALLOW_ORIGINS] and allow is not None:
            allow(words[1:])
    server.stop()


if __name__ == "__main__":
    main(sys.argv[1:])
