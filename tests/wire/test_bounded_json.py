"""The bounded JSON reader: one error type for anything refused, everything within bounds read."""

from __future__ import annotations

import contextlib
import json
import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shared.wire.bounded_json import MAX_NUMBER_CHARS, JsonRefused, loads, nesting_depth

DEPTH = 8


def nested_lists(depth: int) -> str:
    return "[" * depth + "]" * depth


def nested_objects(depth: int) -> str:
    return '{"a":' * (depth - 1) + "{}" + "}" * (depth - 1)


def depth_of(value: Any) -> int:
    if isinstance(value, dict):
        return 1 + max((depth_of(item) for item in value.values()), default=0)
    if isinstance(value, list):
        return 1 + max((depth_of(item) for item in value), default=0)
    return 0


scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**60), max_value=10**60)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text()
)
documents = st.recursive(
    scalars,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=30,
).filter(lambda value: depth_of(value) <= DEPTH)


@given(st.text(max_size=400))
@settings(max_examples=400)
def test_arbitrary_text_is_read_or_refused_with_the_one_error(text: str) -> None:
    with contextlib.suppress(JsonRefused):
        loads(text, max_depth=DEPTH)


@given(st.binary(max_size=200))
def test_arbitrary_bytes_are_read_or_refused_with_the_one_error(data: bytes) -> None:
    with contextlib.suppress(JsonRefused):
        loads(data, max_depth=DEPTH)


@given(st.lists(st.sampled_from(list('[]{}",:\\0123456789.eE-+ abcdefnrstlu')), max_size=300).map("".join))
@settings(max_examples=400)
def test_json_like_noise_is_read_or_refused_with_the_one_error(text: str) -> None:
    try:
        value = loads(text, max_depth=DEPTH)
    except JsonRefused:
        return
    assert depth_of(value) <= DEPTH


@given(documents, st.booleans())
@settings(max_examples=300)
def test_every_bounded_document_is_read_back_as_written(value: Any, compact: bool) -> None:
    text = json.dumps(value, separators=(",", ":") if compact else None)
    assert loads(text, max_depth=DEPTH) == value
    assert loads(text.encode(), max_depth=DEPTH) == value
    assert nesting_depth(text) == depth_of(value)


@pytest.mark.parametrize("text", [nested_lists(DEPTH), nested_objects(DEPTH), '{"a":[[{"b":[{}]}]]}'])
def test_the_depth_is_inclusive(text: str) -> None:
    loads(text, max_depth=DEPTH)


@pytest.mark.parametrize("depth", [DEPTH + 1, 1_000, 100_000])
def test_deeper_is_refused_before_it_is_parsed(depth: int) -> None:
    for text in (nested_lists(depth), nested_objects(depth), nested_lists(depth)[:-1]):
        with pytest.raises(JsonRefused, match=f"deeper than {DEPTH} levels") as refused:
            loads(text, max_depth=DEPTH)
        assert refused.value.bound == "depth"


def test_brackets_inside_strings_do_not_count() -> None:
    text = json.dumps({"a": "[[[[[[[[[[[[[[{{{{{{{{{{{{", "b": ['\\"[[[[[[[[[[[[[[[[']})
    assert nesting_depth(text) == 2
    assert loads(text, max_depth=2)["a"].startswith("[[[")


@pytest.mark.parametrize("literal", ["1" * (MAX_NUMBER_CHARS + 1), "1" * 5_000, "-" + "9" * 100, "0." + "1" * 99])
def test_a_long_number_is_refused(literal: str) -> None:
    with pytest.raises(JsonRefused, match="number") as refused:
        loads(f'{{"title": {literal}}}', max_depth=DEPTH)
    assert refused.value.bound == "number"


def test_the_longest_number_is_read() -> None:
    assert loads("9" * MAX_NUMBER_CHARS, max_depth=DEPTH) == int("9" * MAX_NUMBER_CHARS)
    assert math.isclose(loads("0." + "1" * (MAX_NUMBER_CHARS - 2), max_depth=DEPTH), 0.1111111111111111)


@pytest.mark.parametrize("text", ["NaN", "Infinity", "-Infinity", "[1e999]", '{"a": -1e400}'])
def test_non_finite_numbers_are_refused(text: str) -> None:
    with pytest.raises(JsonRefused):
        loads(text, max_depth=DEPTH)


@pytest.mark.parametrize("text", ["", "{", '{"a": }', '"unterminated', '"\\', b"\xff\xfe", "[1,]", "{'a': 1}"])
def test_text_that_is_not_json_is_refused_with_no_bound(text: str | bytes) -> None:
    with pytest.raises(JsonRefused) as refused:
        loads(text, max_depth=DEPTH)
    assert refused.value.bound is None
