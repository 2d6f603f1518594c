"""The blocks a model request carries after its cached prefix (what is remembered of the person,
``shared.core.person_memory``, and the workspace's, ``shared.core.workspace_context``),
and the names the newest transcript's words may have meant, shown to the devices that display.

The names of a device's complete set are read from their stored parts once per container and set
(a query per set, only when a set is new to this container) and kept, indexed, for the next turns.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

from shared.core import devices, mcp_tools, person_memory, workspace_context
from shared.core.messages import Message
from shared.core.roles import Action
from shared.core.state import SessionState
from shared.wire.protocol import make_event
from shared.wire.workspace import MAX_MATCHES, NameHeard, NamesHeard

if TYPE_CHECKING:  # imported where a set of names is indexed: only a companion sends them
    from shared.core.identifiers import KnownName, NameIndex, NameMatch

INDEXES_KEPT = 16
MATCHES_GIVEN = 5


class PartsReader(Protocol):
    def result_parts(self, session_id: str, call_id: str) -> list[tuple[int, str]]: ...


class RequestContext:
    """What one container knows of the sessions' names, and the blocks of their requests."""

    def __init__(self, parts: PartsReader, log: Any) -> None:
        self._parts = parts
        self._log = log
        self._indexes: OrderedDict[tuple[str, ...], NameIndex] = OrderedDict()

    def name_index(self, state: SessionState) -> NameIndex | None:
        sets = workspace_context.complete_sets(state)
        if not sets:
            return None
        key = tuple(sorted(set_id for set_id, _parts in sets))
        index = self._indexes.get(key)
        if index is None:
            names: list[KnownName] = []
            for set_id, _parts in sets:
                for _index, text in self._parts.result_parts(state.session_id, workspace_context.names_key(set_id)):
                    names.extend(workspace_context.names_of(text))
            from shared.core.identifiers import NameIndex

            index = NameIndex.build(names)
            self._indexes[key] = index
            while len(self._indexes) > INDEXES_KEPT:
                self._indexes.popitem(last=False)
        self._indexes.move_to_end(key)
        return index

    def matches(self, state: SessionState, words: str | None) -> list[NameMatch]:
        if not words:
            return []
        try:
            index = self.name_index(state)
        except Exception:  # a names read that fails leaves the turn without candidates, never stops it
            self._log.exception("names not read", extra={"session_id": state.session_id})
            return []
        return index.match(words, limit=MATCHES_GIVEN) if index is not None and len(index) else []

    def for_request(
        self, state: SessionState, messages: Sequence[Message], *, words: str | None = None
    ) -> tuple[list[str], str | None]:
        """The request's blocks and, when the words matched names, the ``namesHeard`` frame to
        post to the devices that display (``words``: the transcript, else the newest message's)."""
        heard = words if words is not None else workspace_context.newest_words(messages)
        found = self.matches(state, heard)
        blocks = workspace_context.blocks(state, messages, found)
        remembered = person_memory.block(state.remembered)
        if remembered is not None:
            blocks = [remembered, *blocks]
        if state.mcp_unreachable:  # why the model has none of their tools
            blocks = [*blocks, mcp_tools.unreachable_block(state.mcp_unreachable)]
        if not found:
            return blocks, None
        shown = NamesHeard(
            matches=tuple(NameHeard(heard=match.heard, name=match.name, path=match.path) for match in found)[
                :MAX_MATCHES
            ]
        )
        return blocks, make_event(shown).to_json()


def vocabulary_frame(parts: PartsReader, state: SessionState, device_id: str) -> str | None:
    """The ``vocabulary`` a voice device starting on the session gets (None: it is no voice device,
    or no names are known): read from the first part of each device's names."""
    keys = workspace_context.first_parts(state)
    if not keys or not devices.device_may(state, device_id, Action.HEAR_VOCABULARY):
        return None
    texts = [text for key in keys for index, text in parts.result_parts(state.session_id, key) if index == 0]
    vocabulary = workspace_context.vocabulary_of(texts)
    return make_event(vocabulary).to_json() if vocabulary is not None else None
