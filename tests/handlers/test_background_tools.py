"""Background tools: a build does not hold the turn; its result is reported in a turn of its own."""

from __future__ import annotations

import json

import pytest

from conductor_local.bedrock.server import message, tool_call
from lambdas import runtime
from shared.adapters.gateway import callback_endpoint
from shared.core.background_report import REPORT_MARKER
from shared.flows import conductor_service as service_module
from tests.handlers.conftest import STAGE, Connection, Harness

IDLE = ("toolCall", "convo.setState", {"state": "idle"})


def started_build(conductor: Harness) -> tuple[Connection, str]:
    conn = conductor.connect()
    conductor.start_session(conn)
    conductor.script.push(
        message("Starting the build.", tool_call("build.run", {"scheme": "App"})),
        message("The build is running; I will tell you when it is done."),
    )
    conductor.say(conn, "build the app")
    conductor.finish_turn(conn)
    calls = [e.payload for e in conductor.events(conn) if e.kind_name == "toolCall"]
    (call,) = [call for call in calls if call.name == "build.run"]
    return conn, call.call_id


def request_texts(conductor: Harness, index: int = -1) -> list[str]:
    last = conductor.script.requests[index].body["messages"][-1]
    return [block["text"] for block in last["content"] if "text" in block]


def test_the_model_hears_at_once_that_the_build_started_and_the_turn_ends_idle(conductor: Harness) -> None:
    conn, call_id = started_build(conductor)
    second = conductor.script.requests[-1]
    (started,) = [b["toolResult"] for b in second.body["messages"][-1]["content"] if "toolResult" in b]
    assert json.loads(started["content"][0]["text"])["started"] is True
    summary = conductor.summary(conn)
    assert ("final", "The build is running; I will tell you when it is done.") in summary
    assert summary[-1] == IDLE
    state = runtime.store().load(conn.session_id)
    assert state is not None and state.turn is None
    assert [job.name for job in state.background] == ["build.run"] and state.background[0].call_id == call_id


def test_another_question_is_answered_while_it_runs_and_the_result_is_reported_once(conductor: Harness) -> None:
    conn, call_id = started_build(conductor)
    conductor.script.push(message("It is Tuesday."))
    conductor.say(conn, "what day is it")
    conductor.finish_turn(conn)
    assert ("final", "It is Tuesday.") in conductor.summary(conn)
    conductor.script.push(message("The build succeeded, with no warnings."))
    requests_before = len(conductor.script.requests)
    conductor.answer(conn, call_id, '{"status":"succeeded","warnings":0}')
    assert len(conductor.script.requests) == requests_before + 1  # one report turn
    (report,) = request_texts(conductor)
    assert report.startswith(REPORT_MARKER) and '{"status":"succeeded","warnings":0}' in report
    assert ("final", "The build succeeded, with no warnings.") in conductor.summary(conn)
    state = runtime.store().load(conn.session_id)
    assert state is not None and state.background == [] and state.background_reports == []
    conductor.answer(conn, call_id, '{"status":"succeeded"}')  # the same result again
    assert conductor.summary(conn)[-1] == ("error", "no_pending_tool_call")
    assert len(conductor.script.requests) == requests_before + 1


def test_a_result_during_a_turn_waits_for_it_to_end(conductor: Harness) -> None:
    conn, call_id = started_build(conductor)
    conductor.script.push(message("Here is the plan."))
    conductor.say(conn, "what is the plan")  # its tts.speak is not answered yet: the turn runs
    requests_before = len(conductor.script.requests)
    conductor.answer(conn, call_id, '{"status":"failed","errors":["main.swift:3: missing return"]}', error=None)
    assert len(conductor.script.requests) == requests_before  # waits for idle
    state = runtime.store().load(conn.session_id)
    assert state is not None and [report.name for report in state.background_reports] == ["build.run"]
    conductor.script.push(message("The build failed: a missing return in main.swift."))
    conductor.finish_turn(conn)
    assert len(conductor.script.requests) == requests_before + 1
    assert request_texts(conductor)[0].startswith(REPORT_MARKER)


def test_a_failed_build_is_also_a_card_and_a_deadline_that_passes_is_reported(
    conductor: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    conn, call_id = started_build(conductor)
    conductor.script.push(message("The build failed."))
    conductor.answer(conn, call_id, None, error="xcodebuild exited with 65")
    (patch,) = [json.loads(e.payload.patch) for e in conductor.events(conn) if e.kind_name == "assistantUIPatch"]
    assert patch[0]["value"]["title"] == "build.run failed" and "exited with 65" in patch[0]["value"]["body"]
    conductor.finish_turn(conn)

    conductor.script.push(message("Starting the tests.", tool_call("tests.run", {})), message("Tests are running."))
    conductor.say(conn, "run the tests")
    conductor.finish_turn(conn)
    state = runtime.store().load(conn.session_id)
    assert state is not None
    (job,) = state.background
    conductor.script.push(message("The tests never reported back."))
    monkeypatch.setattr(service_module.time, "time", lambda: job.deadline + 1)
    runtime.service().expire_tool_calls(conn.session_id, callback_endpoint(conductor.management.domain, STAGE))
    assert conductor.lambdas.wait_idle(30), "the report turn's runner is still running"
    (report,) = request_texts(conductor)
    assert "tests.run" in report and "no result came from the app within 900 s" in report


def test_a_job_survives_a_reconnect_and_its_result_on_the_new_connection_is_reported(conductor: Harness) -> None:
    conn, call_id = started_build(conductor)
    again = conductor.connect(conn.session_id)
    conductor.start_session(again)
    assert not [e for e in conductor.events(again) if e.kind_name == "toolCall" and e.payload.name == "build.run"]
    conductor.script.push(message("Built."))
    conductor.answer(again, call_id, '{"status":"succeeded"}')
    assert ("final", "Built.") in conductor.summary(again)
