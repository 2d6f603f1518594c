"""Cards: every ``assistantUIPatch`` is applied to the client's UI model and each new card is shown
once (a panel on a terminal, plain lines elsewhere); a patch that does not apply is one warning.
States: ``speaking`` and ``executing`` are announced and shown."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from rich.console import Console

from shared.wire.protocol import (
    EXECUTING_STATE,
    SPEAKING_STATE,
    AssistantSpeechFinal,
    AssistantUIPatch,
    ToolResult,
)
from voiceide_client.command_line import cli
from voiceide_client.command_line.arguments import EXIT_OK
from voiceide_client.conversation.client import ConductorClient
from voiceide_client.rendering.live import LiveTranscriptRenderer
from voiceide_client.rendering.transcript import TranscriptRenderer
from voiceide_client.rendering.ui_model import PatchError, UIModel
from voiceide_client.tools.router import ToolRouter

from .fake_conductor import FakeConductor, FakeSession, async_test, speak
from .terminal import Screen

SWIFT = {"type": "code", "title": "Swift code", "language": "swift", "body": "guard let x\nelse { }"}
DIFF = {"type": "diff", "title": "Diff of main.swift", "file": "Sources/main.swift", "body": "-a\n+b"}


def add_card(card: dict[str, object]) -> str:
    return json.dumps([{"op": "add", "path": "/cards/-", "value": card}])


# ---- the UI model ----------------------------------------------------------------------------


def test_the_ui_model_starts_empty_and_gains_the_cards_each_patch_adds() -> None:
    ui = UIModel()
    assert ui.document == {"cards": []}
    assert ui.apply(add_card(SWIFT)) == [SWIFT]
    assert ui.apply(add_card(DIFF)) == [DIFF]
    assert ui.cards == [SWIFT, DIFF] and ui.applied == 2
    # Other operations apply too, and add no card.
    assert ui.apply(json.dumps([{"op": "add", "path": "/title", "value": "Build"}])) == []
    assert ui.document["title"] == "Build"


@pytest.mark.parametrize(
    ("patch", "reason"),
    [
        ("not json", "not JSON"),
        ('{"op": "add"}', "array of operations"),
        ('[{"op": "add", "path": "/cards/-"}]', "value"),
        ('[{"op": "replace", "path": "/missing", "value": 1}]', "missing"),
        ('[{"op": "add", "path": "cards", "value": 1}]', "/"),
        ('[{"op": "frobnicate", "path": "/cards"}]', "frobnicate"),
    ],
)
def test_a_patch_that_does_not_apply_leaves_the_model_as_it_was(patch: str, reason: str) -> None:
    ui = UIModel()
    ui.apply(add_card(SWIFT))
    with pytest.raises(PatchError, match=reason) as raised:
        ui.apply(patch)
    assert "\n" not in str(raised.value)
    assert ui.document == {"cards": [SWIFT]} and ui.rejected == [str(raised.value)]


def test_a_patch_is_applied_whole_or_not_at_all() -> None:
    ui = UIModel()
    patch = json.dumps([{"op": "add", "path": "/cards/-", "value": SWIFT}, {"op": "remove", "path": "/cards/7"}])
    with pytest.raises(PatchError):
        ui.apply(patch)
    assert ui.cards == []


# ---- over the fake conductor -------------------------------------------------------------------


def card_turn(*patches: str, reply: str = "Use this:\n[code: Swift code]"):
    async def turn(session: FakeSession, text: str) -> None:
        await session.call_nowait("convo.setState", {"state": "thinking"})
        for patch in patches:
            await session.send(AssistantUIPatch(patch=patch))
        await speak(session, reply)
        await session.call_nowait("convo.setState", {"state": "idle"})

    return turn


@async_test
async def test_cards_are_applied_to_the_ui_model_and_printed_once_before_the_final() -> None:
    out = io.StringIO()
    async with (
        FakeConductor(card_turn(add_card(SWIFT), add_card(DIFF))) as fake,
        ConductorClient(fake.url, renderer=TranscriptRenderer(out)) as client,
    ):
        turn = await client.say("show me the guard")

    assert turn.completed and client.ui.document == {"cards": [SWIFT, DIFF]}
    lines = out.getvalue().splitlines()
    assert lines[lines.index("[card] Swift code") : lines.index("assistant: Use this:")] == [
        "[card] Swift code",
        "    guard let x",
        "    else { }",
        "[card] Diff of main.swift (Sources/main.swift)",
        "    -a",
        "    +b",
    ]
    assert sum("guard let x" in line for line in lines) == 1


@async_test
async def test_an_invalid_patch_is_one_warning_and_the_turn_goes_on() -> None:
    out, err = io.StringIO(), io.StringIO()
    bad = '[{"op": "remove", "path": "/cards/3"}]'
    async with (
        FakeConductor(card_turn(bad, "{oops", add_card(SWIFT))) as fake,
        ConductorClient(fake.url, renderer=TranscriptRenderer(out, err=err)) as client,
    ):
        turn = await client.say("show me the guard")

    assert turn.completed and turn.errors == [] and client.error_codes == []
    assert client.ui.cards == [SWIFT] and len(client.ui.rejected) == 2
    warnings = [line for line in out.getvalue().splitlines() if line.startswith("[warning]")]
    assert len(warnings) == 2 and all(line.startswith("[warning] UI patch not applied: ") for line in warnings)
    assert "Traceback" not in out.getvalue() + err.getvalue()
    assert "[card] Swift code" in out.getvalue().splitlines()


def test_a_terminal_draws_a_card_as_a_panel_with_its_title_and_body() -> None:
    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=60, color_system=None, markup=False, emoji=False)
    renderer = LiveTranscriptRenderer(console)
    renderer.cards([SWIFT, DIFF])
    lines = [line.rstrip() for line in out.getvalue().splitlines()]
    assert lines[0].startswith("╭─ Swift code ─")
    assert "│ guard let x" in lines[1] and "│ else { }" in lines[2]
    assert any("Diff of main.swift" in line for line in lines)
    assert any("Sources/main.swift" in line for line in lines)  # the file, on the border
    assert "[card]" not in out.getvalue()


# ---- states --------------------------------------------------------------------------------------


def states_turn(session_states: list[str]):
    """Thinking, speaking before a tool, executing it, thinking again, speaking the answer, idle."""

    async def turn(session: FakeSession, text: str) -> None:
        await session.call_nowait("convo.setState", {"state": "thinking"})
        await session.call_nowait("convo.setState", {"state": "speaking"})
        await speak(session, "Let me look.")
        await session.call_nowait("convo.setState", {"state": "executing"})
        opened = await session.call("editor.openFile", {"path": "main.swift"})
        assert opened == ToolResult(call_id=opened.call_id, result='{"opened":"main.swift"}')
        await session.call_nowait("convo.setState", {"state": "thinking"})
        await session.call_nowait("convo.setState", {"state": "speaking"})
        await speak(session, "It is open.")
        await session.call_nowait("convo.setState", {"state": "idle"})
        session_states.extend(session.capabilities)

    return turn


async def _open_file(arguments: dict[str, object]) -> dict[str, object]:
    return {"opened": arguments["path"]}


@async_test
async def test_speaking_and_executing_are_announced_and_shown() -> None:
    out = io.StringIO()
    announced: list[str] = []
    async with (
        FakeConductor(states_turn(announced)) as fake,
        ConductorClient(
            fake.url, tools=ToolRouter(handlers={"editor.openFile": _open_file}), renderer=TranscriptRenderer(out)
        ) as client,
    ):
        turn = await client.say("open main.swift")

    assert SPEAKING_STATE in announced and EXECUTING_STATE in announced
    assert turn.completed
    assert turn.states == ["thinking", "speaking", "executing", "thinking", "speaking", "idle"]
    states = [line for line in out.getvalue().splitlines() if line.startswith("[state]")]
    assert states == [
        "[state] thinking",
        "[state] speaking",
        "[state] executing a tool",
        "[state] thinking",
        "[state] speaking",
        "[state] idle",
    ]
    lines = out.getvalue().splitlines()
    assert lines.index("[state] executing a tool") < lines.index('→ tool editor.openFile {"path": "main.swift"}')


@async_test
async def test_the_cli_shows_cards_and_states_in_its_plain_lines(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "no-bin"))
    script = tmp_path / "script.txt"
    script.write_text("show me the guard\n", encoding="utf-8")

    async def turn(session: FakeSession, text: str) -> None:
        await session.call_nowait("convo.setState", {"state": "thinking"})
        await session.send(AssistantUIPatch(patch=add_card(SWIFT)))
        await session.send(AssistantSpeechFinal(text="Use this:\n[code: Swift code]"))
        await session.call_nowait("convo.setState", {"state": "speaking"})
        await session.call("tts.speak", {"text": "I've put the Swift code on screen."})
        await session.call_nowait("convo.setState", {"state": "idle"})

    out = io.StringIO()
    async with FakeConductor(turn) as fake:
        code = await cli.run(["--url", fake.url, "--script", str(script)], stdout=out, stderr=out)

    assert code == EXIT_OK, out.getvalue()
    assert out.getvalue().splitlines() == [
        "you: show me the guard",
        "[state] thinking",
        "[card] Swift code",
        "    guard let x",
        "    else { }",
        "assistant: Use this:",
        "[code: Swift code]",
        "[state] speaking",
        "🔊 I've put the Swift code on screen.",
        "[state] idle",
    ]


@async_test
async def test_the_live_display_shows_the_states_and_draws_the_cards() -> None:
    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=60, color_system=None, markup=False, emoji=False)
    renderer = LiveTranscriptRenderer(console)
    announced: list[str] = []

    async def turn(session: FakeSession, text: str) -> None:
        await session.send(AssistantUIPatch(patch=add_card(SWIFT)))
        await states_turn(announced)(session, text)

    async with (
        FakeConductor(turn) as fake,
        ConductorClient(
            fake.url, tools=ToolRouter(handlers={"editor.openFile": _open_file}), renderer=renderer
        ) as client,
    ):
        await client.say("open main.swift")
    renderer.close()

    screen = Screen(60)
    screen.feed(out.getvalue())
    lines = [line.rstrip() for line in screen.lines]
    assert lines[1].startswith("╭─ Swift code ─") and "│ guard let x" in lines[2]
    states = [line for line in lines if line.startswith("[state]")]
    assert states[:3] == ["[state] thinking", "[state] speaking", "[state] executing a tool"]
    assert states[-1] == "[state] idle"
