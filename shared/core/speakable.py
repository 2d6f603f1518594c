"""Speakable text and on-screen cards from a model answer.

The app speaks every ``tts.speak`` text aloud, so markdown markers, code, diffs, long lists,
tables and display math must not be read out: blocks become cards (sent as an ``assistantUIPatch``)
and the speech says where they are; inline math is read as words. Reasoning the model wrote inline
(``<thinking>…</thinking>``) is neither shown nor spoken. Pure and regex-based: it runs on the
turn's hot path.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from itertools import accumulate
from typing import Literal

from shared.core.inline_reasoning import find_reasoning, pending_tag, visible, without_reasoning
from shared.core.math_speech import DISPLAY_ENVIRONMENTS, INLINE_MATH, math_source, speak_math

SHORT_LIST = 4  # lists of up to this many items are spoken, longer ones become a card
SHORT_CODE = 40  # inline code up to this long is spoken, longer is named


@dataclass(frozen=True)
class Card:
    """What the app shows; serialized camelCase in the patch."""

    type: Literal["code", "diff", "list", "math"]
    title: str
    body: str
    language: str | None = None
    file: str | None = None


@dataclass(frozen=True)
class Answer:
    display: str  # transcript text: markdown made plain, each card a "[code: Swift code]" placeholder
    speech: str  # what tts.speak says: plain prose, each card a spoken pointer
    cards: list[Card]


@dataclass
class _Seg:
    kind: str  # prose, fence, indent, diff, list, table, math
    start: int  # first line
    end: int  # line after the last
    closed: bool = True
    info: str = ""


_FENCE = re.compile(r"^\s*(?:(`{3,})([^`]*)|(~{3,})(.*))$")
_ITEM = re.compile(r"^(\s*)([-*+•]|\d{1,9}[.)])\s+(.*)$")
_LIST_LINE = re.compile(r"^(?:\s*(?:[-*+•]|\d{1,9}[.)])\s|  |\t)")  # an item or an indented continuation
_HR = re.compile(r"^\s{0,3}([-*_=])(?:\s*\1){2,}\s*$")
_HEADING = re.compile(r"^\s{0,3}#{1,6}(?:\s+(.*?))?(?:\s+#+)?\s*$")
_QUOTE = re.compile(r"^\s*(?:>\s?)+")
_TABLE_SEP = re.compile(r"^\s*\|?\s*:?-+:?\s*(?:\|\s*:?-+:?\s*)*\|?\s*$")
_DIFF_START = re.compile(r"^(?:diff --git |@@ -\d|--- \S)")
_DIFF_LINE = re.compile(r"^(?:[-+ \\]|@@|diff |index )")
_INDENT = re.compile(r"^(?: {4}|\t)")
_PARTIAL = re.compile(
    r"(?:^|\n)([ \t]*(?:`{1,2}|~{1,2}|[-*+•]|\d{1,9}[.)]?|\|.*|@@.*|diff .*|--- .*|(?: {4}|\t)\S.*"
    r"|\$|\\[a-z]*(?:\{[a-z]*\*?)?))\s*\Z"  # and what may open display math: $, \[, \begin{equation
)
# Display math opens a line: $$, \[ or \begin{equation} (and the other display environments).
_MATH_OPEN = re.compile(rf"^\s*(?:(\$\$)|(\\\[)|\\begin\{{((?:{DISPLAY_ENVIRONMENTS})\*?)\}})")
_URL = r"\bhttps?://[^\s<>`]*[^\s<>`.,;:!?)\]'\"*_]"
_URL_RE = re.compile(_URL, re.I)
_TOKEN = re.compile(
    r"(?P<ticks>`+)(?P<code>.{1,2000}?)(?P=ticks)(?!`)"
    rf"|{INLINE_MATH}"
    r"|!?\[(?P<ltext>[^\]]*)\]\((?P<lurl>[^()\s]*)(?:\s+\"[^\"]*\")?\)"
    rf"|<?(?P<url>{_URL})>?",
    re.I,
)
_EMPHASIS = [
    re.compile(r"\*\*(?=\S)(.{1,300}?)(?<=\S)\*\*"),
    re.compile(r"(?<!\w)__(?=\S)(.{1,300}?)(?<=\S)__(?!\w)"),
    re.compile(r"~~(?=\S)(.{1,300}?)(?<=\S)~~"),
    re.compile(r"(?<![\w*])\*(?=[^\s*])(.{1,300}?)(?<=[^\s*])\*(?![\w*])"),
    re.compile(r"(?<!\w)_(?=[^\s_])(.{1,300}?)(?<=[^\s_])_(?!\w)"),
]
_PATH = re.compile(r"(?<![\w.@/~-])/?(?:[\w.@+~-]+/){2,}[\w.@+-]*")
_EXTS = (
    "swift|h|c|cc|cpp|hpp|py|js|jsx|ts|tsx|json|ya?ml|toml|md|txt|sh|zsh|bash|go|rs|java|kts?|rb|php|html|css|scss|"
    "sql|xml|plist|gradle|xcconfig|entitlements|strings|storyboard|xib|pbxproj|lock|env|ini|cfg|conf|tf|proto|"
    "graphql|vue|dart|cs|lua|scala|csv|resolved"
)
_FILE = re.compile(
    rf"(?<![\w/.~@-])((?:[\w.@+~-]+/)*(?:[\w@+-][\w.@+-]*\.(?:{_EXTS})|Dockerfile|Makefile|Podfile|Gemfile))(?![\w/-])"
)
_LANGUAGES = {
    "swift": "Swift", "py": "Python", "python": "Python", "js": "JavaScript", "javascript": "JavaScript",
    "ts": "TypeScript", "typescript": "TypeScript", "json": "JSON", "yaml": "YAML", "yml": "YAML", "html": "HTML",
    "css": "CSS", "sql": "SQL", "objc": "Objective-C", "objective-c": "Objective-C", "kotlin": "Kotlin",
    "kt": "Kotlin", "go": "Go", "rust": "Rust", "rs": "Rust", "c": "C", "cpp": "C++", "c++": "C++", "java": "Java",
    "ruby": "Ruby", "rb": "Ruby", "toml": "TOML", "xml": "XML", "md": "Markdown", "markdown": "Markdown",
    "sh": "shell", "bash": "shell", "zsh": "shell", "shell": "shell", "console": "shell",
    "text": "", "txt": "", "plaintext": "", "plain": "", "output": "",
}  # fmt: skip


def split_answer(text: str) -> Answer:
    """The display text, the speech and the cards of a complete answer, in order."""
    lines = without_reasoning(text).split("\n")
    display: list[str] = []
    speech: list[str] = []
    cards: list[Card] = []
    said: set[str] = set()
    before = ""  # the prose just before a block, where a file it shows may be named
    for seg in _scan(lines):
        chunk = lines[seg.start : seg.end]
        if seg.kind == "prose":
            before = _prose(chunk, display, speech) or before
            continue
        made, before = _card(seg, chunk, before), ""
        if made is None:
            if seg.kind == "list":
                _short_list(chunk, display, speech)
            continue
        card, phrase, mass = made
        cards.append(card)
        display.append(f"[{card.type}: {card.title}]")
        if phrase in said:
            speech.append(f"There's more {phrase} on screen." if mass else f"Another {phrase} is on screen.")
        else:
            speech.append(f"I've put the {phrase} on screen." if mass else f"The {phrase} is on screen.")
        said.add(phrase)
    shown = re.sub(r"\n{3,}", "\n\n", "\n".join(display)).strip()
    return Answer(display=shown, speech=_join(speech), cards=cards)


def speakable(text: str) -> str:
    return split_answer(text).speech


def card_patch(card: Card) -> str:
    """The card as an ``assistantUIPatch`` patch: a JSON Patch appending it to ``/cards``."""
    value = {"type": card.type, "title": card.title, "language": card.language, "file": card.file, "body": card.body}
    value = {key: item for key, item in value.items() if item is not None}
    return json.dumps([{"op": "add", "path": "/cards/-", "value": value}], ensure_ascii=False, separators=(",", ":"))


def unfinished_block_start(text: str) -> int | None:
    """For text still streaming: where a block that may not be complete yet starts (an unclosed fence
    or display math, a list, table, diff or indented block nothing has followed yet, a line that may
    open one, reasoning not yet closed or a tag still arriving), so the caller neither speaks nor
    shows half of it; None when everything so far is complete."""
    reasoning = find_reasoning(text)
    limits = [at for at in (reasoning.open_at, pending_tag(text)) if at is not None]
    shown = visible(text, reasoning)
    if (start := _unfinished(shown.text)) is not None:
        limits.append(shown.raw(start))
    return min(limits, default=None)


def _unfinished(text: str) -> int | None:
    lines = text.split("\n")
    offsets = [0, *accumulate(len(line) + 1 for line in lines)]
    segs = [seg for seg in _scan(lines) if seg.kind != "prose" or any(x.strip() for x in lines[seg.start : seg.end])]
    for seg in segs:
        if seg.kind in ("fence", "math") and not seg.closed:
            return offsets[seg.start]
    if segs and segs[-1].kind in ("list", "table", "diff", "indent"):
        return offsets[segs[-1].start]
    match = _PARTIAL.search(text)
    return match.start(1) if match else None


def _scan(lines: list[str]) -> list[_Seg]:
    segs: list[_Seg] = []
    i = 0
    while i < len(lines):
        seg = _block_at(lines, i)
        if seg is not None:
            segs.append(seg)
            i = seg.end
            continue
        if segs and segs[-1].kind == "prose":
            segs[-1].end = i + 1
        else:
            segs.append(_Seg("prose", i, i + 1))
        i += 1
    return segs


def _block_at(lines: list[str], i: int) -> _Seg | None:
    line, n = lines[i], len(lines)
    if fence := _FENCE.match(line):
        mark = fence[1] or fence[3]
        info = (fence[2] if fence[1] else fence[4]).strip()
        for j in range(i + 1, n):
            close = lines[j].strip()
            if close and close == mark[0] * len(close) and len(close) >= len(mark):
                return _Seg("fence", i, j + 1, True, info)
        return _Seg("fence", i, n, False, info)
    if math := _MATH_OPEN.match(line):
        close = "$$" if math[1] else "\\]" if math[2] else f"\\end{{{math[3]}}}"
        if close in line[math.end() :]:
            return _Seg("math", i, i + 1)
        end = next((j + 1 for j in range(i + 1, n) if close in lines[j]), None)
        if end is not None:
            return _Seg("math", i, end)
        if math[3] or not line[math.end() :].strip():  # "$$ is the PID" is not math: only "$$" alone may
            return _Seg("math", i, n, False)  # open a block still being written
    if _DIFF_START.match(line) and (not line.startswith("--- ") or (i + 1 < n and lines[i + 1].startswith("+++ "))):
        return _Seg("diff", i, next((j for j in range(i, n) if not _DIFF_LINE.match(lines[j])), n))
    if "|" in line and i + 1 < n and "|" in lines[i + 1] and _TABLE_SEP.match(lines[i + 1]):
        return _Seg("table", i, next((j for j in range(i, n) if "|" not in lines[j] or _FENCE.match(lines[j])), n))
    if _ITEM.match(line) and not _HR.match(line):  # items, indented continuations, blank lines between them
        return _Seg(
            "list", i, _extent(lines, i, lambda x: _LIST_LINE.match(x) and not (_FENCE.match(x) or _HR.match(x)))
        )
    if _INDENT.match(line) and line.strip() and (i == 0 or not lines[i - 1].strip()):
        end = _extent(lines, i, _INDENT.match)
        return _Seg("indent", i, end) if sum(1 for x in lines[i:end] if x.strip()) >= 2 else None
    return None


def _extent(lines: list[str], i: int, continues: Callable[[str], object]) -> int:
    """The end of a block whose non-blank lines all continue it (blank lines inside it are bridged)."""
    end = i
    for j in range(i, len(lines)):
        if lines[j].strip():
            if not continues(lines[j]):
                break
            end = j + 1
    return end


def _prose(chunk: list[str], display: list[str], speech: list[str]) -> str:
    """Adds the lines' plain text; returns the last paragraph (raw), or "" when there is none."""
    para: list[str] = []
    last = ""
    for line in [*chunk, ""]:
        heading = _HEADING.match(line)
        if (not line.strip() or heading or _HR.match(line)) and para:
            last = " ".join(para)
            speech.append(_inline(last, True))
            para = []
        if heading:
            if heading[1]:
                display.append(_sentence(_inline(heading[1], False)))
                speech.append(_sentence(_inline(heading[1], True)))
                last = heading[1]
        elif not line.strip():
            display.append("")
        elif not _HR.match(line):
            line = _QUOTE.sub("", line)
            display.append(_inline(line, False))
            para.append(line.strip())
    display.pop()
    return last


