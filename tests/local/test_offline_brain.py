"""The offline brain, served by the local Bedrock endpoint and read by the real boto3 client."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest

from conductor_local.bedrock.offline_brain import (
    CALL_PREAMBLE,
    CHARS_PER_TOKEN,
    CUT_SHORT_TEXT,
    FAIL_MESSAGE,
    FAIL_WORDS,
    MAX_RAMBLE,
    MAX_SLOW_SECONDS,
    RAMBLE_CHARS,
    SLOW_MAX_GAP,
    SLOW_TEXT,
    STOP_TEXT,
    ModelPace,
    OfflineBrain,
    paced,
    parse_calls,
)
from conductor_local.bedrock.server import LocalBedrockServer, Pause, Responder, estimate_input_tokens
from shared.core.background_report import report_text
from shared.core.state import BackgroundReport

from .conftest import Converse, Reply, make_client, read_stream


@pytest.fixture
def responder() -> Responder:
    return OfflineBrain()


def _user(*content: dict[str, Any]) -> dict[str, Any]:
    return {"role": "user", "content": list(content)}


def _assistant_uses(*uses: tuple[str, str, dict[str, Any]]) -> dict[str, Any]:
    """An assistant message as the conductor stores it: one toolUse per ``(id, name, input)``."""
    return {
        "role": "assistant",
        "content": [{"toolUse": {"toolUseId": i, "name": name, "input": data}} for i, name, data in uses],
    }


def _result(tool_use_id: str, *content: dict[str, Any], status: str | None = None) -> dict[str, Any]:
    result: dict[str, Any] = {"toolUseId": tool_use_id, "content": list(content)}
    if status:
        result["status"] = status
    return {"toolResult": result}


def _assert_complete(reply: Reply, stop_reason: str) -> None:
    assert reply.error is None
    assert reply.kinds[0] == "messageStart"
    assert reply.kinds[-2:] == ["messageStop", "metadata"]
    assert reply.stop_reason == stop_reason
    usage = reply.of("metadata")[0]["usage"]
    assert usage["inputTokens"] > 0
    assert usage["outputTokens"] > 0
    assert usage["totalTokens"] == usage["inputTokens"] + usage["outputTokens"]


# ---- plain speech -------------------------------------------------------------------------


def test_anything_else_is_echoed_word_by_word(converse: Converse) -> None:
    reply = converse("open the settings please")

    _assert_complete(reply, "end_turn")
    assert reply.text_deltas == ["You", " said:", " open", " the", " settings", " please"]
    assert reply.tool_uses == []


def test_the_transcript_is_the_last_text_block_of_the_last_user_message(converse: Converse) -> None:
    messages = [
        _user({"text": "first"}),
        {"role": "assistant", "content": [{"text": "You said: first"}]},
        _user({"text": "ignored"}, {"text": "second"}),
    ]

    assert converse(messages=messages).text == "You said: second"


# ---- call directives ----------------------------------------------------------------------


def test_call_emits_one_wrapper_use_split_across_deltas(converse: Converse) -> None:
    reply = converse('call editor.open {"path": "src/main.py", "line": 3}')

    _assert_complete(reply, "tool_use")
    (use,) = reply.tool_uses
    assert use["name"] == "tool_call"
    assert use["input"] == {"name": "editor.open", "arguments": {"path": "src/main.py", "line": 3}}
    assert len(use["deltas"]) > 1
    assert use["toolUseId"].startswith("tooluse_")
    assert reply.text == ""


def test_calls_joined_by_semicolons_share_one_message(converse: Converse) -> None:
    reply = converse('call editor.open {"path": "a.py"} ; call terminal.run {"cmd": "ls ; pwd"} ; call editor.save')

    _assert_complete(reply, "tool_use")
    assert [u["index"] for u in reply.tool_uses] == [0, 1, 2]
    assert [u["input"] for u in reply.tool_uses] == [
        {"name": "editor.open", "arguments": {"path": "a.py"}},
        {"name": "terminal.run", "arguments": {"cmd": "ls ; pwd"}},
        {"name": "editor.save", "arguments": {}},
    ]
    assert len({u["toolUseId"] for u in reply.tool_uses}) == 3
    assert len(reply.of("messageStart")) == 1


def test_malformed_arguments_are_still_emitted_as_raw_text(converse: Converse) -> None:
    reply = converse('call editor.open {"path": ; call editor.save {}')

    assert [u["input"] for u in reply.tool_uses] == [
        {"name": "editor.open", "arguments": '{"path":'},
        {"name": "editor.save", "arguments": {}},
    ]


def test_directives_ignore_case_and_a_final_full_stop(converse: Converse) -> None:
    (use,) = converse('Call editor.open {"path": "a.py"}.').tool_uses

    assert use["input"] == {"name": "editor.open", "arguments": {"path": "a.py"}}


def test_tool_use_ids_are_deterministic_and_unique_per_conversation(converse: Converse) -> None:
    first = converse("call editor.save").tool_uses[0]["toolUseId"]
    again = converse("call editor.save").tool_uses[0]["toolUseId"]
    later = converse(
        messages=[
            _user({"text": "call editor.save"}),
            _assistant_uses((first, "tool_call", {"name": "editor.save", "arguments": {}})),
            _user(_result(first, {"text": "saved"}), {"text": "call editor.save"}),
        ]
    ).tool_uses[0]["toolUseId"]

    assert first == again
    assert later != first


@pytest.mark.parametrize(
    ("transcript", "calls"),
    [
        ("hello", None),
        ("recall editor.open {}", None),
        ("call x", [("x", {})]),
        ("call x [1, 2]", [("x", [1, 2])]),
        ("call x {} trailing words", [("x", "{} trailing words")]),
        ('call x {"a": "b ; call y"} ; call z {"c": 1}', [("x", {"a": "b ; call y"}), ("z", {"c": 1})]),
    ],
)
def test_parse_calls(transcript: str, calls: list[tuple[str, Any]] | None) -> None:
    assert parse_calls(transcript) == calls


# ---- count and fail -----------------------------------------------------------------------


def test_count_streams_numbers_50_ms_apart(converse: Converse) -> None:
    reply = converse("count 4")

    _assert_complete(reply, "end_turn")
    assert reply.text_deltas == ["1", " 2", " 3", " 4"]
    assert reply.delta_offsets[-1] >= 0.2


def test_count_is_capped() -> None:
    with LocalBedrockServer(OfflineBrain(count_pause=0)) as server:
        client = make_client(server.url)
        messages = [_user({"text": "count 5000"})]
        reply = read_stream(client.converse_stream(modelId="m", messages=messages)["stream"])

    assert len(reply.text_deltas) == 1000
    assert reply.text_deltas[-1] == " 1000"


def test_fail_breaks_the_stream_after_a_few_words(converse: Converse) -> None:
    reply = converse("Fail.")

    assert reply.text == FAIL_WORDS
    assert len(reply.text_deltas) > 1
    assert "messageStop" not in reply.kinds
    assert reply.error is not None
    assert reply.error.response["Error"] == {"Code": "modelStreamErrorException", "Message": FAIL_MESSAGE}


# ---- tool results -------------------------------------------------------------------------


def test_tool_results_are_said_as_a_person_would_in_order(converse: Converse) -> None:
    messages = [
        _user({"text": "open, read and build"}),
        _assistant_uses(
            ("tu_open", "tool_call", {"name": "editor.openFile", "arguments": {"path": "README.md"}}),
            ("tu_read", "tool_call", {"name": "fs.read", "arguments": {"path": "b.py"}}),
            ("tu_build", "tool_call", {"name": "build.run", "arguments": {}}),
            ("tu_save", "tool_call", {"name": "editor.save", "arguments": {}}),
        ),
        _user(
            _result("tu_open", {"json": {"opened": True, "lines": 120}}),
            _result("tu_read", {"json": {"reason": "missing"}}, status="error"),
            _result("tu_build", {"text": '{"status": "succeeded", "warnings": 0}'}),
            _result("tu_save"),
        ),
    ]

    reply = converse(messages=messages)

    _assert_complete(reply, "end_turn")
    assert reply.text == (
        "I opened README.md; it has 120 lines. Fs read didn't work: missing. "
        "The build succeeded with no warnings. Editor save is done."
    )
    assert "{" not in reply.text  # no raw JSON read aloud


def test_tool_results_are_read_back_word_for_word_on_request(
    converse: Converse, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CONDUCTOR_LOCAL_READBACK", "literal")
    messages = [
        _user({"text": "open and read"}),
        _assistant_uses(
            ("tu_open", "tool_call", {"name": "editor.open", "arguments": {"path": "a.py"}}),
            ("tu_read", "tool_call", {"name": "fs.read", "arguments": {"path": "b.py"}}),
            ("tu_weather", "get_weather", {"city": "Paris"}),
        ),
        _user(
            _result("tu_read", {"json": {"reason": "missing"}}, status="error"),
            _result("tu_open", {"text": "opened "}, {"text": "a.py"}),
            _result("tu_weather", {"json": {"sky": "clear"}}, status="success"),
        ),
    ]

    reply = converse(messages=messages)

    _assert_complete(reply, "end_turn")
    assert reply.text == (
        'fs.read failed: {"reason": "missing"}. editor.open returned opened a.py. get_weather returned {"sky": "clear"}'
    )
    assert len(reply.text_deltas) > 1


def test_an_empty_result_reads_as_empty(converse: Converse, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CONDUCTOR_LOCAL_READBACK", "literal")
    messages = [
        _user({"text": "save"}),
        _assistant_uses(("tu_1", "tool_call", {"name": "editor.save", "arguments": {}})),
        _user(_result("tu_1")),
    ]

    assert converse(messages=messages).text == "editor.save returned (empty)"


def test_a_new_utterance_after_the_results_is_answered_instead(converse: Converse) -> None:
    messages = [
        _user({"text": "call editor.open"}),
        _assistant_uses(("tu_1", "tool_call", {"name": "editor.open", "arguments": {}})),
        _user(_result("tu_1", {"text": "cancelled"}, status="error"), {"text": "count 2"}),
    ]

    reply = converse(messages=messages)

    assert reply.text_deltas == ["1", " 2"]
    assert "cancelled" not in reply.text


def test_the_same_request_gets_the_same_reply(converse: Converse) -> None:
    first, second = converse("call a {} ; call b {}"), converse("call a {} ; call b {}")

    assert json.dumps(first.events) == json.dumps(second.events)


# ---- builds, tests and how running calls go, said as a person would -----------------------

COMPANION_OUTPUT = "\n".join(f"[{i}/20] Compiling unit{i}.py" for i in range(1, 21)) + "\n" + "x" * 300
COMPANION_FAILURE = (
    "`make` failed with exit code 2 after 3.2 s\nproblems:\n"
    "src/unit5.py:3:5: error: missing return in a function expected to return 'Int'\n"
    "src/unit7.py:9:1: error: unknown name 'y'\nlast output:\n" + COMPANION_OUTPUT
)


@pytest.fixture
def natural(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CONDUCTOR_LOCAL_READBACK", raising=False)


def _said_after(name: str, result: dict[str, Any], arguments: dict[str, Any] | None = None) -> str:
    """What the offline brain says when the app answered one call of ``name`` with ``result``."""
    messages = [
        _user({"text": f"call {name}"}),
        _assistant_uses(("tu_1", "tool_call", {"name": name, "arguments": arguments or {}})),
        _user(result),
    ]
    return "".join(_deltas(OfflineBrain().reply({"messages": messages})))


def _status(*running: dict[str, Any]) -> dict[str, Any]:
    """conductor.status's answer, as shared.core.progress.status makes it."""
    body = {"running": list(running)} if running else {"running": [], "note": "no call of the app is running"}
    return _result("tu_1", {"text": json.dumps(body, ensure_ascii=False)})


