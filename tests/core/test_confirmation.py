"""Confirming a change: the verdict of the person's answer, and the question and card of a change."""

from __future__ import annotations

import json
import string
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shared.core.confirmation_words import (
    ARGUMENTS_CHARS,
    MAX_WORDS,
    NO_PHRASES,
    YES_PHRASES,
    Change,
    Verdict,
    change_card,
    describe_change,
    verdict,
)
from shared.core.speakable import Card, card_patch

YES_CASES = [
    "yes", "Yes.", "YES!", "yes?", "Yeah", "yep", "Yup.", "sure", "OK.", "ok", "Okay!", "o.k.", "do it",
    "Go ahead.", "go for it", "Please do.", "sounds good", "That's fine.", "That\u2019s fine", "thats fine",
    "correct", "Right.", "affirmative", "confirm", "Confirmed.", "apply it", "make the change", "yes please",
    "Yes, do it.", "absolutely", "of course", "fine", "alright", "All right.", "all-right", "let's do it",
    "Let\u2019s do it!", "ship it", "Yes. Go ahead.", "yes, go ahead", "yeah yeah", "Yes yes yes.",
    "no problem", "No worries!", "not a problem", "uh, yes", "Um... okay.", "okay so yes", "Okay, so, go ahead.",
    "yes thanks", "Yes, thank you.", "go ahead please", "please go ahead", "just do it", "well, sure",
    "oh yes", "  yes  ", "yes\n", "\u201cYes.\u201d", "Sure, sounds good.", "ok then",
]  # fmt: skip
NO_CASES = [
    "no", "No.", "NO!", "no?", "nope", "Nah.", "don't", "Don\u2019t.", "dont", "do not", "cancel", "Cancel that.",
    "stop", "Stop!", "never mind", "Nevermind.", "never-mind", "no thanks", "No, thank you.", "not now",
    "leave it", "skip it", "don't do that", "Don't do it.", "hold on", "Hold on.", "wait", "Wait, wait.",
    "no don't", "No, don't.", "no no", "No, no, no.", "no, cancel that", "uh no", "Um, no.", "okay so no",
    "well, no", "oh no", "hold on a sec", "cancel please", "nope, never mind", "no thanks, not now",
]  # fmt: skip
OTHER_CASES = [
    "", "   ", "...", "?", "please", "thanks", "thank you", "uh", "okay so", "so", "well",
    "yes but change line 12 instead", "no, replace lines 30 to 40", "yes no", "no yes", "yeah no",
    "okay cancel", "ok, wait", "sure not", "not sure", "maybe", "I don't know", "what?", "what does it change",
    "yes and also rename the function", "no, the other file", "do it in main.swift", "go ahead and build it",
    "right after that", "fine, but only line 10", "uh-huh", "no problem but wait", "stop the build", "cancel the build",
    "yes " * (MAX_WORDS + 1), "yesno", "yess", "ye", "noo", "yes 2", "undo it", "redo it", "do",
    "explain the change first", "what's on line 10?",
]  # fmt: skip


@pytest.mark.parametrize("utterance", YES_CASES)
def test_yes(utterance: str) -> None:
    assert verdict(utterance) is Verdict.YES


@pytest.mark.parametrize("utterance", NO_CASES)
def test_no(utterance: str) -> None:
    assert verdict(utterance) is Verdict.NO


@pytest.mark.parametrize("utterance", OTHER_CASES)
def test_other(utterance: str) -> None:
    assert verdict(utterance) is Verdict.OTHER


@pytest.mark.parametrize("phrase", YES_PHRASES)
def test_every_yes_phrase_is_yes(phrase: str) -> None:
    assert verdict(phrase) is Verdict.YES


@pytest.mark.parametrize("phrase", NO_PHRASES)
def test_every_no_phrase_is_no(phrase: str) -> None:
    assert verdict(phrase) is Verdict.NO


def test_verdict_is_a_str_enum() -> None:
    assert Verdict.YES == "yes" and Verdict.NO == "no" and Verdict.OTHER == "other"


SEPARATORS = st.sampled_from([" ", ", ", ". ", "! ", "? ", " - ", "... ", " \u2014 ", ";\n", "  "])
ENDS = st.sampled_from(["", ".", "!", "?", "...", ",", " ", "\u201d", '"'])


