"""Identifiers heard right: names split into spoken words, mishearings matched to names, plain
sentences left alone, candidates never overlapping, and the recognizer's vocabulary."""

from __future__ import annotations

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from shared.core.identifiers import KnownName, NameIndex, NameMatch, spoken_form, vocabulary
from shared.core.ordinary_words import FUNCTION_WORDS, is_ordinary

CODE_NAMES = [
    "getUserById", "parseJSON", "HTTP2Server", "user_id", "README.md", "users.ts", "b64encode", "mysql_client",
    "cached_cell_len", "SecretStr", "ColorTriplet", "load_dotenv", "pydantic", "write_file", "field_validator",
    "VALIDATORS", "datetime2int", "async_client", "to_dict", "is_active", "list_users", "run_tests", "get_user",
    "open_file", "get", "run", "test", "User", "Console", "json.py", "parse", "Next", "MAX_RETRIES",
]  # fmt: skip


@pytest.fixture(scope="module")
def index() -> NameIndex:
    return NameIndex.build(KnownName(name, f"src/{name.lower()}.py") for name in CODE_NAMES)


def top(index: NameIndex, transcript: str) -> NameMatch | None:
    found = index.match(transcript)
    return found[0] if found else None


@pytest.mark.parametrize(
    ("name", "spoken"),
    [
        ("getUserById", "get user by id"),
        ("HTTP2Server", "http 2 server"),
        ("parseJSON", "parse json"),
        ("XMLHttpRequest", "xml http request"),
        ("user_id", "user id"),
        ("MAX_RETRIES_2", "max retries 2"),
        ("parse-json-body", "parse json body"),
        ("users.ts", "users ts"),
        ("__init__", "init"),
        ("base64", "base 64"),
    ],
)
def test_a_name_is_said_as_its_words(name: str, spoken: str) -> None:
    assert spoken_form(name) == spoken


@pytest.mark.parametrize(
    ("transcript", "name", "heard"),
    [
        ("get user buy id", "getUserById", "get user buy id"),
        ("now parse jason here", "parseJSON", "parse jason"),
        ("start the h t t p two server", "HTTP2Server", "h t t p two server"),
        ("start the http 2 server", "HTTP2Server", "http 2 server"),
        ("what does http to server do", "HTTP2Server", "http to server"),
        ("rename user underscore id", "user_id", "user underscore id"),
        ("open the read me file", "README.md", "read me"),
        ("open users dot ts", "users.ts", "users dot ts"),
        ("b sixty four encode", "b64encode", "b sixty four encode"),
        ("close my sequel client", "mysql_client", "my sequel client"),
        ("cashed cell len", "cached_cell_len", "cashed cell len"),
        ("secret string", "SecretStr", "secret string"),
        ("the colour triplet", "ColorTriplet", "colour triplet"),
        ("call load dot env first", "load_dotenv", "load dot env"),
        ("pie dantic", "pydantic", "pie dantic"),
        ("call right file", "write_file", "right file"),
        ("date time to int", "datetime2int", "date time to int"),
        ("open a sink client", "async_client", "a sink client"),
        ("please fix getUserById now", "getUserById", "getUserById"),
        ("see Get_User_By_Id.", "getUserById", "Get_User_By_Id"),
    ],
)
def test_mishearings_are_matched_with_the_words_heard(index: NameIndex, transcript: str, name: str, heard: str) -> None:
    found = top(index, transcript)
    assert found is not None, transcript
    assert (found.name, found.heard) == (name, heard)
    assert found.path == f"src/{name.lower()}.py"
    assert 0 < found.score <= 1


@pytest.mark.parametrize(
    "transcript",
    [
        "get the user by his id and run the tests",
        "run the tests",
        "open the file",
        "get the user",
        "read me the last error again",
        "check whether the user is active before saving",
        "list the users who signed up",
        "the console shows a json error",
        "I think the bug is in the parser",
        "this one is next",
        "user",
        "test",
        "run it",
        "",
        "...",
    ],
)
def test_plain_sentences_name_nothing(index: NameIndex, transcript: str) -> None:
    assert index.match(transcript) == []


def test_two_ordinary_words_need_a_sign_that_code_is_meant(index: NameIndex) -> None:
    assert index.match("can you list users now") == []
    assert top(index, "call list users now") == top(index, "the list users function")
    assert [match.name for match in index.match("call list users now")] == ["list_users"]
    assert [match.name for match in index.match("list_users")] == ["list_users"]
    assert [match.name for match in index.match("is active")] == ["is_active"]  # all that was said


