"""The workspace's names (``workspaceNames``): what each file defines (``code_names``) and the
files' own names, most relevant first, in parts that each fit one frame.

**Which files.** The workspace's files (``workspace_files``: git's tracked and untracked-not-ignored
ones, else a walk), at most ``MAX_FILES``; a file over ``MAX_FILE_BYTES``, a binary one, a lock file
or a minified one is skipped. A file is read again only when its size or modification time changed,
so indexing again after an edit reads the edited files alone. Indexing stops at its time limit: the
files it did not reach keep their names of the last index (or have none yet) until the next one.

**Ranking.** The open file's names first, then the changed files', then all others; within each,
the names used in the most files first (``frequency``: how many files hold the identifier). A name
defined in several files is kept once, at its most relevant file. At most ``MAX_NAMES``.

**Parts.** ``names_parts`` groups the names by file (files in the order of their first name) and
cuts them into parts whose whole event is at most ``MAX_PART_BYTES`` of JSON, at most
``MAX_NAME_PARTS`` parts (the least relevant names left out when they would need more).
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
import time
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from shared.wire.protocol import make_event
from shared.wire.workspace import MAX_NAME_PARTS, MAX_NAMES, NamesOfFile, WorkspaceNames

from .code_names import IDENTIFIER, MIN_NAME, parsed_names, token_names
from .workspace_context import is_relative_path
from .workspace_files import MAX_FILES, inside, language_of, listed_files

MAX_FILE_BYTES = 512 * 1024
MAX_TOKENIZED = 300
"""Names the tokenizer keeps of one file (a file that no parser reads: text, data, configuration)."""
INDEX_SECONDS = 20.0
MAX_PART_BYTES = 30_000
"""A part's whole event as JSON, in UTF-8: under a 32 KB frame with room to spare."""
SKIPPED_SUFFIXES = frozenset(
    {
        ".png", ".jpg", ".jpeg", ".gif", ".webp", ".ico", ".icns", ".pdf", ".zip", ".gz", ".tgz", ".bz2", ".xz",
        ".7z", ".jar", ".class", ".pyc", ".o", ".a", ".so", ".dylib", ".dll", ".exe", ".woff", ".woff2", ".ttf",
        ".otf", ".mp3", ".mp4", ".mov", ".wav", ".sqlite", ".db", ".lock", ".map", ".svg", ".pbxproj", ".xcscheme",
    }
)  # fmt: skip
SKIPPED_FILES = frozenset({"package-lock.json", "pnpm-lock.yaml", "yarn.lock", "go.sum", "Package.resolved"})


@dataclass(frozen=True)
class IndexedName:
    name: str
    path: str


@dataclass(frozen=True)
class _File:
    """What one file gave, and which version of it."""

    modified: int
    size: int
    names: tuple[str, ...]
    identifiers: frozenset[str]
    tokenized: bool  # names found by the tokenizer, not by a parser: after parsed ones of the same use


class NameIndex:
    """The names of ``root``'s files, kept between indexes (``index``). ``stop`` ends an index in
    progress at its next file (the companion closing)."""

    def __init__(
        self,
        root: Path,
        *,
        max_files: int = MAX_FILES,
        max_file_bytes: int = MAX_FILE_BYTES,
        time_limit: float = INDEX_SECONDS,
    ) -> None:
        self.root = root.resolve()
        self.max_files = max_files
        self.max_file_bytes = max_file_bytes
        self.time_limit = time_limit
        self.stop = threading.Event()
        self.complete = False  # whether the last index reached every file
        self._files: dict[str, _File] = {}
        self._frequency: Counter[str] = Counter()  # identifier -> the files that hold it

    def index(
        self, *, open_file: str | None = None, changed: Sequence[str] = (), files: Sequence[str] | None = None
    ) -> list[IndexedName]:
        """The names, most relevant first (see the module's docstring). ``files`` (the workspace's
        files, relative) is listed when not given."""
        listed = listed_files(self.root, limit=self.max_files) if files is None else list(files)[: self.max_files]
        # the open and changed files first (the time limit reaches them first), even when git ignores them
        first = [path for path in map(self._file, (open_file, *changed)) if path is not None]
        order = list(dict.fromkeys([*first, *listed]))[: self.max_files]
        self._read(order)
        tier = {path: 1 for path in changed} | ({open_file: 0} if open_file else {})
        return self._ranked(order, tier)

    def _file(self, path: str | None) -> str | None:
        """``path`` when it is a file of the folder (relative), else None."""
        relative = inside(self.root, path) if path else None
        return relative if relative is not None and (self.root / relative).is_file() else None

    def _read(self, paths: list[str]) -> None:
        deadline = time.monotonic() + self.time_limit
        self.complete = True
        for path in set(self._files) - set(paths):
            self._forget(path)
        for path in paths:
            if self.stop.is_set() or time.monotonic() > deadline:
                self.complete = False
                return
            try:
                status = os.stat(self.root / path)
            except OSError:
                self._forget(path)
                continue
            known = self._files.get(path)
            if known is not None and (known.modified, known.size) == (status.st_mtime_ns, status.st_size):
                continue
            self._forget(path)
            found = self._names_of(path, status.st_size)
            self._files[path] = _File(status.st_mtime_ns, status.st_size, *found)
            self._frequency.update(found[1])

    def _names_of(self, path: str, size: int) -> tuple[tuple[str, ...], frozenset[str], bool]:
        if size > self.max_file_bytes or _skipped(path):
            return (), frozenset(), False
        try:
            with (self.root / path).open("rb") as source:
                data = source.read(self.max_file_bytes + 1)
        except OSError:
            return (), frozenset(), False
        if len(data) > self.max_file_bytes or b"\0" in data[:8192]:
            return (), frozenset(), False
        text = data.decode("utf-8", errors="replace")
        identifiers = frozenset(IDENTIFIER.findall(text))
        parsed = parsed_names(text, language_of(path))
        if parsed is None:  # a data file full of keys must not crowd out the code's names
            return tuple(token_names(text)[:MAX_TOKENIZED]), identifiers, True
        return tuple(parsed), identifiers, False

    def _forget(self, path: str) -> None:
        known = self._files.pop(path, None)
        if known is not None:
            self._frequency.subtract(known.identifiers)

    def _ranked(self, order: list[str], tier: dict[str, int]) -> list[IndexedName]:
        candidates: list[tuple[int, int, bool, int, int, str, str]] = []
        for position, path in enumerate(order):
            known = self._files.get(path)
            if known is None or not is_relative_path(path):
                continue
            level = tier.get(path, 2)
            file_name = PurePosixPath(path).name
            named = [(file_name, PurePosixPath(path).stem)] if len(file_name) >= MIN_NAME else []
            for rank, (name, used_as) in enumerate([*named, *((name, name) for name in known.names)]):
                used = -self._frequency[used_as]
                candidates.append((level, used, known.tokenized and rank >= len(named), position, rank, name, path))
        candidates.sort()
        kept: dict[str, IndexedName] = {}
        for *_, name, path in candidates:
            if name not in kept:
                kept[name] = IndexedName(name, path)
                if len(kept) >= MAX_NAMES:
                    break
        return list(kept.values())


