"""Identifiers heard right: the phrases of a final transcript that may name identifiers of the
person's code base ("get user buy id" for ``getUserById``, "parse jason" for ``parseJSON``, "h t t p
two server" for ``HTTP2Server``, "user underscore id" for ``user_id``, "the read me file" for ``README.md``).

A name is said as its words (``spoken_form``). Both sides are brought to canonical words: lower case,
spelled numbers as digits ("sixty four" = ``64``), spelled letters run together ("h t t p" = ``http``),
spoken separators dropped ("underscore", "dot", "dash"), a recognizer's usual confusions undone
("buy" = "by", "jason" = "json", "sequel" = "sql", "cash" = "cache", "cue" = "queue") and British
spellings made American ("colour", "serialise"). A name is also said with its short words in full
("secret string" for ``SecretStr``), a file without its extension ("users" for ``users.ts``), and 2 and
4 as "to" and "for". Words are compared joined ("data class" = ``dataclass``), so a split or merged word
costs nothing.

Every run of 1 to ``MAX_SPAN`` words of the transcript is a candidate span. A span matches a name
exactly (joined words equal), loosely (equal but for plural s) or phonetically (metaphone keys equal,
spelling close), or fuzzily (``rapidfuzz`` ratio of the joined words and of their metaphone keys, among
the names whose keys begin alike, so a span meets few names). Plain English must not look like code:

* a span with a function word ("the", "to", "his") matches only a name with that word (``to_dict``),
  or a name it spells exactly with another word ("my sequel" = ``mysql``);
* a name made only of ordinary words (``ordinary_words``: ``run_tests``, ``list_users``, ``README``)
  matches 1 or 2 words only with a cue that code is meant: a separator said or written ("user
  underscore id", ``user_id``), camel case, a word such as "function", "call" or "open" next to it, or
  nothing else said; a single ordinary word never matches alone, nor does a generic term ("json");
* a fuzzy match needs a word in the span that is not ordinary.

Each span keeps its best name (the earlier name on a tie: names come most relevant first); spans are
taken best first, a longer span before a shorter one almost as good, and never overlap. Pure: no I/O.
"""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from shared.core.ordinary_words import FUNCTION_WORDS, TECH_WORDS, is_ordinary, words_of

MAX_SPAN = 6  # words of the transcript one name may take
THRESHOLD = 0.85  # a fuzzy match's score below this is no candidate
EXACT, LOOSE, PHONETIC = 1.0, 0.96, 0.92  # scores of the exact kinds of match
ALIAS = 0.97  # a file's stem ("users" for users.ts) or a digit said as a word ("http to server")
TEXT_WEIGHT = 0.55  # a fuzzy score: this much the joined words' ratio, the rest the metaphone keys'
MIN_TEXT, MIN_SOUND = 0.7, 0.75  # each ratio of a fuzzy match is at least this
MIN_TEXT_ONE_WORD = 0.8  # and the spelling's ratio when one transcript word is matched
SPAN_BONUS = 0.06  # ranking: a span's score counts this much more per word it covers
SHORTEST = 4  # letters of a name that one transcript word may match (a spelled acronym: 3)

# a name's words: acronym runs, capitalised or lower-case words, digit runs
_NAME_WORDS = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+")
# a transcript's written words, with inner apostrophes (don't, user's)
_WRITTEN = re.compile(r"[A-Za-z0-9]+(?:'[A-Za-z]+)*")
_WRITTEN_JOINERS = frozenset({"_", "__", ".", "-", "::", "/", "->", "#"})  # users.ts, user_id, a::b
_SENTENCE_BREAK = re.compile(r"[,;:?!()\[\]\"]|\.\s|\.$")