@pytest.mark.usefixtures("natural")
@pytest.mark.parametrize(
    ("running", "said"),
    [
        (
            [{"name": "build.run", "runningFor": "12 s", "progress": "25 %", "message": "[5/20] Compiling unit5.py"}],
            "The build is 25 % done: compiling unit5.py.",
        ),
        (  # the companion's message: its elapsed time, then the step; the step gives the percentage
            [{"name": "build.run", "runningFor": "15 s", "message": "15 s: [5/20] Compiling unit5.py"}],
            "The build is 25 % done: compiling unit5.py.",
        ),
        (
            [{"name": "build.run", "runningFor": "12 s", "progress": "the app has not said"}],
            "The build has been running for 12 seconds; the app hasn't said how far it got.",
        ),
        (
            [
                {"name": "tests.run", "runningFor": "130 s", "message": "Running ParserTests"},
                {"name": "lint.check", "runningFor": "1 s", "progress": "60 %"},
            ],
            "The tests have been running for 2 minutes: running ParserTests. Lint check is 60 % done.",
        ),
        ([], "Nothing is running right now."),
    ],
)
def test_how_the_build_goes_is_said_from_the_status(running: list[dict[str, Any]], said: str) -> None:
    entries = [{"callId": f"c{i}", "kind": "background", **entry} for i, entry in enumerate(running)]
    messages = [
        _user({"text": "How's the build going?"}),
        _assistant_uses(("tu_1", "tool_call", {"name": "conductor.status", "arguments": {}})),
        _user(_status(*entries)),
    ]

    assert "".join(_deltas(OfflineBrain().reply({"messages": messages}))) == said


