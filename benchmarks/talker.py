"""A person talking to the conductor as people do, through the client stub.

Every utterance goes out as the app's recognizer sends it (``RecognizerPace``: a partial per word
``WORD_INTERVAL_S`` apart, at most 4 a second, the final ``FINAL_AFTER_S`` after the last word),
then the person listens and thinks (``pause_after_s``) before the next one. A script may barge in
on an answer (``barge_in_after_s`` after its first partial), start a build in the background (the
catalog's ``build.run``, which the app finishes ``BUILD_S`` later) and wait for the conductor's
report of it. Nothing here measures: ``talk`` returns what each turn looked like to the app.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from shared.wire.protocol import AssistantSpeechFinal, AssistantSpeechPartial, ToolCall
from voiceide_client.conversation.client import ConductorClient
from voiceide_client.conversation.turn import TurnTimeout
from voiceide_client.voice.recognizer import RecognizerPace

WORD_INTERVAL_S = 0.25
FINAL_AFTER_S = 0.8
PACE = RecognizerPace(word_interval_s=WORD_INTERVAL_S, final_after_s=FINAL_AFTER_S)
BUILD_S = 12.0
TURN_TIMEOUT_S = 60.0
REPORT_TIMEOUT_S = 60.0
BUILD = 'call build.run {"scheme": "App"}'
REPORTED = re.compile(r"The build(?:\.run you started in the background| succeeded| failed| did not succeed| didn't)")
"""How the offline brain reports a build's outcome (literally, or as a person would say it)."""


@dataclass(frozen=True)
class Utterance:
    text: str
    pause_after_s: float
    """Listening and thinking after the turn ends, before the next utterance."""
    barge_in_after_s: float | None = None
    """Talk over the answer this long after its first partial."""
    await_report: bool = False
    """After the turn, wait for the report of the build started earlier (before the pause)."""


# One minute or so of a person at work: a question, a tool round, a long answer cut short by a
# barge-in and the request that follows it, a build in the background and a question while it
# runs, its report, and a long answer heard to the end.
SESSION: tuple[Utterance, ...] = (
    Utterance("please open the main file in the editor", 4.0),
    Utterance('call editor.openFile {"path": "Sources/App/main.swift"}', 5.0),
    Utterance("count 40", 1.5, barge_in_after_s=0.8),
    Utterance("sorry show me the failing tests for the parser instead", 4.0),
    Utterance(BUILD, 3.0),
    Utterance("what does the build script do here", 4.0, await_report=True),
    Utterance("ramble 40", 4.0),
)

# The load run's sessions: two or three turns each, one of them a build or a barge-in.
LOAD_SESSIONS: tuple[tuple[Utterance, ...], ...] = (
    (
        Utterance("please open the main file in the editor", 6.0),
        Utterance("what does the build script do here", 4.0),
    ),
    (
        Utterance("count 40", 3.0, barge_in_after_s=0.8),
        Utterance("sorry show me the failing tests for the parser instead", 5.0),
        Utterance("rename this function to load the settings", 3.0),
    ),
    (
        Utterance(BUILD, 5.0),
        Utterance("add a comment above the main loop", 2.0, await_report=True),
    ),
    (
        Utterance('call editor.openFile {"path": "Sources/App/main.swift"}', 6.0),
        Utterance("close every tab except this one", 3.0),
    ),
)


@dataclass
class SpokenTurn:
    text: str
    completed: bool
    answered: bool
    """The app heard an answer (a final) or, for a barge-in, the turn still ended in ``idle``."""
    barged_in: bool
    first_partial_ms: float | None
    """From the final transcript leaving the app to the first ``assistantSpeechPartial``."""
    first_speak_ms: float | None
    """From the final transcript to the first ``tts.speak``."""


async def open_file(arguments: dict[str, Any]) -> dict[str, Any]:
    return {"opened": arguments.get("path"), "lines": 120}