_NUMBERS = {
    word: value
    for value, word in enumerate(
        words_of(
            "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
            "seventeen eighteen nineteen"
        )
    )
}
_TENS = {
    word: 10 * value for value, word in enumerate(words_of("twenty thirty forty fifty sixty seventy eighty ninety"), 2)
}
_SEPARATORS = frozenset({"underscore", "underscores", "dash", "hyphen", "dot", "dunder", "slash"})
_SEPARATOR_PAIRS = {("under", "score"), ("double", "underscore"), ("under", "scores")}
# what recognizers write for words of code (both sides are mapped, so a name with "buy" is "by" too)
CONFUSIONS = {
    "buy": "by", "bye": "by", "jason": "json", "jayson": "json", "sequel": "sql", "cash": "cache",
    "cue": "queue", "q": "queue", "sink": "sync", "pie": "py", "earl": "url", "oath": "auth",
    "innit": "init", "yamel": "yaml", "yammel": "yaml", "okay": "ok", "cashed": "cached",
}  # fmt: skip
_DIGIT_WORDS = {"2": "to", "4": "for"}  # "http to server" for HTTP2Server
# British spellings (stems, without the endings below) and how code spells them
_BRITISH = {
    "colour": "color", "centre": "center", "behaviour": "behavior", "favourite": "favorite",
    "neighbour": "neighbor", "honour": "honor", "labour": "labor", "flavour": "flavor", "grey": "gray",
    "licence": "license", "catalogue": "catalog", "dialogue": "dialog", "analogue": "analog",
    "serial": "serial", "normal": "normal", "initial": "initial", "final": "final", "visual": "visual",
    "local": "local", "capital": "capital", "custom": "custom", "optim": "optim", "minim": "minim",
    "maxim": "maxim", "organ": "organ", "recogn": "recogn", "real": "real", "author": "author",
    "categor": "categor", "priorit": "priorit", "summar": "summar", "synchron": "synchron",
    "token": "token", "sanit": "sanit", "styl": "styl", "util": "util", "memo": "memo", "anal": "anal",
    "standard": "standard", "special": "special", "emphas": "emphas", "apolog": "apolog",
}  # fmt: skip
_BRITISH_ENDINGS = (
    "ise", "ised", "ises", "iser", "isers", "ising", "isation", "isations", "yse", "ysed", "yser", "ysing",
    "s",
)  # fmt: skip
# a name's short words said in full ("secret string" for SecretStr, "cell length" for cell_len)
ABBREVIATIONS = {
    "str": "string", "len": "length", "obj": "object", "attr": "attribute", "attrs": "attributes",
    "args": "arguments", "arg": "argument", "env": "environment", "var": "variable", "msg": "message",
    "req": "request", "ctx": "context", "conn": "connection", "recv": "receive", "num": "number",
    "idx": "index", "err": "error", "exc": "exception", "src": "source", "dir": "directory",
    "param": "parameter", "params": "parameters", "val": "value", "func": "function", "fn": "function",
    "cls": "class", "cfg": "config", "prev": "previous", "tmp": "temp", "info": "information",
}  # fmt: skip
_REPLACEABLE = frozenset(_DIGIT_WORDS) | frozenset(ABBREVIATIONS)
# a file's extension: said or not, it does not make the name distinctive ("markup dot py")
_EXTENSIONS = frozenset(words_of("py pyi ts tsx js jsx json md txt yaml yml toml cfg ini html css swift kt go rs"))
# words next to a phrase that say it is code ("the get user function", "call send file", "open users ts")
_CUES_BEFORE = frozenset(
    words_of(
        "function method class variable constant module call calls calling called named rename import imports "
        "invoke define decorator property attribute field enum exception fixture open show find use using fix "
        "explain delete remove extend extends subclass implement edit debug does"
    )
)
_CUES_AFTER = frozenset(
    words_of(
        "function functions method methods class classes variable constant module file helper decorator "
        "property attribute field enum exception constructor call fixture type types"
    )
)


@dataclass(frozen=True)
class KnownName:
    name: str  # as written in code: getUserById, user_id, HTTP2Server, users.ts
    path: str | None  # the file it is in (relative), or None


@dataclass(frozen=True)
class NameMatch:
    heard: str  # the words of the transcript that matched, as the transcript has them
    name: str
    path: str | None
    score: float  # 0..1, higher is surer


def _name_words(name: str) -> list[str]:
    return [word.lower() for word in _NAME_WORDS.findall(name)]


def spoken_form(name: str) -> str:
    """The words a person says for a name: ``HTTP2Server`` -> "http 2 server", ``users.ts`` -> "users ts"."""
    return " ".join(_name_words(name))