def _short_list(chunk: list[str], display: list[str], speech: list[str]) -> None:
    items: list[str] = []
    for line in chunk:
        if item := _ITEM.match(line):
            marker = item[2] if item[2][0].isdigit() else "•"
            display.append(f"{item[1]}{marker} {_inline(item[3], False)}")
            items.append(item[3].strip())
        elif line.strip():
            display.append(_inline(line, False))
            items[-1] += " " + line.strip()
    speech.extend(_sentence(_inline(item, True)) for item in items)


def _card(seg: _Seg, chunk: list[str], before: str) -> tuple[Card, str, bool] | None:
    """The card for a block, with its spoken name and whether that is a mass noun ("code")."""
    if seg.kind == "list":
        count = sum(1 for x in chunk if _ITEM.match(x))
        if count <= SHORT_LIST:
            return None
        return Card("list", f"List ({count} items)", "\n".join(chunk)), f"list of {count} items", False
    if seg.kind == "math":
        return _math_card(chunk)
    if seg.kind == "table":
        rows = len(chunk) - 2
        noun = f"table with {rows} row{'s' * (rows != 1)}"
        return Card("list", f"Table ({rows} row{'s' * (rows != 1)})", "\n".join(chunk)), noun, False
    body_lines = chunk
    if seg.kind == "fence":  # the body is dedented by the fence's own indentation (a fence in a list item)
        indent = len(chunk[0]) - len(chunk[0].lstrip(" "))
        body_lines = [re.sub(f"^ {{0,{indent}}}", "", x) for x in chunk[1 : -1 if seg.closed else None]]
    elif seg.kind == "indent":
        body_lines = [_INDENT.sub("", x, count=1) for x in chunk]
    body = "\n".join(body_lines)
    if not body.strip():
        return None
    words = seg.info.split()
    language = words[0].lower() if words else None
    if language == "math":  # ```math, as GitHub renders it
        return Card("math", "Equation", body, "latex"), "equation", False
    header = re.search(r"^(?:\+\+\+ (?:b/)?|diff --git a/)(?!/dev/null)(\S+)", body, re.M)
    file = header[1] if header else _last_file(seg.info) or _last_file(re.split(r"(?<=[.!?])\s+", before.strip())[-1])
    if language and file and language == file.lower():  # ```main.swift
        language = file.rsplit(".", 1)[-1].lower() if "." in file else None
    name = _basename(file) if file else None
    diff = seg.kind == "diff" or language in ("diff", "patch") or (language is None and _looks_diff(body_lines))
    if diff:
        noun = f"diff of {name}" if name else "diff"
        return Card("diff", noun[0].upper() + noun[1:], body, language, file), noun, False
    key = name.rsplit(".", 1)[-1].lower() if language is None and name else language  # else by the file's extension
    spoken = _LANGUAGES.get(key or "", language if language and language[:1].isalpha() else "")
    noun = f"{spoken} {'commands' if spoken == 'shell' else 'code'}".strip() + (f" for {name}" if name else "")
    return Card("code", noun[0].upper() + noun[1:], body, language, file), noun, True


