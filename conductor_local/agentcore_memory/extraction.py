"""A deterministic stand-in for the memory's built-in strategies: what ``CreateEvent`` leaves in long-term memory.

On AWS a model reads each event some time later (extraction is asynchronous) and writes records in
its own words. Here it happens synchronously, inside ``CreateEvent``, by rules, so a test sees the
record as soon as the event is created:

* Only the event's conversational ``USER`` texts are read, sentence by sentence (questions skipped);
  an event with ``extractionMode: SKIP`` is read by no strategy.
* **preferences** (``/people/{actorId}/preferences``): "I prefer …", "I always …", "I never …",
  "I like / love / hate / dislike …", "I don't like …", "I use …" (also "I usually use …"),
  "I'd rather …", "my project uses …", and requests "always …" / "never …". The record says it in
  the second person: "I prefer tabs over spaces" -> "you prefer tabs over spaces", "always run the
  tests first" -> "you want me to always run the tests first" (first- and second-person words are
  swapped: "my" -> "your", "your" -> "my").
* **facts** (``/people/{actorId}/projects/{project}``, ``project`` from the event's
  ``extractionConfig.namespaceVariables``; without it, no fact): "this project uses X", "the/our
  project (repo, codebase, app) uses X", "we use X", "we're using X" -> "this project uses X".
* **summaries**: none are written.
* A statement whose words (``retrieval.words``) are nearly those of a record already in its
  namespace (Jaccard similarity at least ``MERGE_SIMILARITY``; the same words always) updates that
  record (its text and ``timestamp``; id and ``createdAt`` kept) instead of adding one, as the
  service consolidates. "I prefer spaces over tabs" thus replaces "you prefer tabs over spaces".
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from conductor_local.agentcore_memory.retrieval import similarity, words
from conductor_local.agentcore_memory.store import Event, Memory, MemoryStore, Record, Strategy, new_record_id

MERGE_SIMILARITY = 0.75
_NAMESPACE = re.compile(r"[a-zA-Z0-9/*][a-zA-Z0-9-_/*]*(?::[a-zA-Z0-9-_/*]+)*[a-zA-Z0-9-_/*]*")
_SENTENCE_END = re.compile(r"(?<=[.!?;])\s+|\n+")
_FILLER = re.compile(
    r"^(?:(?:and|also|oh|ok|okay|well|so|but|actually|btw|by the way|fyi|just so you know|note that|"
    r"remember that|please remember that|please|you know,?)[,:]?\s+)*",
    re.IGNORECASE,
)

_PROJECT = "(?:project|repo|repository|codebase|app)"
# (pattern on the sentence without fillers, strategy name, how the statement begins); the rest of
# the sentence follows, its persons swapped.
_RULES: tuple[tuple[re.Pattern[str], str, str], ...] = tuple(
    (re.compile(pattern, re.IGNORECASE), strategy, lead)
    for pattern, strategy, lead in (
        (rf"(?:this|the|our) {_PROJECT} (?:uses|is using) (?P<rest>.+)", "facts", "this project uses"),
        (r"we(?:'re| are)? (?:use|using) (?P<rest>.+)", "facts", "this project uses"),
        (rf"my {_PROJECT} (?:uses|is using) (?P<rest>.+)", "preferences", "your project uses"),
        (r"i(?:'d| would) rather (?P<rest>.+)", "preferences", "you'd rather"),
        (r"i (?:really |strongly )?prefer (?P<rest>.+)", "preferences", "you prefer"),
        (r"i always (?P<rest>.+)", "preferences", "you always"),
        (r"i never (?P<rest>.+)", "preferences", "you never"),
        (r"i (?:don't|do not) like (?P<rest>.+)", "preferences", "you don't like"),
        (r"i (?:really )?(?P<verb>like|love|hate|dislike) (?P<rest>.+)", "preferences", "you {verb}"),
        (r"i (?P<how>usually |mostly |normally )?use (?P<rest>.+)", "preferences", "you {how}use"),
        (r"(?P<verb>always|never) (?P<rest>.+)", "preferences", "you want me to {verb}"),
    )
)
_NOT_REQUESTS = re.compile(r"never ?mind\b", re.IGNORECASE)
_FIRST_TO_SECOND = {
    "i": "you",
    "me": "you",
    "my": "your",
    "mine": "yours",
    "myself": "yourself",
    "i'm": "you're",
    "i've": "you've",
    "i'd": "you'd",
    "i'll": "you'll",
    "we": "you",
    "us": "you",
    "our": "your",
    "ours": "yours",
    "your": "my",
    "yours": "mine",
    "yourself": "myself",
    "you're": "I'm",
    "you've": "I've",
}
_SUBJECT_AFTER = frozenset({"when", "if", "that", "because", "as", "where", "while", "before", "after", "and"})
_TOKEN = re.compile(r"[A-Za-z']+|[^A-Za-z']+")


@dataclass(frozen=True)
class Statement:
    """What a sentence says for a strategy (``preferences`` or ``facts``), in the record's words."""

    strategy: str
    text: str


