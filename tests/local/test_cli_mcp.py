"""``voiceide-conductor local --mcp``: each value is ``demo``, an http(s) URL or ``name=URL``, the flag
repeats, a bad value is one line and exit code 2, and the servers are printed at start-up."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
from pathlib import Path

import anyio
import pytest
from mcp import Client

from conductor_local import cli
from conductor_local.mcp_demo.servers import ServerSpec, read_specs

REPO = Path(__file__).resolve().parents[2]
START_TIMEOUT_S = 60.0


def test_the_flag_repeats_and_defaults_to_no_server() -> None:
    assert cli.build_parser().parse_args(["local"]).mcp == []
    args = cli.build_parser().parse_args(
        ["local", "--mcp", "demo", "--mcp", "https://mcp.example.com/mcp", "--mcp", "tracker=http://127.0.0.1:9/mcp"]
    )
    assert args.mcp == ["demo", "https://mcp.example.com/mcp", "tracker=http://127.0.0.1:9/mcp"]
    assert read_specs(args.mcp) == (
        ServerSpec("demo", None),
        ServerSpec("mcp1", "https://mcp.example.com/mcp"),
        ServerSpec("tracker", "http://127.0.0.1:9/mcp"),
    )


def test_unnamed_servers_are_numbered_around_the_names_given() -> None:
    specs = read_specs(["http://a.example/mcp", "mcp2=http://b.example/mcp", "http://c.example/mcp?x=1"])
    assert [spec.name for spec in specs] == ["mcp1", "mcp2", "mcp3"]
    assert specs[2].url == "http://c.example/mcp?x=1"


@pytest.mark.parametrize(
    ("value", "said"),
    [
        (
            "ftp://files.example/mcp",
            "'ftp://files.example/mcp' is not an MCP server: use demo, an http(s) URL or name=URL",
        ),
        ("localhost:8000", "'localhost:8000' is not an MCP server"),
        ("Tracker=http://127.0.0.1:9/mcp", "'Tracker' is not an MCP server name: a lower-case letter"),
        ("a-name-that-is-far-too-long=http://x.example", "'a-name-that-is-far-too-long' is not an MCP server name"),
        ("tracker=", "'tracker=' is not an MCP server"),
        (
            "http://127.0.0.1:99999/mcp",
            "'http://127.0.0.1:99999/mcp' is not an MCP server: its URL's port is not one from 1 to 65535",
        ),
        ("", "'' is not an MCP server"),
    ],
)
def test_a_bad_value_is_one_line_and_exit_2(value: str, said: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        cli.main(["local", "--port", "0", "--mcp", value])
    assert exited.value.code == cli.EXIT_USAGE == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"voiceide-conductor local: argument --mcp: {said}"), lines


def test_two_servers_of_one_name_stop_before_anything_starts(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["local", "--port", "0", "--mcp", "demo", "--mcp", "demo=http://127.0.0.1:9/mcp"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.splitlines() == [
        "voiceide-conductor: --mcp: two MCP servers are named 'demo': give one another name (name=URL)"
    ]


def test_the_servers_are_printed_at_start_up_and_the_demo_answers() -> None:
    command = [sys.executable, "-m", "conductor_local", "local", "--port", "0", "--quiet"]
    command += ["--mcp", "demo", "--mcp", "tracker=http://127.0.0.1:9/mcp"]
    with subprocess.Popen(command, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as process:
        timer = threading.Timer(START_TIMEOUT_S, process.kill)
        timer.start()
        try:
            assert process.stdout is not None and process.stderr is not None
            lines: list[str] = []
            while not any(line.startswith("  MCP server tracker:") for line in lines):
                line = process.stdout.readline()
                assert line, f"the stack ended before printing its MCP servers: {process.stderr.read()}"
                lines.append(line.rstrip("\n"))
            demo_line = next(line for line in lines if line.startswith("  MCP server demo: "))
            assert demo_line.endswith("(the demo: issues.search, issues.close, ci.run)")
            url = demo_line.removeprefix("  MCP server demo: ").split()[0]
            assert url.startswith("http://127.0.0.1:") and url.endswith("/mcp")
            assert lines[-1] == "  MCP server tracker: http://127.0.0.1:9/mcp"

            async def listed() -> list[str]:
                async with Client(url, mode="legacy") as client:
                    return [tool.name for tool in (await client.list_tools()).tools]

            assert anyio.run(listed) == ["issues.search", "issues.close", "ci.run"]
            process.send_signal(signal.SIGINT)
            assert process.wait() == 0
            assert "Traceback" not in process.stderr.read()
        finally:
            timer.cancel()
            if process.poll() is None:
                process.kill()
