"""The stand-in for the memory's strategies: what a turn sent with ``CreateEvent`` leaves in long-term
memory, at once, by rules (``conductor_local.agentcore_memory.extraction``)."""

from __future__ import annotations

from typing import Any

import pytest

from conductor_local.agentcore_memory.extraction import Statement, statements
from tests.local_agentcore_memory.conftest import ACTOR, MEMORY, OTHER_ACTOR, PROJECT, SESSION, at, say, user_turn


@pytest.mark.parametrize(
    ("said", "remembered"),
    [
        ("I prefer tabs over spaces.", "you prefer tabs over spaces"),
        ("Oh, and I always run the tests before I commit.", "you always run the tests before you commit"),
        ("I never push on Fridays!", "you never push on Fridays"),
        ("I like it when you explain the diff", "you like it when I explain the diff"),
        ("I don't like long answers", "you don't like long answers"),
        ("I usually use vim", "you usually use vim"),
        ("my project uses SwiftUI", "your project uses SwiftUI"),
        ("Always answer in short sentences.", "you want me to always answer in short sentences"),
        ("Please never open my secrets file", "you want me to never open your secrets file"),
    ],
)
def test_preference_sentences_in_the_second_person(said: str, remembered: str) -> None:
    assert statements(said) == [Statement("preferences", remembered)]


@pytest.mark.parametrize(
    ("said", "remembered"),
    [
        ("This project uses pnpm.", "this project uses pnpm"),
        ("We use XCTest for the tests", "this project uses XCTest for the tests"),
        ("we're using our own logger", "this project uses its own logger"),
        ("The repo uses GitHub Actions", "this project uses GitHub Actions"),
    ],
)
def test_fact_sentences(said: str, remembered: str) -> None:
    assert statements(said) == [Statement("facts", remembered)]


@pytest.mark.parametrize(
    "said", ["hello there", "I like it", "Do I always use tabs?", "never mind", "open the README", "I prefer"]
)
def test_nothing_to_remember(said: str) -> None:
    assert statements(said) == []


def test_a_turn_leaves_preferences_and_facts_in_their_namespaces(client: Any) -> None:
    say(client, "I prefer tabs over spaces. This project uses pnpm. What is the time?", when=5)
    records = client.list_memory_records(memoryId=MEMORY, namespacePath=f"/people/{ACTOR}/")["memoryRecordSummaries"]
    found = {(r["content"]["text"], r["namespaces"][0], r["memoryStrategyId"]) for r in records}
    assert found == {
        ("you prefer tabs over spaces", f"/people/{ACTOR}/preferences", "preferences-0123456789"),
        ("this project uses pnpm", f"/people/{ACTOR}/projects/{PROJECT}", "facts-0123456789"),
    }
    assert all(r["timestamp"] == at(5) for r in records)


def test_only_the_persons_words_are_read(client: Any, server: Any) -> None:
    client.create_event(
        memoryId=MEMORY,
        actorId=ACTOR,
        sessionId=SESSION,
        eventTimestamp=at(0),
        payload=[
            {"conversational": {"content": {"text": "hello"}, "role": "USER"}},
            {"conversational": {"content": {"text": "I prefer short answers."}, "role": "ASSISTANT"}},
            {"conversational": {"content": {"text": "I use vim."}, "role": "TOOL"}},
            {"blob": {"note": "I prefer blobs"}},
        ],
    )
    assert server.store.records() == []


def test_skip_extracts_nothing(client: Any, server: Any) -> None:
    say(client, "I prefer tabs over spaces.", extractionMode="SKIP")
    assert server.store.records() == []
    assert len(server.store.events()) == 1


def test_no_facts_without_a_project(client: Any, server: Any) -> None:
    client.create_event(
        memoryId=MEMORY, actorId=ACTOR, sessionId=SESSION, eventTimestamp=at(0), payload=user_turn("We use pnpm.")
    )
    assert server.store.records() == []


def test_the_same_words_again_update_the_one_record(client: Any, server: Any) -> None:
    say(client, "I prefer tabs over spaces.", when=1)
    (first,) = server.store.records()
    say(client, "Actually, I prefer spaces over tabs.", when=2)
    (merged,) = server.store.records()
    assert merged["memoryRecordId"] == first["memoryRecordId"]
    assert merged["content"]["text"] == "you prefer spaces over tabs"
    assert merged["timestamp"] == at(2) and merged["createdAt"] == first["createdAt"]
    say(client, "I prefer dark mode.", when=3)
    assert len(server.store.records()) == 2


def test_each_person_has_their_own_preferences(client: Any, server: Any) -> None:
    say(client, "I prefer tabs over spaces.")
    say(client, "I prefer tabs over spaces.", actor=OTHER_ACTOR)
    namespaces = sorted(record["namespaces"][0] for record in server.store.records())
    assert namespaces == sorted([f"/people/{ACTOR}/preferences", f"/people/{OTHER_ACTOR}/preferences"])