def test_a_longer_span_wins_over_a_shorter_exact_one_inside_it(index: NameIndex) -> None:
    assert [match.name for match in index.match("the field validators")] == ["field_validator"]


def test_candidates_never_overlap_and_respect_the_limit(index: NameIndex) -> None:
    transcript = "get user buy id then parse jason and load dot env with the http 2 server"
    found = index.match(transcript, limit=10)
    assert [match.name for match in found][:2] == ["getUserById", "HTTP2Server"]  # the longest spans first
    assert {match.name for match in found} == {"getUserById", "HTTP2Server", "load_dotenv", "parseJSON"}
    assert_disjoint(transcript, found)
    assert index.match(transcript, limit=2) == found[:2]
    assert index.match(transcript, limit=0) == []


def test_an_ambiguous_phrase_goes_to_the_earlier_name() -> None:
    names = [KnownName("strip_control_codes", "a.py"), KnownName("STRIP_CONTROL_CODES", "b.py")]
    assert [match.name for match in NameIndex.build(names).match("strip control codes")] == ["strip_control_codes"]
    assert [match.name for match in NameIndex.build(names[::-1]).match("strip control codes")] == [
        "STRIP_CONTROL_CODES"
    ]


def test_the_index_counts_distinct_names() -> None:
    names = [KnownName("a_b", None), KnownName("a_b", None), KnownName("a_b", "x.py"), KnownName("cDe", None)]
    assert len(NameIndex.build(names)) == 3
    assert len(NameIndex.build([])) == 0
    assert NameIndex.build([]).match("get user by id") == []


def test_vocabulary_is_distinct_ordered_and_bounded() -> None:
    names = [
        KnownName(name, None)
        for name in ["getUserById", "User", "get_user_by_id", "HTTP2Server", "test", "pydantic", "x", "run_tests"]
    ]
    assert vocabulary(names) == ["get user by id", "http 2 server", "pydantic", "run tests"]
    assert vocabulary(names, limit=2) == ["get user by id", "http 2 server"]
    assert vocabulary(names, limit=0) == []


def assert_disjoint(transcript: str, found: list[NameMatch]) -> None:
    """Each heard phrase occurs in the transcript, and some choice of occurrences never overlaps."""

    def place(rest: list[str], taken: list[tuple[int, int]]) -> bool:
        if not rest:
            return True
        heard, start = rest[0], transcript.find(rest[0])
        while start >= 0:
            span = (start, start + len(heard))
            if all(span[1] <= other[0] or other[1] <= span[0] for other in taken) and place(rest[1:], [*taken, span]):
                return True
            start = transcript.find(heard, start + 1)
        return False

    assert place([match.heard for match in found], []), found


SYLLABLES = st.text(alphabet="bcdfgklmnprstvz", min_size=1, max_size=2).flatmap(
    lambda consonants: st.sampled_from("aeiou").map(lambda vowel: consonants[0] + vowel + consonants[1:])
)
MADE_UP_WORD = st.lists(SYLLABLES, min_size=2, max_size=3).map("".join)


def camel_case(words: list[str]) -> str:
    return words[0] + "".join(word.capitalize() for word in words[1:])


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(MADE_UP_WORD, min_size=1, max_size=3), min_size=1, max_size=8))
def test_every_distinctive_name_is_heard_from_its_own_spoken_form(names_words: list[list[str]]) -> None:
    names = [camel_case(words) for words in names_words]
    joined = ["".join(words) for words in names_words]
    assume(len(set(joined)) == len(joined))
    assume(len({value.rstrip("s") for value in joined}) == len(joined))
    assume(not any(is_ordinary(word) or word in FUNCTION_WORDS for words in names_words for word in words))
    index = NameIndex.build(KnownName(name, None) for name in names)
    for name in names:
        found = index.match(spoken_form(name))
        assert found, name
        assert (found[0].name, found[0].heard, found[0].score) == (name, spoken_form(name), 1.0)


WORDS = ["get", "user", "buy", "id", "the", "parse", "jason", "http", "two", "server", "underscore", "dot", "env"]


@settings(max_examples=100, deadline=None)
@given(st.lists(st.sampled_from([*WORDS, "load", "run", "tests", "read", "me", ","]), max_size=14), st.integers(0, 4))
def test_any_transcript_gets_disjoint_candidates_within_the_limit(words: list[str], limit: int) -> None:
    index = NameIndex.build(KnownName(name, None) for name in CODE_NAMES)
    transcript = " ".join(words)
    found = index.match(transcript, limit=limit)
    assert len(found) <= limit
    assert all(0 < match.score <= 1 and match.name in CODE_NAMES for match in found)
    assert_disjoint(transcript, found)