def _american(word: str) -> str:
    """A British spelling a recognizer may write, as code spells it: colour = color, serialise = serialize."""
    if word in _BRITISH:
        return _BRITISH[word]
    for ending in _BRITISH_ENDINGS:
        stem = word.removesuffix(ending)
        if stem != word and stem in _BRITISH:
            return _BRITISH[stem] + ending.replace("is", "iz").replace("ys", "yz")
    return word


def _loose(words: Sequence[str]) -> str:
    return "".join(word[:-1] if len(word) > 3 and word.endswith("s") else word for word in words)


def _sound(joined: str) -> str:
    import jellyfish  # here, not at the top: the handlers that never match names do not load it

    return jellyfish.metaphone(joined) if joined else ""


class _Form(NamedTuple):
    """One way a name is said: its canonical words, joined, loose and as sounds."""

    name: int  # index into the index's names
    words: tuple[str, ...]
    joined: str
    loose: str
    sound: str
    ordinary: bool  # every word ordinary English
    weight: float  # 1, or ALIAS for a stem or a digit said as a word


def _forms(index: int, known: KnownName) -> list[_Form]:
    words = [CONFUSIONS.get(word, word) for word in _name_words(known.name)]
    if not words:
        return []
    variants: list[tuple[list[str], float]] = [(words, 1.0)]
    extension = _extension(known.name, words)
    if extension and len(words) > 1:
        variants.append((words[:-1], ALIAS))
    if not _REPLACEABLE.isdisjoint(words):
        for replacements in (_DIGIT_WORDS, ABBREVIATIONS):
            for said, weight in list(variants):
                if not replacements.keys().isdisjoint(said):
                    variants.append(([replacements.get(word, word) for word in said], ALIAS * weight))
    forms = []
    for said, weight in variants:
        joined = "".join(said)
        telling = said[:-1] if extension and said[-1] == extension else said
        ordinary = all(is_ordinary(word) or word.isdigit() or len(word) == 1 for word in telling)
        forms.append(_Form(index, tuple(said), joined, _loose(said), _sound(joined), ordinary, weight))
    return forms


def _extension(name: str, words: list[str]) -> str:
    """The file extension that is the name's last word (``py`` of users.py), or "" (a.b.ClassName)."""
    stem, dot, extension = name.rpartition(".")
    extension = extension.lower()
    if not (dot and stem and extension == words[-1]):
        return ""
    return extension if extension in _EXTENSIONS or (len(extension) <= 4 and extension.isalpha()) else ""


@dataclass
class _Token:
    """A word of the transcript, canonical, with where it is in the transcript."""

    word: str
    start: int
    end: int
    joined_before: bool = False  # written against the previous word (user_id, getUser) or a separator said
    break_before: bool = False  # punctuation between it and the previous word
    spelled: bool = False  # letters said one by one ("h t t p")
    said_before: str = ""  # the separator words said between it and the previous word ("dot")
    function: bool = False  # a function word, or a number said as one ("this one" = 1)


def _written_tokens(transcript: str) -> list[_Token]:
    """The transcript's words as written, lower case, camel case and digits split (getUserById, http2)."""
    text = transcript.replace("\u2019", "'")
    tokens: list[_Token] = []
    previous_end = None
    for chunk in _WRITTEN.finditer(text):
        gap = text[previous_end : chunk.start()] if previous_end is not None else ""
        joined = gap in _WRITTEN_JOINERS
        broken = bool(_SENTENCE_BREAK.search(gap)) and not joined
        previous_end = chunk.end()
        written = chunk.group()
        if "'" in written:
            tokens.append(_Token(written.replace("'", "").lower(), chunk.start(), chunk.end(), joined, broken))
            continue
        for number, part in enumerate(_NAME_WORDS.finditer(written)):
            tokens.append(
                _Token(
                    part.group().lower(),
                    chunk.start() + part.start(),
                    chunk.start() + part.end(),
                    joined_before=joined if number == 0 else True,
                    break_before=broken if number == 0 else False,
                )
            )
    return tokens