def _spoken(phrases: list[str], seps: list[str], start: str, end: str, upper: list[bool]) -> str:
    text = start + "".join(p + s for p, s in zip(phrases, [*seps[: len(phrases) - 1], ""], strict=True)) + end
    return "".join(c.upper() if up else c for c, up in zip(text, upper + [False] * len(text), strict=False))


@st.composite
def _said(draw: st.DrawFn, phrases: tuple[str, ...]) -> tuple[str, str]:
    """Some phrasings said plainly, and the same said with punctuation and case."""
    picked = draw(st.lists(st.sampled_from(phrases), min_size=1, max_size=3))
    seps = draw(st.lists(SEPARATORS, min_size=len(picked), max_size=len(picked)))
    start, end = draw(st.sampled_from(["", '"', "\u201c", " "])), draw(ENDS)
    upper = draw(st.lists(st.booleans(), max_size=60))
    return " ".join(picked), _spoken(picked, seps, start, end, upper)


@settings(max_examples=300)
@given(_said(YES_PHRASES))
def test_combined_yes_phrasings_with_any_punctuation_and_case_are_yes(said: tuple[str, str]) -> None:
    plain, spoken = said
    assert verdict(plain) is Verdict.YES
    assert verdict(spoken) is Verdict.YES


@settings(max_examples=300)
@given(_said(NO_PHRASES))
def test_combined_no_phrasings_with_any_punctuation_and_case_are_no(said: tuple[str, str]) -> None:
    plain, spoken = said
    assert verdict(plain) is Verdict.NO
    assert verdict(spoken) is Verdict.NO


WORD = st.text(alphabet=string.ascii_letters, min_size=1, max_size=8)
VOCABULARY = st.sampled_from(
    [*" ".join(YES_PHRASES + NO_PHRASES).replace("'", "").split(), "please", "uh", "so", "line", "12", "change"]
)


@settings(max_examples=200)
@given(st.lists(st.one_of(WORD, VOCABULARY), min_size=MAX_WORDS + 1, max_size=30), st.lists(SEPARATORS, max_size=30))
def test_more_words_than_the_limit_is_other(words: list[str], seps: list[str]) -> None:
    text = "".join(word + (seps[i] if i < len(seps) else " ") for i, word in enumerate(words))
    assert verdict(text) is Verdict.OTHER


@settings(max_examples=300)
@given(st.lists(st.one_of(VOCABULARY, WORD), min_size=1, max_size=MAX_WORDS), SEPARATORS, ENDS)
def test_punctuation_and_case_never_change_a_verdict(words: list[str], sep: str, end: str) -> None:
    plain = " ".join(words)
    assert verdict(sep.join(words) + end) is verdict(plain)
    assert verdict(plain.upper()) is verdict(plain)
    assert verdict(plain.title()) is verdict(plain)


@settings(max_examples=300)
@given(st.lists(VOCABULARY, min_size=1, max_size=MAX_WORDS), st.sampled_from(["but", "instead", "line", "12"]))
def test_a_word_outside_the_phrasings_makes_it_other(words: list[str], extra: str) -> None:
    assert verdict(" ".join([*words, extra])) is Verdict.OTHER


@given(st.text(max_size=200))
def test_any_text_has_a_verdict(text: str) -> None:
    assert verdict(text) in set(Verdict)


# describe_change


def replace(**arguments: Any) -> Change:
    return describe_change("editor.replaceText", arguments)


def test_a_range_is_replaced() -> None:
    change = replace(path="Sources/App/main.swift", startLine=10, endLine=20, text="let a = 1\nlet b = 2\n")
    assert change.question == "Replace lines 10 to 20 of main.swift?"
    assert change.card_title == "Replace lines 10\u201320 of main.swift"
    assert change.card_body == (
        "--- Sources/App/main.swift\n"
        "+++ Sources/App/main.swift\n"
        "@@ -10,11 +10,2 @@\n"
        "- (lines 10\u201320 as they are now)\n"
        "+let a = 1\n"
        "+let b = 2"
    )
    assert change_card(change) == Card(
        type="diff",
        title="Replace lines 10\u201320 of main.swift",
        body=change.card_body,
        language="diff",
        file="Sources/App/main.swift",
    )


