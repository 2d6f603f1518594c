"""``voiceide-client`` is a device of its session: a kept id, a name, roles (``--roles``, ``--name``)."""

from __future__ import annotations

import asyncio
import contextlib
import io
import uuid
from pathlib import Path

import pytest

from shared.wire.protocol import Device
from voiceide_client.command_line import cli
from voiceide_client.command_line.arguments import EXIT_OK, EXIT_USAGE
from voiceide_client.command_line.device import ID_FILE, device_id, device_name, parse_roles

from .fake_conductor import FakeConductor, async_test, standard_turn


@pytest.fixture(autouse=True)
def no_espeak(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "no-bin"))


async def _device_of_a_run(argv: list[str]) -> Device | None:
    """The ``device`` of the sessionStart of one run of the client saying one line."""
    async with FakeConductor(standard_turn("Hi.")) as fake:
        code = await cli.run(["--url", fake.url, *argv], stdin=io.StringIO("hello\n"), stdout=io.StringIO())
        assert code == EXIT_OK
        (connection,) = fake.connections
        start = connection.session_start
        assert start is not None
        return start.device


@async_test
async def test_the_client_is_a_device_with_an_id_it_keeps_a_name_and_every_role(config_home: Path) -> None:
    first = await _device_of_a_run([])
    again = await _device_of_a_run(["--session", str(uuid.uuid4())])

    assert first is not None and again is not None
    assert first.id.startswith("term-") and again.id == first.id  # the same device across launches
    assert (config_home / ID_FILE).read_text(encoding="ascii").strip() == first.id
    assert first.name == device_name() and first.name.startswith("Terminal — ")
    assert first.roles == ("voice", "display", "tools")  # alone, it runs the model's tools, as always


@async_test
async def test_roles_and_name_are_the_options(config_home: Path) -> None:
    device = await _device_of_a_run(["--roles", "display, voice", "--name", "Ana's terminal"])
    assert device is not None
    assert device.roles == ("voice", "display") and device.name == "Ana's terminal"


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["--roles", "voice,speaker"], "argument --roles: 'speaker' is not a role: use voice, display, tools"),
        (["--roles", "voice,voice"], "argument --roles: each role at most once"),
        (["--roles", ","], "argument --roles: give one or more of voice, display, tools"),
        (["--name", "x" * 65], "argument --name: at most 64 characters (this one has 65)"),
        (["--name", "bad\x1b[2Jname"], "argument --name: no control characters"),
        (["--roles", "voice,display", "--declare-tools"], "--declare-tools needs the tools role"),
    ],
)
def test_a_bad_role_or_name_is_one_line_and_exit_2(argv: list[str], said: str) -> None:
    err = io.StringIO()

    async def run() -> int:
        try:
            return await cli.run(["--url", "ws://127.0.0.1:9/", *argv], stdin=io.StringIO(), stderr=err)
        except SystemExit as exited:
            return int(exited.code or 0)

    with contextlib.redirect_stderr(err):
        code = asyncio.run(run())
    assert code == EXIT_USAGE
    lines = err.getvalue().splitlines()
    assert len(lines) == 1 and lines[0].startswith("voiceide-client: ") and said in lines[0], lines


def test_the_id_is_made_once_and_read_back(tmp_path: Path) -> None:
    path = tmp_path / "voiceide" / "device-id"
    made = device_id(path)
    assert device_id(path) == made and path.read_text(encoding="ascii") == made + "\n"
    path.write_text("not an id!\n", encoding="ascii")  # damaged: a new one replaces it
    assert device_id(path) != made


def test_without_a_writable_config_folder_the_id_still_stays_the_same(tmp_path: Path) -> None:
    blocked = tmp_path / "a-file"
    blocked.write_text("", encoding="ascii")  # the config "folder" is a file: nothing can be kept there
    first, again = device_id(blocked / "voiceide" / "device-id"), device_id(blocked / "voiceide" / "device-id")
    assert first == again and first.startswith("term-")
    assert Device(id=first, roles=("voice",)).id == first  # a valid device id


def test_roles_are_put_in_the_protocols_order() -> None:
    assert parse_roles("tools,voice") == ("voice", "tools")