@pytest.mark.usefixtures("natural")
@pytest.mark.parametrize(
    ("name", "result", "said"),
    [
        (  # the companion's outcome: the output is never read
            "build.run",
            {
                "status": "succeeded",
                "command": "make",
                "exitCode": 0,
                "seconds": 12.3,
                "problems": [],
                "outputLines": 21,
                "output": COMPANION_OUTPUT,
            },
            "The build succeeded.",
        ),
        (
            "build.run",
            {
                "status": "failed",
                "command": "make",
                "exitCode": 2,
                "problems": ["src/a.py:1: error: bad"],
                "output": COMPANION_OUTPUT,
            },
            "The build failed: src/a.py:1: error: bad.",
        ),
        ("build.run", {"status": "timedOut", "output": COMPANION_OUTPUT}, "The build ran out of time."),
        (  # the console's demo build
            "build.run",
            {"status": "succeeded", "warnings": ["Parser.swift:3: 'parse' could return an empty array"], "seconds": 8},
            "The build succeeded with 1 warning.",
        ),
        (  # the console's demo tests
            "tests.run",
            {"passed": 1, "failed": 1, "failures": [{"test": "ParserTests.testEmptyInput", "message": "x" * 300}]},
            "1 of 2 tests failed: ParserTests.testEmptyInput.",
        ),
        ("tests.run", {"passed": 42, "failed": 0, "seconds": 3, "simulated": True}, "All 42 tests passed."),
        ("tests.run", {"status": "succeeded", "output": COMPANION_OUTPUT}, "The tests passed."),
        (  # what the model hears when a background tool starts
            "build.run",
            {"started": True, "background": True, "note": "build.run runs in the background; …"},
            "The build is running; I'll tell you when it's done.",
        ),
        ("conductor.cancel", {"cancelled": True, "callId": "c1", "name": "build.run"}, "I cancelled the build."),
    ],
)
def test_build_and_test_results_are_said_in_a_sentence(name: str, result: dict[str, Any], said: str) -> None:
    assert _said_after(name, _result("tu_1", {"text": json.dumps(result)})) == said


