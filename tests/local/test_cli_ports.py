"""``voiceide-conductor local``: a bad host or port is one line and exit code 2, a port in use one
line and exit code 1; never a traceback."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest

from conductor_local import cli

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["--port", "99999"], "argument --port: 99999 is not a port: a number from 1 to 65535, or 0 for any free one"),
        (["--port", "-1"], "argument --port: -1 is not a port"),
        (["--port", "http"], "argument --port: 'http' is not a port: a number from 1 to 65535"),
        (["--host", ""], "argument --host: '' is not a host"),
        (
            ["--host", "999.1.1.1"],
            "argument --host: '999.1.1.1' is not an address or a host name this machine resolves",
        ),
        (["--auth", "kerberos"], "argument --auth: invalid choice: 'kerberos'"),
    ],
)
def test_a_bad_host_or_port_is_one_line_and_exit_2(
    argv: list[str], said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        cli.main(["local", *argv])
    assert exited.value.code == cli.EXIT_USAGE == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"voiceide-conductor local: {said}"), lines
    assert lines[0].endswith("(see voiceide-conductor local --help)")


def test_a_port_in_use_is_one_line() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = subprocess.run(
            [sys.executable, "-m", "conductor_local", "local", "--port", str(port), "--quiet"],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    assert result.returncode == cli.EXIT_CANNOT_START == 1
    assert result.stdout == "" and "Traceback" not in result.stderr
    assert result.stderr.splitlines() == [
        f"voiceide-conductor: port {port} on 127.0.0.1 is in use (another `make run`?): stop it, or pick another "
        "port with --port (0: any free one)"
    ]


def test_port_0_and_a_resolvable_host_are_taken() -> None:
    args = cli.build_parser().parse_args(["local", "--port", "0", "--host", "localhost"])
    assert (args.port, args.host) == (0, "localhost")
    assert cli.build_parser().parse_args(["local"]).port == 8080
