"""The frame routes (``shared.flows.frame_routes``): every kind the app sends has a row and only
those do, each row says how ``$default`` treats its frames, and who may send it is a permission
of the roles table."""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest

from shared.core.roles import CALL_DEVICE, PERMISSIONS, Action
from shared.flows.frame_routes import ROUTES, FrameRoute, own_call_acknowledged, route_of
from shared.wire.protocol import (
    KINDS,
    ConfirmChange,
    ErrorCode,
    ErrorPayload,
    SessionStart,
    ToolCancel,
    ToolProgress,
    ToolResult,
    UserAudioTranscriptFinal,
    UserAudioTranscriptPartial,
)

PROTOCOL_DOC = Path(__file__).resolve().parents[2] / "docs" / "protocol.md"
# Extensions documented in their own sections, not in the table "The kinds": who sends them.
SENDERS_OUTSIDE_THE_KINDS_TABLE = {"confirmChange": "app", "devicesChanged": "conductor"}
SESSION = "9c5b94b1-35ad-49bb-b118-8e8fc24abf80"


def documented_senders() -> dict[str, str]:
    """Each kind's "sent by" (app, conductor or both), from the table "The kinds" of protocol.md."""
    text = PROTOCOL_DOC.read_text(encoding="utf-8")
    table = text.split("## The kinds", 1)[1].split("\n\n", 2)[1]
    senders: dict[str, str] = {}
    for line in table.splitlines()[2:]:
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        if match := re.fullmatch(r"`(\w+)`", cells[0]):
            senders[match[1]] = cells[2]
    return senders


def app_sent_kinds() -> set[str]:
    senders = {**documented_senders(), **SENDERS_OUTSIDE_THE_KINDS_TABLE}
    assert set(senders) == set(KINDS), "every kind of KINDS says who sends it (docs/protocol.md, The kinds)"
    return {name for name, sender in senders.items() if sender in ("app", "both")}


def unrouted(routes: Iterable[FrameRoute[Any]], app_kinds: set[str]) -> set[str]:
    """The kinds the app sends that no row takes."""
    routed = {route.kind for route in routes}
    return {name for name in app_kinds if KINDS[name] not in routed}


def routed_but_not_sent(routes: Iterable[FrameRoute[Any]], app_kinds: set[str]) -> set[str]:
    """Rows for kinds the app never sends."""
    sent = {KINDS[name] for name in app_kinds}
    return {route.kind.__name__ for route in routes if route.kind not in sent}


# ---- one row a kind, and only for the kinds the app sends -------------------------------------------


def test_every_kind_the_app_sends_has_a_route() -> None:
    assert unrouted(ROUTES, app_sent_kinds()) == set()


def test_a_route_exists_only_for_a_kind_the_app_sends() -> None:
    assert routed_but_not_sent(ROUTES, app_sent_kinds()) == set()


def test_a_kind_added_without_its_row_is_caught() -> None:
    without_taps = [route for route in ROUTES if route.kind is not ConfirmChange]
    assert unrouted(without_taps, app_sent_kinds()) == {"confirmChange"}
    conductors_own = [*ROUTES, FrameRoute(ToolCancel, lambda _payload, _frame: None)]
    assert routed_but_not_sent(conductors_own, app_sent_kinds()) == {"ToolCancel"}


# ---- which route a frame takes ----------------------------------------------------------------------


def result(call_id: str, **more: Any) -> ToolResult:
    return ToolResult(call_id=call_id, result="{}", **more)


@pytest.mark.parametrize(
    ("payload", "decision"),
    [
        (UserAudioTranscriptFinal(text="hi"), "_transcript"),
        (UserAudioTranscriptPartial(text="h"), "_partial"),
        (ErrorPayload(code=ErrorCode.AUDIO_OUTPUT_INTERRUPTED, heard_text="It is"), "_barge_in"),
        (result("conductor-preview-0123456789abcdef"), "_preview"),
        (result("conductor-preview-0123456789abcdef", part=0, parts=2), "_preview"),
        (result("call-1", part=1, parts=2), "_result_part"),
        (result("call-1"), "_result"),
        (result("conductor-speak-1"), "_result"),
        (ToolProgress(call_id="call-1", fraction=0.5), "_progress"),
        (SessionStart(session_id=SESSION), "_session_start"),
        (ConfirmChange(approve=True), "_tap"),
    ],
)
def test_each_frame_takes_its_route(payload: Any, decision: str) -> None:
    route = route_of(payload)
    assert route is not None and route.decision.__name__ == decision


def test_an_error_other_than_a_barge_in_needs_no_action() -> None:
    assert route_of(ErrorPayload(code="ws_error")) is None
    assert route_of(ToolCancel(call_id="call-1")) is None


def test_an_acknowledgement_of_the_conductors_own_call_is_taken_before_any_route() -> None:
    assert own_call_acknowledged(result("conductor-state-1")) == "conductor-state-1"
    assert own_call_acknowledged(result("conductor-say-1")) == "conductor-say-1"
    assert own_call_acknowledged(result("conductor-speak-1")) is None  # the turn's last speech: recorded
    assert own_call_acknowledged(result("call-1")) is None
    assert own_call_acknowledged(ToolProgress(call_id="conductor-state-1")) is None


# ---- what each row says ------------------------------------------------------------------------------


def flags(payload: Any) -> tuple[bool, bool, bool, bool]:
    route = route_of(payload)
    assert route is not None
    return route.limited, route.is_idempotent(payload), route.reads_history(payload), route.launches_early


@pytest.mark.parametrize(
    ("payload", "expected"),
    [
        # limited, idempotent, loads the history, launched early
        (UserAudioTranscriptFinal(text="hi"), (True, False, True, True)),
        (UserAudioTranscriptPartial(text="h"), (False, True, False, False)),
        (ErrorPayload(code=ErrorCode.AUDIO_OUTPUT_INTERRUPTED), (True, False, False, False)),
        (result("call-1"), (True, False, True, False)),
        (result("conductor-speak-1"), (True, True, False, False)),
        (result("call-1", part=0, parts=2), (True, False, False, False)),
        (result("conductor-speak-1", part=0, parts=2), (True, True, False, False)),
        (result("conductor-preview-0123456789abcdef"), (True, True, False, False)),
        (ToolProgress(call_id="call-1"), (True, True, False, False)),
        (SessionStart(session_id=SESSION), (True, False, False, False)),
        (ConfirmChange(approve=False), (True, False, False, False)),
    ],
)
def test_each_route_says_how_its_frames_are_treated(payload: Any, expected: tuple[bool, ...]) -> None:
    assert flags(payload) == expected


def test_who_may_send_each_kind() -> None:
    sent_by = {route.decision.__name__: route.sent_by for route in ROUTES}
    assert sent_by == {
        "_transcript": Action.SPEAK,
        "_partial": Action.SPEAK,
        "_barge_in": Action.SPEAK,
        "_preview": CALL_DEVICE,
        "_result_part": CALL_DEVICE,
        "_result": CALL_DEVICE,
        "_progress": CALL_DEVICE,
        "_session_start": None,
        "_tap": Action.CONFIRM,
        "_workspace": None,
        "_names": None,
    }


def test_what_a_route_needs_of_a_sender_is_a_permission_of_some_role() -> None:
    granted = set().union(*PERMISSIONS.values())
    needed = {route.sent_by for route in ROUTES if isinstance(route.sent_by, Action)}
    assert needed <= granted