@pytest.mark.usefixtures("natural")
@pytest.mark.parametrize(
    ("error", "said"),
    [
        (
            COMPANION_FAILURE,
            "The build failed: src/unit5.py:3:5: error: missing return in a function expected to return 'Int'.",
        ),
        ("`make` failed with exit code 2 after 1.0 s\nlast output:\ndone", "The build failed with exit code 2."),
        (
            "`make` was stopped after its time limit of 600 s\nlast output:\n" + COMPANION_OUTPUT,
            "The build was stopped at its time limit of 600 s.",
        ),
        ("the console has no tool build.run", "The build failed: the console has no tool build.run."),
    ],
)
def test_a_failed_build_is_said_with_its_first_problem_only(error: str, said: str) -> None:
    assert _said_after("build.run", _result("tu_1", {"text": error}, status="error")) == said


def _report(*outcomes: tuple[str, str, bool]) -> dict[str, Any]:
    """The conductor's report turn message for background outcomes ``(name, text, failed)``."""
    reports = [
        BackgroundReport(call_id=f"c{i}", name=name, text=text, failed=failed, started_at=100.0)
        for i, (name, text, failed) in enumerate(outcomes)
    ]
    return _user({"text": report_text(reports, 112.0)})


BUILD_RESULT = json.dumps(
    {
        "status": "succeeded",
        "command": "make",
        "exitCode": 0,
        "seconds": 12.3,
        "problems": [],
        "output": COMPANION_OUTPUT,
    }
)


