"""The outbox: the numbered events a session keeps for replay, and how DynamoDB holds them.

A decision's kept events ride in the session's ``STATE`` item (``SessionState.kept``, compressed
with the state), written by the write that stores the decision anyway: an event costs no item of
its own, and a write of the state alone stays one ``PutItem`` instead of a transaction (a
transaction bills every item twice). When the events held there pass a budget, a write moves the
older ones into one outbox item, in the same write: compressed, keyed by the last seq it holds
(``OUTBOX#<last seq>``), with its first seq beside it. A write that is a transaction anyway (it
writes history) moves them sooner, so the state item stays small for the writes that follow.

Replay reads the state first, then the items after the seq asked for: an event moved out of the
state between the two reads is in an item by then, so nothing is missed. Items written one event
each (``frame``, by earlier releases) are still read.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from shared.core.state import KeptEvent

SOFT_HELD_BYTES = 300
"""A write that is a transaction anyway moves what the state holds once it passes this (frames' bytes)."""
HARD_HELD_BYTES = 2_000
"""Any write moves the older events once the state would hold more than this."""
MAX_HELD_EVENTS = 24
COMPRESSION_LEVEL = 6


def outbox_sk(last_seq: int) -> str:
    return f"OUTBOX#{last_seq:010d}"


def seq_of_sk(sk: str) -> int:
    return int(sk.split("#", 1)[1])


@dataclass(frozen=True)
class Held:
    """What a write leaves in the state item and what it moves to an outbox item."""

    held: list[KeptEvent]
    moved: list[KeptEvent]


def _bytes(events: Iterable[KeptEvent]) -> int:
    return sum(len(event.frame) for event in events)


def held_after(held: Sequence[KeptEvent], new: Sequence[KeptEvent], *, transaction: bool) -> Held:
    """Where a write's kept events go: ``held``, those the state item holds now; ``new``, the
    write's own; ``transaction``: the write is a transaction whatever this decides."""
    every = [*held, *new]
    size = _bytes(every)
    if not held and not new:
        return Held([], [])
    if transaction:  # an item more costs the least here, and leaves the state item small for the next writes
        return Held(every, []) if size <= SOFT_HELD_BYTES else Held([], every)
    if size <= HARD_HELD_BYTES and len(every) <= MAX_HELD_EVENTS:
        return Held(every, [])
    if _bytes(new) > HARD_HELD_BYTES or len(new) > MAX_HELD_EVENTS:
        return Held([], every)
    return Held(list(new), list(held))


def item_of(pk: str, events: Sequence[KeptEvent], expires_at: dict[str, str]) -> dict[str, Any]:
    """The outbox item holding ``events`` (in seq order)."""
    packed = json.dumps([[event.seq, event.frame, event.to] for event in events], ensure_ascii=False)
    return {
        "pk": {"S": pk},
        "sk": {"S": outbox_sk(events[-1].seq)},
        "first": {"N": str(events[0].seq)},
        "z": {"B": zlib.compress(packed.encode("utf-8"), COMPRESSION_LEVEL)},
        "expires_at": expires_at,
    }


def first_seq(item: dict[str, Any]) -> int:
    return int(item["first"]["N"]) if "first" in item else seq_of_sk(item["sk"]["S"])


def events_of(item: dict[str, Any]) -> list[KeptEvent]:
    """The events of one outbox item, in either form."""
    if "frame" in item:
        return [KeptEvent(seq=seq_of_sk(item["sk"]["S"]), frame=item["frame"]["S"], to=item.get("to", {}).get("S"))]
    return [KeptEvent(seq=seq, frame=frame, to=to) for seq, frame, to in json.loads(zlib.decompress(item["z"]["B"]))]


def kept_between(
    held: Sequence[KeptEvent], items: Iterable[dict[str, Any]], after_seq: int, before_seq: int
) -> list[KeptEvent]:
    """The kept events with ``after_seq < seq < before_seq``, in seq order, from the state item's
    and the outbox items (read after it: an event may be in both)."""
    found: dict[int, KeptEvent] = {}
    for event in [*held, *_from_items(items, before_seq)]:
        if after_seq < event.seq < before_seq:
            found.setdefault(event.seq, event)
    return [found[seq] for seq in sorted(found)]


def _from_items(items: Iterable[dict[str, Any]], before_seq: int) -> Iterator[KeptEvent]:
    for item in items:
        if first_seq(item) >= before_seq:
            return
        yield from events_of(item)
