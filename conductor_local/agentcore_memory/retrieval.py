"""What stands in for AgentCore Memory's semantic search, and the filters of its list and search calls.

* Relevance: word overlap. A text's words are its lowercased letters-and-digits runs, stopwords left
  out, a plural ``s`` folded (``tabs`` is ``tab``); a record's score for a query is
  ``|common| / sqrt(|query| * |record|)``, in 0..1. There is no threshold: like a vector search, a
  search returns the ``topK`` nearest records even when nothing matches well.
* Namespaces: ``namespace`` is an exact match; ``namespacePath`` is hierarchical (the record's
  namespace is the path itself or lies under it).
* Metadata filters: ``EXISTS`` / ``NOT_EXISTS`` a key; ``EQUALS_TO`` a value; ``CONTAINS`` (a string
  list holding the value, or a string holding it); ``BEFORE`` / ``AFTER`` on date-times;
  ``GREATER_THAN`` … ``LESS_THAN_OR_EQUALS`` on numbers.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from typing import Any

from conductor_local.agentcore_memory.validation import refuse

_STOPWORDS_TEXT = """a about after again all also am an and any are as at be because been before being both but by can
    could did do does doing dont down during each for from further had has have having he her here hers
    him his how i if im in into is it its itself just me more most my myself no nor not now of off on once
    only or other our ours out over own same she should so some such than that the their theirs them then
    there these they this those through to too under until up very was we were what when where which while
    who whom why will with would you your yours yourself"""
STOPWORDS = frozenset(_STOPWORDS_TEXT.split())
_WORD = re.compile(r"[a-z0-9]+")


def _fold(word: str) -> str:
    if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
        return word[:-1]
    return word


def words(text: str) -> frozenset[str]:
    """The words of ``text`` that carry meaning (see the module docstring)."""
    found = _WORD.findall(text.lower().replace("'", "").replace("\u2019", ""))
    return frozenset(_fold(word) for word in found if word not in STOPWORDS)


def score(query: frozenset[str], record: frozenset[str]) -> float:
    """How near a record's words are to a query's, 0..1."""
    if not query or not record:
        return 0.0
    return round(len(query & record) / math.sqrt(len(query) * len(record)), 4)


def similarity(one: frozenset[str], other: frozenset[str]) -> float:
    """Jaccard similarity of two word sets (1.0: the same words)."""
    if not one and not other:
        return 1.0
    return len(one & other) / len(one | other)


# ---- namespaces ------------------------------------------------------------------------------------


def under(namespace: str, path: str) -> bool:
    """Whether ``namespace`` is ``path`` or lies under it (``/people/a`` holds ``/people/a/preferences``,
    never ``/people/ab``)."""
    if namespace == path:
        return True
    return namespace.startswith(path if path.endswith("/") else path + "/")


def namespace_filter(params: Mapping[str, Any]) -> tuple[str | None, str | None]:
    """``namespace`` or ``namespacePath``: the service wants exactly one of them."""
    namespace, path = params.get("namespace"), params.get("namespacePath")
    if namespace is None and path is None:
        raise refuse("namespace", None, "not be null when namespacePath is absent (either is required)")
    if namespace is not None and path is not None:
        raise refuse("namespacePath", path, "be absent when namespace is given (they are exclusive)")
    return namespace, path


def in_namespaces(namespaces: Iterable[str], namespace: str | None, path: str | None) -> bool:
    if namespace is not None:
        return namespace in namespaces
    return path is not None and any(under(candidate, path) for candidate in namespaces)


# ---- metadata filters ------------------------------------------------------------------------------

NEEDS_NO_VALUE = frozenset({"EXISTS", "NOT_EXISTS"})
_NUMBER_COMPARISONS = {
    "GREATER_THAN": lambda a, b: a > b,
    "GREATER_THAN_OR_EQUALS": lambda a, b: a >= b,
    "LESS_THAN": lambda a, b: a < b,
    "LESS_THAN_OR_EQUALS": lambda a, b: a <= b,
}


def check_filters(filters: list[dict[str, Any]] | None, path: str) -> None:
    """A filter whose operator compares needs a value to compare with; ``EXISTS`` takes none."""
    for index, expression in enumerate(filters or [], 1):
        operator, right = expression["operator"], expression.get("right")
        at = f"{path}.{index}.member.right"
        if operator in NEEDS_NO_VALUE and right is not None:
            raise refuse(at, None, f"be absent for operator {operator}", shown=False)
        if operator not in NEEDS_NO_VALUE and right is None:
            raise refuse(at, None, f"not be null for operator {operator}")


def _one(value: Mapping[str, Any]) -> tuple[str, Any]:
    kind = next(iter(value))
    return kind, value[kind]


def _matches(metadata: Mapping[str, Any], expression: Mapping[str, Any]) -> bool:
    key = expression["left"]["metadataKey"]
    operator = expression["operator"]
    present = key in metadata
    if operator == "EXISTS":
        return present
    if operator == "NOT_EXISTS":
        return not present
    if not present:
        return False
    have_kind, have = _one(metadata[key])
    want_kind, want = _one(expression["right"]["metadataValue"])
    if operator == "EQUALS_TO":
        return have_kind == want_kind and have == want
    if operator == "CONTAINS":
        if have_kind == "stringListValue" and want_kind == "stringValue":
            return want in have
        return have_kind == want_kind == "stringValue" and want in have
    if operator in ("BEFORE", "AFTER"):
        if have_kind != "dateTimeValue" or want_kind != "dateTimeValue":
            return False
        return bool(have < want if operator == "BEFORE" else have > want)
    compare = _NUMBER_COMPARISONS.get(operator)
    if compare is None or have_kind != "numberValue" or want_kind != "numberValue":
        return False
    return bool(compare(have, want))


def metadata_matches(metadata: Mapping[str, Any] | None, filters: list[dict[str, Any]] | None) -> bool:
    """Whether metadata passes every filter (they are ANDed)."""
    return all(_matches(metadata or {}, expression) for expression in filters or [])