def test_a_single_line_is_replaced() -> None:
    change = replace(path="main.swift", startLine=10, endLine=10, text="    return nil")
    assert change.question == "Replace line 10 of main.swift?"
    assert change.card_body.splitlines() == [
        "--- main.swift",
        "+++ main.swift",
        "@@ -10,1 +10,1 @@",
        "- (line 10 as it is now)",
        "+    return nil",
    ]


def test_empty_text_deletes() -> None:
    change = replace(path="/Users/me/App/main.swift", startLine=10, endLine=20, text="")
    assert change.question == "Delete lines 10 to 20 of main.swift?"
    assert change.card_title == "Delete lines 10\u201320 of main.swift"
    assert change.card_body.splitlines()[2:] == ["@@ -10,11 +9,0 @@", "- (lines 10\u201320 as they are now)"]
    assert replace(path="main.swift", startLine=3, endLine=3, text="").question == "Delete line 3 of main.swift?"


def test_a_blank_line_is_a_replacement_not_a_deletion() -> None:
    change = replace(path="main.swift", startLine=4, endLine=6, text="\n")
    assert change.question == "Replace lines 4 to 6 of main.swift?"
    assert change.card_body.splitlines()[2:] == ["@@ -4,3 +4,1 @@", "- (lines 4\u20136 as they are now)", "+"]


def test_crlf_text_is_split_into_lines() -> None:
    change = replace(path="a.txt", startLine=1, endLine=1, text="one\r\ntwo\r\n")
    assert change.card_body.splitlines()[2:] == ["@@ -1,1 +1,2 @@", "- (line 1 as it is now)", "+one", "+two"]


def test_a_long_replacement_is_capped() -> None:
    text = "\n".join(f"line {i}" for i in range(1, 251))
    change = replace(path="big.py", startLine=1, endLine=5, text=text)
    lines = change.card_body.splitlines()
    assert lines[2] == "@@ -1,5 +1,250 @@"
    assert lines[4] == "+line 1" and lines[-2] == "+line 200"
    assert lines[-1] == "… 50 more lines"
    assert len(lines) == 4 + 200 + 1
    one_more = replace(path="big.py", startLine=1, endLine=5, text="\n".join(["x"] * 201))
    assert one_more.card_body.endswith("+x\n… 1 more line")
    exactly = replace(path="big.py", startLine=1, endLine=5, text="\n".join(["x"] * 200))
    assert "more line" not in exactly.card_body


def test_windows_paths_and_whole_numbers_as_floats() -> None:
    change = replace(path="C:\\src\\App\\main.swift", startLine=2.0, endLine=3.0, text="x")
    assert change.question == "Replace lines 2 to 3 of main.swift?"


def test_an_unknown_tool_gets_a_generic_question() -> None:
    change = describe_change("build.clean", {"target": "App"})
    assert change.question == "Run build.clean with target App?"
    assert change.card_title == "Run build.clean"
    assert json.loads(change.card_body) == {"target": "App"}
    assert change_card(change) == Card("code", "Run build.clean", change.card_body, "json", None)
    json.loads(card_patch(change_card(change)))


def test_a_generic_question_names_at_most_two_short_values() -> None:
    change = describe_change(
        "terminal.run",
        {"command": "rm -rf build", "workingDirectory": "Sources/App", "timeoutSeconds": 30, "env": {"A": "1"}},
    )
    assert change.question == "Run terminal.run with command rm -rf build and working directory App?"
    script = describe_change("terminal.run", {"script": "a\nb", "force": True, "note": "x" * 200, "count": 3})
    assert script.question == "Run terminal.run with count 3?"
    assert describe_change("build.clean", {}).question == "Run build.clean?"


def test_a_generic_question_stays_short() -> None:
    name = "project." + "veryLongToolName" * 3
    change = describe_change(name, {"first": "a" * 30, "second": "b" * 30})
    assert len(change.question) <= 100
    assert change.question.endswith("?") and change.question.count("?") == 1
    assert describe_change("x" * 500, {}).question.endswith("…?")


