"""What MCP costs the conductor (``shared.adapters.mcp_client``), on loopback: figures printed,
nothing asserted (about 20 s).

    python benchmarks/mcp_cost.py [--calls N]

* the SDK's cold import, in fresh interpreters (median of 3), with bytecode and without (every
  module compiled from source), beside the client module alone (what a stage without MCP servers
  loads);
* a server's first use: in a fresh process (the SDK's import, TLS settings, the handshake and
  ``tools/list``: what a cold container pays), and in a process that has used a server before (the
  handshake, ``initialize`` and ``notifications/initialized``, with ``tools/list``);
* a trivial tool's call, p50/p99 over N calls: on the session kept open, and on a fresh session each
  time (the handshake paid again).

The server is the SDK's own (streamable HTTP, stateful: ``tests.adapters.mcp.loopback_server``),
run by uvicorn in a process of its own; client and server share the machine's cores.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SERVE = (
    "import sys\n"
    "from tests.adapters.mcp.loopback_server import LoopbackMcpServer\n"
    "server = LoopbackMcpServer().start()\n"
    "print(server.url, flush=True)\n"
    "sys.stdin.read()\n"
    "server.stop()\n"
)
FIRST_USE = (
    "import sys, time\n"
    "from shared.adapters.mcp_client import McpClients, McpServerConfig\n"
    "clients = McpClients([McpServerConfig('bench', sys.argv[1])])\n"
    "started = time.perf_counter()\n"
    "clients.tools('bench')\n"
    "print((time.perf_counter() - started) * 1000)\n"
    "clients.close()\n"
)
SDK_IMPORTS = "import mcp, mcp.client.streamable_http, httpx2, mcp_types"
TIMED_IMPORT = (
    "import time\n{before}\nstarted = time.perf_counter()\n{imports}\nprint((time.perf_counter() - started) * 1000)\n"
)


def import_ms(imports: str, *, before: str = "", bytecode: bool = True) -> float:
    """Milliseconds ``imports`` take in a fresh interpreter, after ``before`` (not timed). Without
    bytecode nothing is read from or written to ``__pycache__``: every module is compiled."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env.pop("PYTHONPYCACHEPREFIX", None)
    with tempfile.TemporaryDirectory(prefix="pycache-") as prefix:
        if not bytecode:
            env |= {"PYTHONDONTWRITEBYTECODE": "1", "PYTHONPYCACHEPREFIX": prefix}
        run = subprocess.run(
            [sys.executable, "-c", TIMED_IMPORT.format(before=before, imports=imports)],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
    return float(run.stdout.strip().splitlines()[-1])


def median_import_ms(imports: str, *, before: str = "", bytecode: bool = True, runs: int = 3) -> float:
    if bytecode:
        import_ms(imports, before=before)  # writes the bytecode the timed runs read
    return statistics.median(import_ms(imports, before=before, bytecode=bytecode) for _ in range(runs))


def percentiles(samples_ms: list[float]) -> str:
    ordered = sorted(samples_ms)
    p99 = ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]
    return f"p50 {statistics.median(ordered):6.2f} ms   p99 {p99:6.2f} ms"


def timed(action: Callable[[], object]) -> float:
    started = time.perf_counter()
    action()
    return (time.perf_counter() - started) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=200, help="calls per figure (default 200)")
    calls = parser.parse_args().calls

    print("Cold imports (fresh interpreters, median of 3):")
    client_ms = median_import_ms("import shared.adapters.mcp_client")
    sdk_ms = median_import_ms(SDK_IMPORTS, before="import shared.adapters.mcp_client")
    sdk_source_ms = median_import_ms(SDK_IMPORTS, before="import shared.adapters.mcp_client", bytecode=False)
    print(f"  shared.adapters.mcp_client alone (no SDK):        {client_ms:7.1f} ms")
    print(f"  + the SDK (mcp, httpx2, mcp_types), bytecode:     {sdk_ms:7.1f} ms")
    print(f"  + the SDK, without bytecode (compiled):           {sdk_source_ms:7.1f} ms")

    from shared.adapters.mcp.config import McpServerConfig
    from shared.adapters.mcp_client import McpClients

    server = subprocess.Popen(
        [sys.executable, "-c", SERVE],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert server.stdout is not None and server.stdin is not None
    config = McpServerConfig("bench", server.stdout.readline().strip())

    def call(clients: McpClients) -> object:
        return clients.call(
            "bench", "echo", {"text": "hi"}, on_progress=lambda *_: None, cancelled=lambda: False, timeout_s=10
        )

    try:
        warmup = McpClients([config])
        call(warmup)  # the SDK imported, the server's first session served
        warmup.close()

        cold = [
            float(
                subprocess.run(
                    [sys.executable, "-c", FIRST_USE, config.url],
                    cwd=ROOT,
                    env={**os.environ, "PYTHONPATH": str(ROOT)},
                    capture_output=True,
                    text=True,
                    check=True,
                ).stdout.split()[-1]
            )
            for _ in range(3)
        ]
        print("\nA server's first use in a fresh process (SDK import + TLS + handshake + tools/list, median of 3):")
        print(f"  {statistics.median(cold):7.1f} ms")

        first_uses: list[float] = []
        for _ in range(20):
            clients = McpClients([config])
            first_uses.append(timed(lambda clients=clients: clients.tools("bench")))
            clients.close()
        print("\nA server's first use in a process that used one before (initialize + initialized + tools/list, 20x):")
        print(f"  {percentiles(first_uses)}")

        clients = McpClients([config])
        call(clients)
        reused = [timed(lambda: call(clients)) for _ in range(calls)]
        clients.close()
        fresh: list[float] = []
        for _ in range(calls):
            clients = McpClients([config])
            fresh.append(timed(lambda clients=clients: call(clients)))
            clients.close()
        print(f"\nA trivial tool's call, {calls} calls (loopback):")
        print(f"  the session kept open:             {percentiles(reused)}")
        print(f"  a fresh session each time:         {percentiles(fresh)}")
        print(f"  so a handshake adds about {statistics.median(fresh) - statistics.median(reused):.1f} ms (p50)")
    finally:
        server.stdin.close()  # the server stops when its input ends
        server.wait(timeout=10)


if __name__ == "__main__":  # pragma: no cover - a manual run
    main()