def _below_hundred(tokens: list[_Token], index: int) -> tuple[int, int] | None:
    """(value, words used) of a spelled number below 100 at ``index``: "sixty four", "twelve"."""
    word = tokens[index].word if index < len(tokens) else ""
    if word in _TENS:
        unit = _NUMBERS.get(tokens[index + 1].word, 0) if index + 1 < len(tokens) else 0
        return (_TENS[word] + unit, 2) if 0 < unit < 10 else (_TENS[word], 1)
    return (_NUMBERS[word], 1) if word in _NUMBERS else None


def _spelled_number(tokens: list[_Token], index: int) -> tuple[int, int] | None:
    """(value, words used) of a spelled number at ``index``: "two hundred and fifty six" = 256."""
    first = _below_hundred(tokens, index)
    if first is None:
        return None
    value, used = first
    if 0 < value < 10 and index + used < len(tokens) and tokens[index + used].word == "hundred":
        value, used = value * 100, used + 1
        rest_at = index + used + (1 if index + used < len(tokens) and tokens[index + used].word == "and" else 0)
        rest = _below_hundred(tokens, rest_at)
        if rest is not None:
            value, used = value + rest[0], rest_at - index + rest[1]
    return value, used


def _spelled_numbers(tokens: list[_Token]) -> list[_Token]:
    """Spelled numbers as digits ("two fifty six" = 2 56, said together as 256 when joined)."""
    result: list[_Token] = []
    index = 0
    while index < len(tokens):
        number = _spelled_number(tokens, index)
        if number is None:
            result.append(tokens[index])
            index += 1
            continue
        value, used = number
        first, last = tokens[index], tokens[index + used - 1]
        result.append(_Token(str(value), first.start, last.end, first.joined_before, first.break_before))
        result[-1].function = used == 1 and first.word in FUNCTION_WORDS
        index += used
    return result


def _spoken_tokens(transcript: str) -> list[_Token]:
    """The transcript's canonical words: spelled numbers and letters joined, separators said dropped
    (they join their neighbours), confusions undone."""
    tokens = _spelled_numbers(_written_tokens(transcript))
    words: list[_Token] = []
    separators = ""
    index = 0
    while index < len(tokens):
        token = tokens[index]
        pair = (token.word, tokens[index + 1].word) if index + 1 < len(tokens) else None
        if pair in _SEPARATOR_PAIRS or token.word in _SEPARATORS:
            separators += "".join(pair) if pair in _SEPARATOR_PAIRS and pair else token.word
            index += 2 if pair in _SEPARATOR_PAIRS else 1
            continue
        index += 1
        if separators and words and not token.break_before:
            token.joined_before = True
            token.said_before = separators
        separators = ""
        previous = words[-1] if words else None
        letter = len(token.word) == 1 and token.word.isalpha()
        if letter and previous is not None and _is_letter(previous) and not token.break_before:
            words[-1] = _Token(
                previous.word + token.word,
                previous.start,
                token.end,
                previous.joined_before,
                previous.break_before,
                True,
            )
        else:
            words.append(token)
    for word in words:
        if not word.spelled:
            word.word = CONFUSIONS.get(word.word) or _american(word.word)
    return words


def _is_letter(token: _Token) -> bool:
    """A letter said alone, or a run of them ("h t t p")."""
    return token.spelled or (len(token.word) == 1 and token.word.isalpha())


@dataclass
class _Bucket:
    """Forms whose sounds begin alike, by joined length (a fuzzy match looks at a length window)."""

    lengths: list[int] = field(default_factory=list)
    joined: list[str] = field(default_factory=list)
    forms: list[_Form] = field(default_factory=list)


class _Span(NamedTuple):
    """Transcript words ``start`` to ``end`` (exclusive) and what is known of them."""

    start: int
    end: int
    words: tuple[str, ...]
    joined: str
    said_joined: str  # with the separators said inside kept as words ("load dot env" = loaddotenv)
    loose: str  # joined without plural s
    functions: frozenset[str]  # its function words
    plain: bool  # every word ordinary
    cue: bool  # something says code is meant