def _math_card(chunk: list[str]) -> tuple[Card, str, bool] | None:
    """Display math: the LaTeX without its $$ or \\[ \\] (an environment stays whole, as it matters)."""
    body = "\n".join(chunk).strip()
    for opening, closing in (("$$", "$$"), ("\\[", "\\]")):
        if body.startswith(opening):
            body = body[len(opening) :]
            body = (body[: -len(closing)] if body.endswith(closing) else body).strip()
    if not body:
        return None
    return Card("math", "Equation", body, "latex"), "equation", False


def _looks_diff(lines: list[str]) -> bool:
    """A unified diff: a hunk header, or only +/-/context lines with both signs."""
    lines = [x for x in lines if x.strip()]
    signs = {x[0] for x in lines}
    return any(x.startswith("@@") for x in lines) or ({"+", "-"} <= signs and all(_DIFF_LINE.match(x) for x in lines))


def _last_file(text: str) -> str | None:
    files: list[str] = _FILE.findall(text)
    return files[-1] if files else None


def _basename(path: str) -> str:
    return path.rstrip("/").rsplit("/", 1)[-1] or path


def _inline(text: str, speech: bool) -> str:
    """Inline markdown made plain; for speech, URLs and long paths are named, long code too, and
    inline math is read as words."""
    kept: list[str] = []

    def keep(token: re.Match[str]) -> str:
        if (math := math_source(token)) is not None:
            code = speak_math(math) if speech else token[0]  # the screen keeps it: apps may render it
        elif token["code"] is not None:
            code = token["code"].strip()
            if speech:
                code = _name_paths(_URL_RE.sub(lambda m: _link_name(m[0]), code))
                code = code if len(code) <= SHORT_CODE else "a code snippet"
        elif token["url"] is not None:
            code = _link_name(token["url"]) if speech else token["url"]
        elif token["ltext"]:
            code = _inline(token["ltext"], speech)
        else:
            code = _link_name(token["lurl"]) if speech else token["lurl"]
        kept.append(code)
        return f"\x00{len(kept) - 1}\x01"

    plain = _TOKEN.sub(keep, text.replace("\x00", ""))
    for pattern in _EMPHASIS:
        plain = pattern.sub(r"\1", plain)
    if speech:
        plain = _name_paths(plain)
    return re.sub(r"\x00(\d+)\x01", lambda m: kept[int(m[1])], plain)


