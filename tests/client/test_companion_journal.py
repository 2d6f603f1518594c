"""The companion's journal of calls: a record answers only the call it is of (its session, its
callId, its tool and its arguments), and the calls an earlier run left unfinished are found for the
session while the conductor still waits for them."""

from __future__ import annotations

import json
import time
from pathlib import Path

from shared.wire.protocol import ToolCall, ToolResult
from voiceide_client.companion.journal import CallJournal, Interrupted

SESSION = "0b5f6f64-8c43-4c0e-9a64-9d0c2f6e2a11"
OTHER = "5d0e2b1c-3f4a-4b6c-8d7e-9f0a1b2c3d4e"


def edit(call_id: str = "tooluse_1", **arguments: object) -> ToolCall:
    arguments = {"path": "a.swift", "startLine": 1, "endLine": 1, "text": "x", **arguments}
    return ToolCall(call_id=call_id, name="editor.replaceText", arguments=json.dumps(arguments))


def test_a_record_answers_its_own_call_and_no_other(tmp_path: Path) -> None:
    journal = CallJournal(tmp_path, SESSION)
    call = edit()
    done = ToolResult(call_id="tooluse_1", result='{"insertedLines":1}')
    journal.finished(call, done)
    assert journal.lookup(call) == done
    reordered = ToolCall(
        call_id="tooluse_1",
        name="editor.replaceText",
        arguments='{"text":"x","endLine":1,"startLine":1,"path":"a.swift"}',
    )
    assert journal.lookup(reordered) == done  # the same arguments, written otherwise
    assert journal.lookup(edit(text="y")) is None  # the id used again with other arguments
    assert journal.lookup(ToolCall(call_id="tooluse_1", name="build.run", arguments="{}")) is None
    assert CallJournal(tmp_path, OTHER).lookup(call) is None  # another session
    assert CallJournal(tmp_path, SESSION.upper()).lookup(call) == done  # the id in any case


def test_a_call_started_and_never_finished_is_found_for_its_session_until_its_deadline(tmp_path: Path) -> None:
    journal = CallJournal(tmp_path, SESSION)
    build = ToolCall(call_id="tooluse_b", name="build.run", arguments="{}")
    journal.started(build, wait_s=630)
    journal.started(edit("tooluse_e"))
    assert isinstance(journal.lookup(build), Interrupted)
    assert journal.lookup(ToolCall(call_id="tooluse_b", name="build.run", arguments='{"x":1}')) is None
    (found,) = journal.unfinished({"build.run", "tests.run"})
    assert found.call.call_id == "tooluse_b" and found.call.name == "build.run"
    assert journal.unfinished({"build.run"}, now=time.time() + 631) == []  # the conductor gave up on it
    assert CallJournal(tmp_path, OTHER).unfinished({"build.run"}) == []
    answer = ToolResult(call_id="tooluse_b", error="not run again")
    journal.answered(found, answer)
    assert journal.unfinished({"build.run"}) == [] and journal.lookup(build) == answer
