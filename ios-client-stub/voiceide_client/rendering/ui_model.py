"""The app's UI model: the JSON document every ``assistantUIPatch`` applies to.

It starts as ``{"cards": []}``; the conductor appends each card (code, a diff, a long list or a
table) with an RFC 6902 JSON Patch such as
``[{"op": "add", "path": "/cards/-", "value": {"type": "code", "title": "Swift code", ...}}]``.
Patches are applied with ``jsonpatch``, all operations or none: a patch that does not apply
leaves the model as it was and raises ``PatchError`` with a one-line reason.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import jsonpatch
import jsonpointer

Card = dict[str, Any]


class PatchError(ValueError):
    """An ``assistantUIPatch`` that could not be applied; the message says why, in one line."""


def initial_document() -> dict[str, Any]:
    return {"cards": []}


class UIModel:
    """The screen's document, patched as the conductor asks; ``cards`` is what is on screen."""

    def __init__(self, document: dict[str, Any] | None = None) -> None:
        self.document: dict[str, Any] = initial_document() if document is None else copy.deepcopy(document)
        self.applied = 0
        self.rejected: list[str] = []  # the reason of each patch that did not apply

    @property
    def cards(self) -> list[Card]:
        cards = self.document.get("cards")
        return [card for card in cards if isinstance(card, dict)] if isinstance(cards, list) else []

    def apply(self, patch: str) -> list[Card]:
        """Apply one patch (a JSON Patch document as a string); the cards it added, in order."""
        try:
            operations = json.loads(patch)
        except ValueError as exc:
            raise self._reject(f"the patch is not JSON ({exc})") from None
        if not isinstance(operations, list):
            raise self._reject("the patch is not a JSON Patch array of operations")
        before = self.cards
        try:
            patched = jsonpatch.JsonPatch(operations).apply(self.document, in_place=False)
        except (jsonpatch.JsonPatchException, jsonpointer.JsonPointerException, TypeError, KeyError) as exc:
            raise self._reject(_one_line(exc)) from None
        if not isinstance(patched, dict):
            raise self._reject("the patch would replace the whole UI model with something that is not an object")
        self.document = patched
        self.applied += 1
        after = self.cards
        if after[: len(before)] == before:
            return after[len(before) :]
        return [card for card in after if card not in before]

    def _reject(self, reason: str) -> PatchError:
        self.rejected.append(reason)
        return PatchError(reason)


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text[:200]