def _link_name(url: str) -> str:
    link = re.match(r"(?:https?://(?:[^@/\s]*@)?([^/:?#\s]*))?", url, re.I)
    assert link is not None  # everything in the pattern is optional: it matches any text
    host = link[1]
    if host is None:  # a relative link
        return _basename(url) or "a link"
    return f"a link to {host.removeprefix('www.')}" if host else "a link"


def _name_paths(text: str) -> str:
    return _PATH.sub(lambda m: _basename(m[0]) if re.search(r"[^\W\d_]", m[0]) else m[0], text)


def _sentence(text: str) -> str:
    text = text.strip().rstrip(",;:")
    return text if not text or text[-1] in ".!?…" else text + "."


def _join(parts: list[str]) -> str:
    """One line of speech; parts (paragraphs, items, pointers) end as sentences; no markdown left."""
    out = ""
    for part in (p.strip() for p in parts):
        if not part:
            continue
        if out and (
            out[-1].isalnum() or (out[-1] == ":" and part.startswith(("I've put", "The ", "There's", "Another")))
        ):
            out = out.rstrip(":") + "."
        out = f"{out} {part}" if out else part
    out = _URL_RE.sub(lambda m: _link_name(m[0]), out)
    out = re.sub(r"https?://|`+|\*{2,}|~{2,}", " ", out, flags=re.I)
    return re.sub(r"\s+", " ", out).strip().lstrip("# ")
