"""The voice console shows what the conversation cost and answers a cancelled tool: each turn's
``turnUsage`` under its answer, the session's totals from the sessions API in the Sessions panel, and
a ``toolCancel`` stopping the demo build. Headless Chromium against a local stack with list prices."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator

import pytest

from conductor_local.stack import LocalStack
from tests.console.conftest import Console

pytestmark = pytest.mark.browser

PRICES = {"input": 0.11, "output": 0.55, "cache_write": 0.1375, "cache_read": 0.011, "as_of": "2026-11-27"}
USAGE_LINE = re.compile(r"([\d,]+) in / ([\d,]+) out tokens · ~\$([\d.]+) · first word ([\d,]+) ms")


@pytest.fixture(scope="module")
def stack() -> Iterator[LocalStack]:
    with LocalStack("127.0.0.1", 0, quiet=True, env={"CONDUCTOR_PRICES": json.dumps(PRICES)}) as running:
        yield running


def usage_lines(console: Console) -> list[str]:
    return console.js("return [...document.querySelectorAll('#transcript li.usage')].map(li => li.textContent)")


def test_each_turn_shows_its_tokens_cost_and_first_word_under_its_answer(console: Console) -> None:
    console.open(ms_per_word=5)
    console.js("voiceConsole.say('hello')")
    console.idle_after(1)
    console.wait("voiceConsole.usages.length === 1")
    (usage,) = console.received("turnUsage")
    assert usage["inputTokens"] > 0 and usage["outputTokens"] > 0 and usage["costUsd"] > 0

    (line,) = usage_lines(console)
    match = USAGE_LINE.fullmatch(line)
    assert match, line
    assert match[1] == f"{usage['inputTokens']:,}" and match[2] == f"{usage['outputTokens']:,}"
    assert float(match[3]) == pytest.approx(usage["costUsd"], rel=0.05)  # two significant digits
    assert match[4] == f"{usage['firstSpeakMs']:,}"
    # right under the answer of its turn, which keeps its own text
    above = console.js("return document.querySelector('#transcript li.usage').previousElementSibling.className")
    assert above.split() == ["assistant"]
    finals = console.js("return [...document.querySelectorAll('#transcript li.assistant')].map(li => li.textContent)")
    assert finals == ["assistantYou said: hello"]

    console.js("voiceConsole.say('hello again')")
    console.idle_after(2)
    console.wait("voiceConsole.usages.length === 2")
    items = console.js(
        "return [...document.getElementById('transcript').children].map(li => li.className.split(' ')[0])"
    )
    assert [item for item in items if item != "note"] == ["you", "assistant", "usage"] * 2
    assert console.js("return __fake.errors") == []


def test_the_sessions_panel_shows_what_the_current_session_cost(console: Console) -> None:
    console.open(ms_per_word=5)
    for turn, words in enumerate(("hello", "call git.status {}"), start=1):
        console.js("voiceConsole.say(arguments[0])", words)
        console.idle_after(turn)
        console.wait(f"voiceConsole.usages.length === {turn}")
    usages = console.received("turnUsage")
    requests = sum(u["requests"] for u in usages)
    tokens_in, tokens_out = sum(u["inputTokens"] for u in usages), sum(u["outputTokens"] for u in usages)
    assert requests == 3

    console.driver.find_element("id", "sessions-button").click()
    shown = (
        "return (document.querySelector(`#session-list li[data-session-id='${arguments[0]}'] .session-usage`)"
        " || {}).textContent || ''"
    )
    text = console.until(lambda: console.js(shown, console.session_id))
    assert text.startswith(f"Cost so far: 3 model requests · {tokens_in:,} in / {tokens_out:,} out tokens · ~$")
    assert text.endswith("(prices of 2026-11-27)")
    cost = float(re.search(r"~\$([\d.]+)", text)[1])  # type: ignore[index]
    assert cost == pytest.approx(sum(u["costUsd"] for u in usages), rel=0.05)
    assert console.js("return __fake.errors") == []


def test_a_cancelled_build_is_stopped_never_answered_and_marked(console: Console) -> None:
    console.open(ms_per_word=5)
    console.js("voiceConsole.say('call build.run {}')")
    console.idle_after(1)  # a background tool: the turn ends once it started
    (call,) = [c for c in console.received("toolCall") if c["name"] == "build.run"]
    assert console.js("return voiceConsole.runningCalls") == [call["callId"]]

    console.js("voiceConsole.say('cancel the build')")
    console.wait("voiceConsole.record.received.some(e => e.kind.toolCancel)")
    (cancel,) = console.received("toolCancel")
    assert (cancel["callId"], cancel["name"]) == (call["callId"], "build.run")
    console.wait("document.querySelector('#transcript li.note.cancelled') !== null")
    marked = console.js("return document.querySelector('#transcript li.note.cancelled').textContent")
    assert marked.startswith("→ build.run") and marked.endswith("— cancelled")
    assert console.js("return voiceConsole.runningCalls") == []
    console.idle_after(2)
    assert [r for r in console.sent("toolResult") if r["callId"] == call["callId"]] == []
    assert console.js("return __fake.errors") == []


def test_the_demo_build_says_how_far_it_got_and_the_model_says_it_back(console: Console) -> None:
    console.open(ms_per_word=5)
    console.js("voiceConsole.say('call build.run {}')")
    console.idle_after(1)
    (call,) = [c for c in console.received("toolCall") if c["name"] == "build.run"]
    # the demo build reports each of its steps: to the conductor, and on its own line here
    console.until(lambda: len([p for p in console.sent("toolProgress") if p["callId"] == call["callId"]]) >= 2)
    first = console.sent("toolProgress")[0]
    assert first == {"callId": call["callId"], "fraction": 0, "message": "[1/8] Compiling Parser.swift"}
    assert console.js("return voiceConsole.progressCalls") == [call["callId"]]

    console.js('voiceConsole.say("How\'s the build going?")')
    console.idle_after(2)
    answer = console.js("return [...document.querySelectorAll('#transcript li.assistant .body')].pop().textContent")
    assert re.fullmatch(r"The build is \d+ % done: [a-z].+\.", answer), answer

    # the build ends: its line says so, and the report turn tells the outcome
    console.until(
        lambda: (
            "The build succeeded with 1 warning."
            in console.js(
                "return [...document.querySelectorAll('#transcript li.assistant .body')].map(b => b.textContent)"
            )
        ),
        timeout=30,
    )
    assert console.js("return voiceConsole.progressCalls") == []
    line = console.js(
        f"return document.querySelector('#transcript li.progress[data-call-id=\"{call['callId']}\"]').textContent"
    )
    assert line.startswith("build.run") and line.endswith("— done")
    assert console.js("return __fake.errors") == []