def _swap_persons(rest: str, *, facts: bool) -> str:
    tokens = _TOKEN.findall(rest)
    swapped = []
    previous = ""
    for token in tokens:
        lower = token.lower()
        if not token[0].isalpha():
            swapped.append(token)
            continue
        if facts:
            swapped.append({"our": "its", "ours": "its", "my": "your"}.get(lower, token))
        elif lower == "you":
            swapped.append("I" if previous in _SUBJECT_AFTER else "me")
        else:
            swapped.append(_FIRST_TO_SECOND.get(lower, token))
        previous = lower
    return "".join(swapped)


def _statement(sentence: str) -> Statement | None:
    sentence = _FILLER.sub("", sentence.strip()).strip()
    if not sentence or sentence.endswith("?") or _NOT_REQUESTS.match(sentence):
        return None
    sentence = sentence.rstrip(".!;,: ")
    for pattern, strategy, lead in _RULES:
        found = pattern.fullmatch(sentence)
        if found is None:
            continue
        rest = _swap_persons(found.group("rest").strip(), facts=strategy == "facts")
        if not words(rest):
            return None  # "I like it": nothing to remember
        groups = {name: (value or "").lower() for name, value in found.groupdict().items()}
        return Statement(strategy, f"{lead.format(**groups)} {rest}")
    return None


def statements(text: str) -> list[Statement]:
    """What a person's words state, sentence by sentence (see the module docstring)."""
    found = (_statement(sentence) for sentence in _SENTENCE_END.split(text))
    return [statement for statement in found if statement is not None]


def user_texts(payload: list[dict[str, Any]]) -> Iterator[str]:
    for item in payload:
        conversational = item.get("conversational")
        if conversational and conversational.get("role") == "USER":
            text = (conversational.get("content") or {}).get("text")
            if text:
                yield text


def namespace_for(template: str, variables: Mapping[str, str]) -> str | None:
    """The template with its ``{name}`` variables filled; None when one is missing or the result is no
    valid namespace."""
    missing = False

    def fill(match: re.Match[str]) -> str:
        nonlocal missing
        value = variables.get(match.group(1))
        missing = missing or value is None
        return value or ""

    namespace = re.sub(r"\{([^}]+)\}", fill, template)
    if missing or len(namespace) > 1024 or _NAMESPACE.fullmatch(namespace) is None:
        return None
    return namespace


def consolidate(
    store: MemoryStore, memory: Memory, strategy: Strategy, namespace: str, text: str, when: datetime, now: datetime
) -> Record:
    """Write a statement into its namespace: a near-duplicate record is updated, else one is added."""
    new_words = words(text)
    best: Record | None = None
    best_similarity = MERGE_SIMILARITY
    for record in memory.records.values():
        if record.namespace != namespace or record.expired(now):
            continue
        candidate = similarity(new_words, words(record.text))
        if candidate >= best_similarity:
            best, best_similarity = record, candidate
    seq = store.next_seq()
    if best is not None:
        best.text, best.timestamp, best.written_seq = text, when, seq
        return best
    record = Record(memory.memory_id, new_record_id(), text, strategy.strategy_id, namespace, now, when, seq, seq)
    memory.records[record.record_id] = record
    return record


def extract(
    store: MemoryStore, memory: Memory, event: Event, namespace_variables: Mapping[str, str], now: datetime
) -> None:
    """Run the memory's strategies on a new event (the caller holds the store's lock)."""
    variables = {**namespace_variables, "actorId": event.actor_id, "sessionId": event.session_id}
    for text in user_texts(event.payload):
        for statement in statements(text):
            for strategy in memory.strategies:
                if strategy.name != statement.strategy:
                    continue
                namespace = namespace_for(
                    strategy.namespace_template, {**variables, "memoryStrategyId": strategy.strategy_id}
                )
                if namespace is not None:
                    consolidate(store, memory, strategy, namespace, statement.text, event.event_timestamp, now)
