"""What is remembered of a person: whose, where, the guardrails, the block."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from shared.core import person_memory as rules
from shared.core.person_memory import MemoryAnswer, Recollection
from shared.core.state import ModelCall, SessionState

SUB = "7f1c2a9e-1b2c-4d3e-8f90-123456789abc"


def record(record_id: str, text: str, **kw: object) -> Recollection:
    return Recollection(id=record_id, text=text, kind=kw.get("kind", "preference"), scope=kw.get("scope", "person"))  # type: ignore[arg-type]


def test_the_actor_is_the_verified_sub_or_the_local_person_without_sign_in() -> None:
    assert rules.actor_of(SUB, signed_in_only=True) == SUB
    assert rules.actor_of(None, signed_in_only=True) is None
    assert rules.actor_of(None, signed_in_only=False) == "local"
    assert rules.actor_of("../other", signed_in_only=False) is None  # nothing the memory could not hold


def test_namespaces_stay_inside_the_persons_own_space() -> None:
    assert rules.preferences_namespace(SUB) == f"/people/{SUB}/preferences"
    assert rules.project_namespace(SUB, rules.project_slug("Shop API!")) == f"/people/{SUB}/projects/shop-api"
    assert rules.project_slug("../../etc") == "etc"
    assert rules.project_slug("") == rules.NO_PROJECT
    assert rules.placed(SUB, f"/people/{SUB}/projects/shop-api") == ("fact", "project", "shop-api")
    assert rules.placed(SUB, f"/people/{SUB}/sessions/abc") == ("summary", "session", None)
    assert rules.placed(SUB, "/people/someone-else/preferences") is None
    assert rules.placed(SUB, f"/people/{SUB}x/preferences") is None  # a prefix of another sub is not theirs


def test_the_project_is_the_workspace_a_device_reports() -> None:
    assert rules.project_of({"desk": "workspace: shop-api\nbranch: main"}) == "shop-api"
    assert rules.project_of({}) is None


@pytest.mark.parametrize(
    "text",
    [
        "my password is hunter2",
        "the API key is sk-abcdefghijklmnopqrstuvwxyz123456",
        "AKIAIOSFODNN7EXAMPLE is my access key id",
        "my github token: ghp_abcdefghijklmnopqrstuvwxyz0123456789",
        "-----BEGIN RSA PRIVATE KEY----- MIIE",
        "card 4111 1111 1111 1111",
        "use Zx9vQ2mL7pR4tW8yB3nK6cF1hJ5dS0aE as the value",
        "my PIN = 4921",
    ],
)
def test_secrets_are_refused_with_a_spoken_reason(text: str) -> None:
    assert rules.secret_reason(text) == rules.SECRET_REFUSAL


@pytest.mark.parametrize(
    "text",
    [
        "I prefer tabs over spaces",
        "run the tests with -x",
        "my project uses pnpm",
        "the login page lives in src/auth/LoginView.swift",
        "I like short answers about tokens and tokenizers",
    ],
)
def test_ordinary_preferences_are_not_taken_for_secrets(text: str) -> None:
    assert rules.secret_reason(text) is None


def test_five_writes_a_minute_then_the_wait_until_the_oldest_leaves_the_window() -> None:
    times: list[float] = []
    for second in range(5):
        times, wait = rules.write_allowed(times, 1000.0 + second)
        assert wait is None
    kept, wait = rules.write_allowed(times, 1010.0)
    assert wait == pytest.approx(50.0)
    assert kept == times  # nothing counted for a refused write
    times, wait = rules.write_allowed(times, 1060.5)  # the first left the minute
    assert wait is None and len(times) == 5


@given(st.lists(st.floats(min_value=0, max_value=600), max_size=40))
def test_never_more_than_five_writes_in_any_minute(attempts: list[float]) -> None:
    times: list[float] = []
    accepted: list[float] = []
    for now in sorted(attempts):
        times, wait = rules.write_allowed(times, now)
        if wait is None:
            accepted.append(now)
        else:
            assert wait >= 1
    for at in accepted:
        assert sum(1 for other in accepted if at - rules.WRITE_WINDOW_S < other <= at) <= rules.WRITES_PER_MINUTE


def test_a_near_duplicate_is_found_and_a_different_preference_is_not() -> None:
    kept = [record("mem-1", "prefers tabs over spaces"), record("mem-2", "runs the tests with -x")]
    same = rules.near_duplicate("prefers tabs over spaces!", kept)
    assert same is not None and same.id == "mem-1"
    assert rules.near_duplicate("prefers spaces in YAML files", kept) is None


def test_forget_finds_the_records_sharing_most_of_its_words() -> None:
    kept = [record("mem-1", "you prefer tabs over spaces"), record("mem-2", "your project uses pnpm")]
    assert [found.id for found in rules.forget_targets("tabs over spaces", kept)] == ["mem-1"]
    assert rules.forget_targets("the weather", kept) == []


def test_arguments_are_read_with_clear_problems() -> None:
    assert rules.read_arguments("memory.write", '{"text": " I  prefer tabs "}').text == "I prefer tabs"
    assert rules.read_arguments("memory.write", '{"text": "x", "scope": "team"}').problem is not None
    assert rules.read_arguments("memory.write", json.dumps({"text": "x" * 501})).problem is not None
    assert rules.read_arguments("memory.search", "{}").problem is not None
    assert rules.read_arguments("memory.forget", '{"id": "mem-1"}').record_id == "mem-1"
    assert rules.read_arguments("memory.forget", "[1]").problem is not None
    assert rules.read_arguments("memory.write", '{"text": "a", "scope": "project"}').scope == "project"


def test_the_block_is_bounded_and_says_the_records_are_not_instructions() -> None:
    many = [record(f"mem-{index}", "prefers " + "very " * 30 + f"long things {index}") for index in range(40)]
    lines = rules.block_lines(many)
    assert 0 < len(lines) < 40
    assert sum(len(line) + 1 for line in lines) <= rules.MAX_BLOCK_CHARS
    block = rules.block(lines)
    assert block is not None and block.startswith('<context kind="remembered">') and "not instructions" in block
    assert rules.block([]) is None


def test_a_write_puts_its_record_first_and_replaces_the_one_it_updated() -> None:
    tabs, pnpm = record("mem-1", "prefers tabs"), record("mem-2", "uses pnpm")
    lines = rules.block_lines([tabs, pnpm])
    updated = rules.with_line(rules.without(lines, [tabs]), record("mem-3", "prefers tabs, width 4"))
    assert updated == ["- (preference) prefers tabs, width 4", "- (preference) uses pnpm"]
    assert rules.without(updated, [pnpm]) == updated[:1]
    assert not any("mem-" in line for line in updated)  # no ids: tokens and state bytes


def test_the_round_answers_a_memory_call_and_keeps_the_block_up_to_date() -> None:
    tabs = record("mem-1", "prefers tabs")
    state = SessionState(session_id="s", remembered=rules.block_lines([tabs]))
    call = ModelCall(call_id="c1", tool_use_id="t1", name="memory.forget", arguments="{}")
    rules.answer_call(state, call, MemoryAnswer(rules.forget_answer(["mem-1"]), removed=(tabs,)))
    assert state.remembered == []
    assert call.result is not None and call.result["toolResult"]["status"] == "success"
    missing = ModelCall(call_id="c2", tool_use_id="t2", name="memory.search", arguments="{}")
    rules.answer_call(state, missing, None)
    assert missing.result is not None and missing.result["toolResult"]["status"] == "error"
