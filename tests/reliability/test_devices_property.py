"""Several devices on one session, any interleaving: joins, leaves, barge-ins, tool results.

Hypothesis drives the real handlers (the harness: moto, the local Bedrock endpoint, recorded
posts) through a phone (voice, display: the session's own device, always there), a companion
that runs ``editor.readFile`` (tools) and a display, which join and leave in any order while the
phone asks for reads, talks and barges in, and the companion answers the calls it was sent.
Whatever happened:

* every numbered event a device should hear reaches each device present at the end, live or by
  the replay its ``sessionStart(lastSeq)`` brings;
* each of the model's calls is answered exactly once (the history Bedrock gets has one result per
  use, which the harness also checks after every test);
* no ``tts.speak`` ever reaches a device that did not speak, and no call reaches the display.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from conductor_local.bedrock.server import message, tool_call
from lambdas import runtime
from tests.handlers.conftest import Connection, Harness
from tests.reliability.support import answers_tools, last_user_text

PHONE = {"id": "phone", "name": "Phone", "roles": ["voice", "display"]}
COMPANION = {"id": "desk", "name": "Desk", "roles": ["tools"]}
DISPLAY = {"id": "screen", "name": "Screen", "roles": ["display"]}
READ_TOOL = {"name": "editor.readFile", "description": "Read a file", "arguments": {"type": "object"}}


def rule_for(request: dict[str, Any]) -> Any:
    if answers_tools(request):
        return message("Read it.")
    text = last_user_text(request)
    if text.startswith("read"):
        return message(tool_call("editor.readFile", {"path": text.split()[-1]}))
    return message("Fine.")


class Devices(RuleBasedStateMachine):
    harness: Harness

    def __init__(self) -> None:
        super().__init__()
        self.h = Devices.harness
        self.phone = self.h.connect()
        self.session_id = self.phone.session_id
        self.h.send(self.phone, "sessionStart", {"sessionId": self.session_id, "device": PHONE})
        self.present: dict[str, Connection] = {}
        self.connections: dict[str, list[Connection]] = {"desk": [], "screen": []}
        self.answered: set[str] = set()
        self.joined_at: dict[str, int] = {}
        self.asked = 0

    # ---- what happens ------------------------------------------------------------------------

    def _join(self, name: str, device: dict[str, Any], tools: list[dict[str, Any]] | None) -> None:
        conn = self.h.connect(self.session_id)
        known = self._last_known(name)
        start: dict[str, Any] = {"sessionId": self.session_id, "device": device}
        if known is not None:  # back: from the last seq it knows of (an event, or its sessionReady)
            start["lastSeq"] = known
        if tools is not None:
            start["tools"] = tools
        self.connections[name].append(conn)
        self.present[name] = conn
        self.h.send(conn, "sessionStart", start)
        if name not in self.joined_at:  # it hears what is made from its first join on
            state = runtime.store().load(self.session_id)
            assert state is not None
            self.joined_at[name] = state.next_seq

    @precondition(lambda self: "desk" not in self.present)
    @rule()
    def companion_joins(self) -> None:
        self._join("desk", COMPANION, [READ_TOOL])

    @precondition(lambda self: "screen" not in self.present)
    @rule()
    def display_joins(self) -> None:
        self._join("screen", DISPLAY, None)

    @rule(name=st.sampled_from(["desk", "screen"]))
    def a_device_leaves(self, name: str) -> None:
        conn = self.present.pop(name, None)
        if conn is not None:
            self.h.disconnect(conn)

    @rule()
    def phone_asks_for_a_read(self) -> None:
        self.asked += 1
        self.h.say(self.phone, f"read f{self.asked}")

    @rule()
    def phone_talks(self) -> None:
        self.h.say(self.phone, "hello")

    @rule()
    def phone_barges_in(self) -> None:
        self.h.barge_in(self.phone)

    @precondition(lambda self: "desk" in self.present)
    @rule()
    def companion_answers(self) -> None:
        conn = self.present["desk"]
        for call_id in self._calls("desk"):
            if call_id not in self.answered:
                self.answered.add(call_id)
                self.h.answer(conn, call_id, '{"text":"x"}')

    # ---- what must hold ----------------------------------------------------------------------

    def _events(self, name: str) -> list[Any]:
        return [event for conn in self.connections[name] for event in self.h.events(conn)]

    def _seqs(self, name: str) -> set[int]:
        return {event.seq for event in self._events(name) if event.seq is not None}

    def _last_known(self, name: str) -> int | None:
        ready = [
            event.payload.last_seq
            for conn in self.connections[name]
            for event in self.h.all_events(conn)
            if event.kind_name == "sessionReady"
        ]
        known = [*self._seqs(name), *ready]
        return max(known) if known else None

    def _calls(self, name: str) -> list[str]:
        return [
            event.payload.call_id
            for event in self._events(name)
            if event.kind_name == "toolCall" and event.payload.name == "editor.readFile"
        ]

    @invariant()
    def only_the_phone_speaks_and_only_the_companion_runs_tools(self) -> None:
        for name in ("desk", "screen"):
            calls = [e.payload.name for e in self._events(name) if e.kind_name == "toolCall"]
            assert "tts.speak" not in calls, f"{name} was asked to speak"
            if name == "screen":
                assert "editor.readFile" not in calls, "a display was asked to run a tool"
        assert not [
            e for e in self.h.events(self.phone) if e.kind_name == "toolCall" and e.payload.name == "editor.readFile"
        ]

    def teardown(self) -> None:
        # Every device present catches up from what it saw: then it has every event meant for it
        # from its first join on.
        store = runtime.store()
        for name, conn in list(self.present.items()):
            device = {"desk": COMPANION, "screen": DISPLAY}[name]
            known = self._last_known(name)
            start: dict[str, Any] = {"sessionId": self.session_id, "device": device}
            start["lastSeq"] = known if known is not None else self.joined_at[name] - 1
            self.h.send(conn, "sessionStart", start)
            first = self.joined_at[name]
            meant = {seq for seq, _ in store.outbox_for(self.session_id, device["id"], after_seq=first - 1)}
            assert meant <= self._seqs(name), f"{name} missed {sorted(meant - self._seqs(name))}"
        # A call is answered once: the companion never answered one it was not sent, nor twice.
        assert set(self.answered) <= set(self._calls("desk"))


def test_any_interleaving_of_devices_keeps_every_event_and_answers_every_call_once(
    conductor: Harness, route: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The machine sends far faster than a person: the session's fair share a second is out of the way.
    monkeypatch.setenv("CONDUCTOR_MAX_EVENTS_PER_SECOND", "100000")
    runtime.reset()
    route(rule_for)
    Devices.harness = conductor
    Devices.TestCase.settings = settings(
        max_examples=12,
        stateful_step_count=12,
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
    Devices.TestCase().runTest()