def _skipped(path: str) -> bool:
    name = PurePosixPath(path).name
    return name in SKIPPED_FILES or PurePosixPath(name).suffix.lower() in SKIPPED_SUFFIXES or ".min." in name


def index_names(root: Path, *, open_file: str | None = None, changed: Sequence[str] = ()) -> list[IndexedName]:
    """The names of ``root`` at once (an index kept for no later one)."""
    return NameIndex(root).index(open_file=open_file, changed=changed)


def set_id_of(names: Sequence[IndexedName]) -> str:
    """An id for a set of names that changes when they do (the same names, the same id)."""
    digest = hashlib.sha256()
    for entry in names:
        digest.update(f"{entry.path}\0{entry.name}\n".encode())
    return f"n-{digest.hexdigest()[:20]}"


def names_parts(names: Sequence[IndexedName], set_id: str) -> list[WorkspaceNames]:
    """``names`` as the parts of the set ``set_id``: each part's event at most ``MAX_PART_BYTES`` of
    JSON; together every name, unless they would need more than ``MAX_NAME_PARTS`` parts (then the
    least relevant are left out)."""
    room = MAX_PART_BYTES - _size(WorkspaceNames(set_id=set_id, part=0, parts=1)) - 16  # 16: part numbers
    parts: list[list[NamesOfFile]] = [[]]
    used = 0
    for path, group in _by_file(names):
        while group:
            taken, size = _fitting(path, group, room - used - 1)
            if not taken:
                if not parts[-1]:
                    group = group[1:]  # one name bigger than a part: it cannot be sent
                    continue
                if len(parts) == MAX_NAME_PARTS:
                    return _numbered(parts, set_id)
                parts.append([])
                used = 0
                continue
            parts[-1].append(NamesOfFile(path=path, names=tuple(taken)))
            used += size + 1
            group = group[len(taken) :]
    return _numbered(parts, set_id)


def _by_file(names: Sequence[IndexedName]) -> Iterable[tuple[str, list[str]]]:
    groups: dict[str, list[str]] = {}
    for entry in names:
        groups.setdefault(entry.path, []).append(entry.name)
    return groups.items()


def _fitting(path: str, group: list[str], room: int) -> tuple[list[str], int]:
    """The first names of ``group`` whose ``{"path", "names"}`` takes at most ``room`` bytes."""
    size = len(_json({"path": path, "names": []}))
    taken: list[str] = []
    for name in group:
        more = len(_json(name)) + (1 if taken else 0)
        if size + more > room:
            break
        taken.append(name)
        size += more
    return taken, size


def _numbered(parts: list[list[NamesOfFile]], set_id: str) -> list[WorkspaceNames]:
    count = len(parts)
    return [WorkspaceNames(set_id=set_id, part=n, parts=count, files=tuple(files)) for n, files in enumerate(parts)]


def _size(part: WorkspaceNames) -> int:
    return len(make_event(part).to_json().encode("utf-8"))


def _json(value: object) -> bytes:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