@pytest.mark.usefixtures("natural")
def test_a_background_report_is_said_in_a_sentence_an_outcome() -> None:
    said = OfflineBrain().reply(
        {"messages": [_report(("build.run", BUILD_RESULT, False), ("tests.run", COMPANION_FAILURE, True))]}
    )

    assert "".join(_deltas(said)) == (
        "The build succeeded. "
        "The tests failed: src/unit5.py:3:5: error: missing return in a function expected to return 'Int'."
    )


def test_the_literal_read_back_keeps_the_raw_text(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CONDUCTOR_LOCAL_READBACK", "literal")
    report = "".join(_deltas(OfflineBrain().reply({"messages": [_report(("build.run", BUILD_RESULT, False))]})))
    assert report.startswith("The build.run you started in the background (started 12 s ago) finished: {")
    assert '"status": "succeeded"' in report and COMPANION_OUTPUT.split("\n")[0] in report

    running = {"callId": "c1", "name": "build.run", "kind": "background", "runningFor": "12 s", "progress": "60 %"}
    status = _said_after("conductor.status", _status(running))
    assert status == f"conductor.status returned {json.dumps({'running': [running]})}"


# ---- stop -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "reason",
    [
        "end_turn",
        "max_tokens",
        "content_filtered",
        "guardrail_intervened",
        "malformed_model_output",
        "malformed_tool_use",
        "model_context_window_exceeded",
        "a_reason_bedrock_never_sent",
    ],
)
def test_stop_ends_the_message_with_any_reason(converse: Converse, reason: str) -> None:
    reply = converse(f"stop {reason}")

    _assert_complete(reply, reason)
    assert reply.kinds == ["messageStart"] + ["contentBlockDelta"] * len(reply.text_deltas) + [
        "contentBlockStop",
        "messageStop",
        "metadata",
    ]
    assert reply.text == STOP_TEXT.format(reason=reason)
    assert reason in reply.text


@pytest.mark.parametrize("transcript", ["stop the build", "Stop it.", "stop"])
def test_ordinary_speech_starting_with_stop_is_echoed(converse: Converse, transcript: str) -> None:
    reply = converse(transcript)
    _assert_complete(reply, "end_turn")
    assert reply.text == f"You said: {transcript}"


def test_stop_streams_the_given_text_as_said(converse: Converse) -> None:
    reply = converse("Stop guardrail_intervened Sorry, I can't discuss that!")

    _assert_complete(reply, "guardrail_intervened")
    assert reply.text_deltas == ["Sorry,", " I", " can't", " discuss", " that!"]


def test_stop_ignores_a_final_full_stop_after_the_reason(converse: Converse) -> None:
    assert converse("STOP content_filtered.").stop_reason == "content_filtered"