class NameIndex:
    """Known names, indexed for matching transcripts (``build``, then ``match`` per transcript)."""

    def __init__(self, names: list[KnownName], forms: list[_Form]) -> None:
        self._names = names
        self._exact: dict[str, list[_Form]] = {}
        self._loose: dict[str, list[_Form]] = {}
        self._sounds: dict[str, list[_Form]] = {}
        self._buckets: dict[str, _Bucket] = {}
        self._words = frozenset(word for form in forms for word in form.words)  # every word of a name
        by_prefix: dict[str, list[_Form]] = {}
        for form in forms:
            self._exact.setdefault(form.joined, []).append(form)
            self._loose.setdefault(form.loose, []).append(form)
            if len(form.sound) >= 3:
                self._sounds.setdefault(form.sound, []).append(form)
            if not form.ordinary and len(form.sound) >= 2:
                by_prefix.setdefault(form.sound[:2], []).append(form)
        for prefix, members in by_prefix.items():
            members.sort(key=lambda form: len(form.joined))
            self._buckets[prefix] = _Bucket(
                [len(form.joined) for form in members], [form.joined for form in members], members
            )

    @classmethod
    def build(cls, names: Iterable[KnownName]) -> NameIndex:
        """Index names, most relevant first (an ambiguous phrase goes to the earlier name)."""
        kept = list(dict.fromkeys(names))
        forms = [form for index, known in enumerate(kept) for form in _forms(index, known)]
        return cls(kept, forms)

    def __len__(self) -> int:
        return len(self._names)

    def match(self, transcript: str, limit: int = 5) -> list[NameMatch]:
        """Names the transcript may say, best first: at most one per span, spans never overlapping."""
        if limit <= 0:
            return []
        tokens = _spoken_tokens(transcript)
        found: list[tuple[float, int, int, _Form]] = []
        for span in _spans(tokens):
            best = self._best_form(span)
            if best is not None:
                found.append((best[0], span.start, span.end, best[1]))
        # a longer span outranks a shorter one almost as good inside it ("field validators" over "validators")
        found.sort(key=lambda item: (-(item[0] + SPAN_BONUS * (item[2] - item[1])), item[1], item[3].name))
        taken: list[tuple[int, int]] = []
        matches: list[NameMatch] = []
        for score, start, end, form in found:
            if any(start < other_end and other_start < end for other_start, other_end in taken):
                continue
            taken.append((start, end))
            known = self._names[form.name]
            heard = transcript[tokens[start].start : tokens[end - 1].end]
            matches.append(NameMatch(heard, known.name, known.path, round(score, 3)))
            if len(matches) == limit:
                break
        return matches

    def _best_form(self, span: _Span) -> tuple[float, _Form] | None:
        """The span's best name and its score, or None."""
        scored: list[tuple[float, _Form]] = []
        for form in self._exact.get(span.joined, []):
            scored.append((EXACT * form.weight, form))
        if span.said_joined != span.joined:
            for form in self._exact.get(span.said_joined, []):
                scored.append((EXACT * form.weight, form))
        if span.functions <= self._words:  # else only a name spelled alike may match ("my sequel")
            for form in self._loose.get(span.loose, []):
                scored.append((LOOSE * form.weight, form))
            sound = _sound(span.joined)
            for form in self._sounds.get(sound, []) if len(sound) >= 3 else []:
                fuzzy = _fuzzy_score(span, sound, form)  # sounding alike is not enough: "reader", "writer"
                if fuzzy is not None:
                    scored.append((min(PHONETIC, fuzzy) * form.weight, form))
            if not span.plain and not scored:
                scored.extend(self._fuzzy(span, sound))
        kept = [(score, form) for score, form in scored if _allowed(span, form)]
        if not kept:
            return None
        return max(kept, key=lambda item: (item[0], -item[1].name))

    def _fuzzy(self, span: _Span, sound: str) -> list[tuple[float, _Form]]:
        """Forms close to the span in spelling and sound, among those whose sounds begin alike."""
        bucket = self._buckets.get(sound[:2])
        if bucket is None:
            return []
        length = len(span.joined)
        low = bisect_left(bucket.lengths, int(length * MIN_TEXT / (2 - MIN_TEXT)))
        high = bisect_right(bucket.lengths, int(length * (2 - MIN_TEXT) / MIN_TEXT) + 1)
        if low >= high:
            return []
        from rapidfuzz import fuzz, process

        found = process.extract(
            span.joined, bucket.joined[low:high], scorer=fuzz.ratio, limit=3, score_cutoff=MIN_TEXT * 100
        )
        scored = []
        for _, _, position in found:
            form = bucket.forms[low + position]
            score = _fuzzy_score(span, sound, form)
            if score is not None:
                scored.append((score * form.weight, form))
        return scored