def build_after(seconds: float) -> Any:
    async def build(arguments: dict[str, Any]) -> dict[str, Any]:
        await asyncio.sleep(seconds)
        return {"status": "succeeded", "scheme": arguments.get("scheme"), "warnings": 0}

    return build


def tools(build_s: float = BUILD_S) -> dict[str, Any]:
    """The app's tools the scripts use: the editor answers at once, a build takes ``build_s``."""
    return {"editor.openFile": open_file, "build.run": build_after(build_s)}


def _first(turn: Any, kind: type, name: str | None = None) -> float | None:
    for event, at in zip(turn.events, turn.received_at, strict=False):
        payload = event.payload
        if isinstance(payload, kind) and (name is None or getattr(payload, "name", None) == name):
            return at
    return None


async def _barge_in_when_speaking(client: ConductorClient, after_s: float, timeout: float) -> bool:
    """Once the answer's first partial has arrived (and ``after_s`` more), talk over it."""
    deadline = time.perf_counter() + timeout
    turn = None
    while time.perf_counter() < deadline:
        turn = client.turns[-1] if client.turns else None
        if turn is not None and any(isinstance(e.payload, AssistantSpeechPartial) for e in turn.events):
            break
        await asyncio.sleep(0.02)
    else:
        return False
    await asyncio.sleep(after_s)
    await client.barge_in()
    return True


async def say(client: ConductorClient, utterance: Utterance, *, pace: RecognizerPace = PACE) -> SpokenTurn:
    """One utterance, spoken at ``pace``; the turn as the app saw it (times from the final)."""
    barged = False
    completed = True
    saying = asyncio.create_task(client.say(utterance.text, timeout=TURN_TIMEOUT_S, speaking=pace))
    if utterance.barge_in_after_s is not None:
        barged = await _barge_in_when_speaking(
            client, utterance.barge_in_after_s, TURN_TIMEOUT_S + pace.speaking_s(utterance.text)
        )
    try:
        turn = await saying
    except TurnTimeout as timeout:
        turn, completed = timeout.result, False
    sent = turn.final_sent_at
    partial = _first(turn, AssistantSpeechPartial)
    speak = _first(turn, ToolCall, "tts.speak")
    finals = [e for e in turn.events if isinstance(e.payload, AssistantSpeechFinal)]
    return SpokenTurn(
        text=utterance.text,
        completed=completed and turn.completed,
        answered=completed and turn.completed and (bool(finals) or barged),
        barged_in=barged,
        first_partial_ms=None if sent is None or partial is None else (partial - sent) * 1000,
        first_speak_ms=None if sent is None or speak is None else (speak - sent) * 1000,
    )


async def talk(
    client: ConductorClient, script: Sequence[Utterance], *, pace: RecognizerPace = PACE
) -> tuple[list[SpokenTurn], int]:
    """Speak ``script`` on a connected client; (its turns, the background reports that arrived)."""
    turns: list[SpokenTurn] = []
    reports = 0
    for utterance in script:
        turns.append(await say(client, utterance, pace=pace))
        if utterance.await_report:
            reports += await wait_for_report(client)
        await asyncio.sleep(utterance.pause_after_s)
    return turns, reports


async def wait_for_report(client: ConductorClient, timeout: float = REPORT_TIMEOUT_S) -> int:
    """Wait until the conductor has reported the background build and gone idle again: 1 if it did."""

    def reported(event: Any) -> bool:
        payload = event.payload
        return isinstance(payload, AssistantSpeechFinal) and REPORTED.match(payload.text) is not None

    try:
        report = await client.wait_for(reported, timeout)
        since = client.events.index(report)
        await client.wait_for(
            lambda e: (
                isinstance(e.payload, ToolCall) and e.payload.name == "convo.setState" and "idle" in e.payload.arguments
            ),
            10.0,
            since=since,
        )
    except TimeoutError:
        return 0
    return 1