def test_stop_max_tokens_cuts_the_tool_input_in_the_middle(converse: Converse) -> None:
    reply = converse('stop max_tokens call editor.readFile {"path": "a.swift"}')

    text_deltas = len(reply.text_deltas)
    input_deltas = [d["delta"]["toolUse"]["input"] for d in reply.of("contentBlockDelta") if "toolUse" in d["delta"]]
    assert reply.kinds == (
        ["messageStart"]
        + ["contentBlockDelta"] * text_deltas
        + ["contentBlockStop", "contentBlockStart"]
        + ["contentBlockDelta"] * len(input_deltas)
        + ["contentBlockStop", "messageStop", "metadata"]
    )
    assert reply.text == CALL_PREAMBLE
    (start,) = reply.of("contentBlockStart")
    assert start["contentBlockIndex"] == 1
    assert start["start"]["toolUse"]["name"] == "tool_call"
    assert [s["contentBlockIndex"] for s in reply.of("contentBlockStop")] == [0, 1]
    assert reply.stop_reason == "max_tokens"
    complete = json.dumps({"name": "editor.readFile", "arguments": {"path": "a.swift"}}, separators=(",", ":"))
    sent = "".join(input_deltas)
    assert len(input_deltas) > 1
    assert sent == complete[: len(complete) // 2]
    with pytest.raises(ValueError):
        json.loads(sent)


def test_stop_max_tokens_cuts_only_the_last_of_several_uses(converse: Converse) -> None:
    reply = converse("stop max_tokens call git.status {} ; call editor.save {}")

    inputs: dict[int, str] = {}
    for delta in reply.of("contentBlockDelta"):
        if "toolUse" in delta["delta"]:
            index = delta["contentBlockIndex"]
            inputs[index] = inputs.get(index, "") + delta["delta"]["toolUse"]["input"]
    assert json.loads(inputs[1]) == {"name": "git.status", "arguments": {}}
    last = '{"name":"editor.save","arguments":{}}'
    assert inputs[2] == last[: len(last) // 2]
    assert reply.stop_reason == "max_tokens"


def test_stop_with_a_call_and_another_reason_sends_the_whole_use(converse: Converse) -> None:
    reply = converse('stop malformed_tool_use call editor.open {"path": "a.py"}')

    _assert_complete(reply, "malformed_tool_use")
    assert reply.text == CALL_PREAMBLE
    (use,) = reply.tool_uses
    assert use["input"] == {"name": "editor.open", "arguments": {"path": "a.py"}}


@pytest.mark.parametrize(
    ("transcript", "text"), [("stop none", CUT_SHORT_TEXT), ("Stop None I was saying.", "I was saying.")]
)
def test_stop_none_ends_the_stream_without_message_stop(converse: Converse, transcript: str, text: str) -> None:
    reply = converse(transcript)

    assert reply.error is None
    assert reply.kinds == ["messageStart"] + ["contentBlockDelta"] * len(reply.text_deltas)
    assert reply.text == text
    assert reply.stop_reason is None


# ---- slow -----------------------------------------------------------------------------------


def test_slow_spreads_the_text_over_the_seconds_asked(converse: Converse) -> None:
    reply = converse("slow 1.5")

    _assert_complete(reply, "end_turn")
    assert reply.text == SLOW_TEXT
    assert len(reply.text_deltas) == len(SLOW_TEXT.split())
    offsets = reply.delta_offsets
    assert offsets[-1] >= 1.4  # the pauses add up to 1.5 s; never assert an upper bound
    assert offsets[len(offsets) // 2] >= 0.7  # spread out, not all at the end


def test_slow_streams_the_given_text(converse: Converse) -> None:
    reply = converse("Slow 0.2 take your time!")

    assert reply.text_deltas == ["take", " your", " time!"]
    assert reply.delta_offsets[0] >= 0.06


def test_slow_keeps_every_pause_short_by_cutting_words_when_needed() -> None:
    text = "antidisestablishmentarianism floccinaucinihilipilification"
    steps = OfflineBrain().answer(f"slow 100 {text}")

    pauses = [step.seconds for step in steps if isinstance(step, Pause)]
    deltas = [
        s["contentBlockDelta"]["delta"]["text"] for s in steps if isinstance(s, dict) and "contentBlockDelta" in s
    ]
    assert "".join(deltas) == text
    assert len(pauses) == len(deltas) > 2
    assert sum(pauses) == pytest.approx(100)
    assert max(pauses) <= SLOW_MAX_GAP


def test_slow_is_capped_at_900_seconds_with_short_pauses() -> None:
    brain = OfflineBrain()

    capped = [step.seconds for step in brain.answer("slow 5000") if isinstance(step, Pause)]
    assert sum(capped) == pytest.approx(MAX_SLOW_SECONDS)
    assert max(capped) <= SLOW_MAX_GAP


def test_slow_0_is_plain_speech(converse: Converse) -> None:
    assert converse("slow 0").text == "You said: slow 0"


# ---- usage --------------------------------------------------------------------------------


def test_input_tokens_are_counted_as_the_context_limit_counts_them(
    bedrock: LocalBedrockServer, converse: Converse
) -> None:
    reply = converse("hello")

    (request,) = bedrock.requests
    assert reply.of("metadata")[0]["usage"]["inputTokens"] == estimate_input_tokens(request.body)


# ---- ramble and pacing --------------------------------------------------------------------


def _deltas(steps: list[Any]) -> list[str]:
    return [s["contentBlockDelta"]["delta"]["text"] for s in steps if isinstance(s, dict) and "contentBlockDelta" in s]


def test_ramble_streams_exactly_n_deltas_of_about_three_tokens(converse: Converse) -> None:
    reply = converse("Ramble 100.")

    _assert_complete(reply, "end_turn")
    assert len(reply.text_deltas) == 100
    assert all(len(piece) >= RAMBLE_CHARS for piece in reply.text_deltas)
    assert all(len(piece.split()) <= RAMBLE_CHARS // 2 for piece in reply.text_deltas)
    text = reply.text
    assert text.count(". ") >= 3 and text.count(", ") >= 3 and text.count("? ") >= 1
    assert reply.of("metadata")[0]["usage"]["outputTokens"] == -(-len(text) // CHARS_PER_TOKEN)


def test_ramble_is_capped_and_at_least_one_delta() -> None:
    assert len(_deltas(OfflineBrain().answer("ramble 5000"))) == MAX_RAMBLE
    assert len(_deltas(OfflineBrain().answer("ramble 0"))) == 1
    assert _deltas(OfflineBrain().answer("ramble on"))[0] == "You"  # not a count: ordinary speech


def test_an_unpaced_brain_never_pauses_a_plain_answer() -> None:
    assert not any(isinstance(step, Pause) for step in OfflineBrain().answer("ramble 20"))


def test_pacing_waits_for_the_first_token_then_streams_deltas_of_three_tokens_at_the_rate() -> None:
    pace = ModelPace(first_token_s=0.4, tokens_per_delta=3, tokens_per_s=80)
    instant = OfflineBrain().answer("please open the settings file of the app")
    steps = paced(instant, pace)

    assert _deltas(steps) == ["You said: please", " open the settings", " file of the", " app"]
    assert "".join(_deltas(steps)) == "".join(_deltas(instant))
    first = next(i for i, s in enumerate(steps) if isinstance(s, dict) and "contentBlockDelta" in s)
    assert steps[first - 1] == Pause(0.4)
    pauses = [s.seconds for s in steps[first:] if isinstance(s, Pause)]
    assert pauses == [pytest.approx(math.ceil(len(d) / CHARS_PER_TOKEN) / 80) for d in _deltas(steps)[1:]]
    usage = steps[-1]["metadata"]["usage"]
    assert usage["outputTokens"] == math.ceil(len("".join(_deltas(steps))) / CHARS_PER_TOKEN)
    assert usage["totalTokens"] == usage["inputTokens"] + usage["outputTokens"]


def test_pacing_keeps_the_deltas_of_ramble_and_paces_tool_input_too() -> None:
    pace = ModelPace()
    assert _deltas(paced(OfflineBrain().answer("ramble 30"), pace)) == _deltas(OfflineBrain().answer("ramble 30"))
    steps = paced(OfflineBrain().answer('call editor.openFile {"path": "a.swift"}'), pace)
    inputs = [i for i, s in enumerate(steps) if isinstance(s, dict) and "contentBlockDelta" in s]
    assert len(inputs) == 3
    assert steps[inputs[0] - 1] == Pause(pace.first_token_s)
    assert all(isinstance(steps[i - 1], Pause) for i in inputs)


def test_pacing_keeps_a_scripts_own_pauses_after_the_first_token() -> None:
    steps = paced(OfflineBrain(count_pause=0.05).answer("count 3"), ModelPace(first_token_s=0.25))
    pauses = [s.seconds for s in steps if isinstance(s, Pause)]
    assert pauses == [0.25, 0.05, 0.05]
    assert _deltas(steps) == ["1", " 2", " 3"]


def test_a_paced_brain_paces_every_reply() -> None:
    request = {"messages": [_user({"text": "hello there"})]}
    steps = OfflineBrain(pace=ModelPace(first_token_s=0.1))("model", request)
    assert Pause(0.1) in steps
    assert "".join(_deltas(steps)) == "You said: hello there"


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("instant", None),
        ("", None),
        ("paced", ModelPace()),
        ("250:40", ModelPace(first_token_s=0.25, tokens_per_s=40.0)),
        ("600", ModelPace(first_token_s=0.6)),
    ],
)
def test_model_pace_is_read_from_a_short_spec(spec: str, expected: ModelPace | None) -> None:
    assert ModelPace.parse(spec) == expected


@pytest.mark.parametrize("spec", ["fast", "100:0", "-5:80", "1:2:3"])
def test_a_bad_model_pace_is_refused(spec: str) -> None:
    with pytest.raises(ValueError, match="model pace"):
        ModelPace.parse(spec)