def test_generic_arguments_are_capped() -> None:
    change = describe_change("file.write", {"path": "a.txt", "contents": "x" * 10_000})
    assert len(change.card_body) <= ARGUMENTS_CHARS
    assert change.card_body.endswith("\n…")
    assert change.question == "Run file.write with path a.txt?"


BAD_REPLACEMENTS: list[dict[str, Any]] = [
    {},
    {"path": "main.swift"},
    {"path": "main.swift", "startLine": 10, "endLine": 20},
    {"path": "main.swift", "startLine": 20, "endLine": 10, "text": "x"},
    {"path": "main.swift", "startLine": 0, "endLine": 1, "text": "x"},
    {"path": "main.swift", "startLine": -3, "endLine": 1, "text": "x"},
    {"path": "main.swift", "startLine": "10", "endLine": "20", "text": "x"},
    {"path": "main.swift", "startLine": True, "endLine": True, "text": "x"},
    {"path": "main.swift", "startLine": 1.5, "endLine": 2, "text": "x"},
    {"path": "main.swift", "startLine": 1, "endLine": None, "text": "x"},
    {"path": "main.swift", "startLine": 1, "endLine": 2, "text": None},
    {"path": "main.swift", "startLine": 1, "endLine": 2, "text": ["x"]},
    {"path": "", "startLine": 1, "endLine": 2, "text": "x"},
    {"path": "/", "startLine": 1, "endLine": 2, "text": "x"},
    {"path": 7, "startLine": 1, "endLine": 2, "text": "x"},
    {"path": "main.swift", "startLine": float("nan"), "endLine": float("inf"), "text": "x"},
]


@pytest.mark.parametrize("arguments", BAD_REPLACEMENTS)
def test_bad_replace_arguments_give_the_generic_question(arguments: dict[str, Any]) -> None:
    change = describe_change("editor.replaceText", arguments)
    assert change.question.startswith("Run editor.replaceText")
    assert change.question.endswith("?")
    assert change.card_type == "code"


@pytest.mark.parametrize(
    ("name", "arguments"),
    [
        ("", {}),
        ("   ", {"a": 1}),
        (None, None),
        ("tool", None),
        ("tool", [1, 2, 3]),
        ("tool", "not a dict"),
        ("tool", {1: "int key", "k": object()}),
        ("tool", {("tuple",): "key"}),
        ("tool", {"nan": float("nan"), "big": 10**30, "none": None, "list": [1, 2]}),
        ("editor.replaceText", None),
        ("editor.replaceText", "path=main.swift"),
    ],
)
def test_odd_input_never_raises(name: Any, arguments: Any) -> None:
    change = describe_change(name, arguments)
    assert change.question.startswith("Run ") and change.question.endswith("?")
    assert len(change.card_body) <= ARGUMENTS_CHARS


def test_self_referencing_arguments_never_raise() -> None:
    arguments: dict[str, Any] = {"a": "b"}
    arguments["self"] = arguments
    change = describe_change("tool", arguments)
    assert change.question == "Run tool with a b?"
    assert change.card_body


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=40),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=20,
)


@settings(max_examples=200)
@given(st.sampled_from(["editor.replaceText", "build.clean", ""]), st.dictionaries(st.text(max_size=12), JSON))
def test_any_arguments_give_one_short_question(name: str, arguments: dict[str, Any]) -> None:
    change = describe_change(name, arguments)
    assert change.question.endswith("?") and "\n" not in change.question
    assert len(change.question) <= 100
    assert len(change.card_body) <= ARGUMENTS_CHARS


@settings(max_examples=200)
@given(
    st.text(min_size=1, max_size=80).filter(lambda p: p.replace("\\", "/").rstrip("/").rsplit("/", 1)[-1].strip()),
    st.integers(1, 10_000),
    st.integers(0, 50),
    st.text(max_size=300),
)
def test_any_valid_replacement_is_described(path: str, start: int, extra: int, text: str) -> None:
    change = replace(path=path, startLine=start, endLine=start + extra, text=text)
    assert change.question.startswith("Delete " if text == "" else "Replace ")
    assert change.question.endswith("?")
    assert change.card_type == "diff" and change.file == path
    assert change.card_body.startswith(f"--- {path}\n+++ {path}\n@@ -{start},{extra + 1} ")