def _spans(tokens: list[_Token]) -> Iterable[_Span]:
    """Every run of 1 to ``MAX_SPAN`` words not broken by punctuation, with what is known of it."""
    count = len(tokens)
    ordinary = [is_ordinary(token.word) or token.word.isdigit() for token in tokens]
    function = [token.function or token.word in FUNCTION_WORDS for token in tokens]
    loose = [_loose((token.word,)) for token in tokens]
    cue_after = [token.word in _CUES_AFTER and not token.break_before for token in tokens] + [False]
    for start in range(count):
        cue_before = start > 0 and tokens[start - 1].word in _CUES_BEFORE and not tokens[start].break_before
        words: tuple[str, ...] = ()
        joined = said_joined = loosely = ""
        plain, joined_inside, content = True, False, 0
        for end in range(start + 1, min(count, start + MAX_SPAN) + 1):
            token = tokens[end - 1]
            if end - start > 1:
                if token.break_before:
                    break
                joined_inside = joined_inside or token.joined_before
                said_joined += token.said_before
            words += (token.word,)
            joined += token.word
            said_joined += token.word
            loosely += loose[end - 1]
            plain = plain and ordinary[end - 1]
            content += not function[end - 1]
            if not content or len(joined) < 2:
                continue  # function words alone ("in it", "to do") name nothing
            cue = joined_inside or cue_before or cue_after[end] or (start == 0 and end == count)  # or all that was said
            functions = frozenset(word for word, said in zip(words, function[start:end], strict=True) if said)
            yield _Span(start, end, words, joined, said_joined, loosely, functions, plain, cue)


def _allowed(span: _Span, form: _Form) -> bool:
    """Whether plain English could say the span without meaning the name (then it is no candidate)."""
    spelled_alike = span.joined == form.joined or span.said_joined == form.joined
    if span.functions - set(form.words) and not spelled_alike:
        return False
    if len(span.words) == 1:  # a distinctive word, spelled close to a distinctive name
        word = span.words[0]
        if span.plain or form.ordinary or (len(form.words) == 1 and form.words[0] in TECH_WORDS):
            return False
        if word != form.joined and _ratio(word, form.joined) < MIN_TEXT_ONE_WORD:
            return False
        return len(form.joined) >= SHORTEST or (len(form.joined) == 3 and word == form.joined)
    if form.ordinary:
        return len(span.words) >= 3 or span.cue
    return True


def _fuzzy_score(span: _Span, sound: str, form: _Form) -> float | None:
    text = _ratio(span.joined, form.joined)
    heard = _ratio(sound, form.sound)
    if text < MIN_TEXT or heard < MIN_SOUND:
        return None
    score = TEXT_WEIGHT * text + (1 - TEXT_WEIGHT) * heard
    return score if score >= THRESHOLD else None


def _ratio(first: str, second: str) -> float:
    from rapidfuzz import fuzz

    return fuzz.ratio(first, second) / 100


def vocabulary(names: Sequence[KnownName], limit: int = 100) -> list[str]:
    """Phrases for a recognizer's custom vocabulary: the names' spoken forms, in the given order
    (most relevant first), each once, without single ordinary words; at most ``limit``."""
    phrases: dict[str, None] = {}
    for known in names:
        if len(phrases) >= limit:
            break
        said = spoken_form(known.name)
        words = said.split()
        if not words or (len(words) == 1 and (is_ordinary(words[0]) or len(words[0]) < 3)):
            continue
        phrases.setdefault(said, None)
    return list(phrases)
