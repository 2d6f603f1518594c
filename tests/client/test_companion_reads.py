"""What the companion's tools read: never a whole big file (bounded reads for openFile, readFile,
search and an edit), and git over the workspace's folder only when it sits inside a bigger
repository."""

from __future__ import annotations

import asyncio
import subprocess
import tracemalloc
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from voiceide_client.companion.workspace import CompanionWorkspace
from voiceide_client.tools.router import ToolError

BIG = 64 * 1024 * 1024
BOUND = 12 * 1024 * 1024
"""The most a tool may hold in memory for a 64 MB file (a read of it whole needs 64 MB and more)."""


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def git(root: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True, text=True).stdout


def peak_of(work: Callable[[], Any]) -> tuple[Any, int]:
    """What ``work`` returns (or the ToolError it raised) and the peak of memory it allocated."""
    tracemalloc.start()
    try:
        try:
            outcome: Any = work()
        except ToolError as exc:
            outcome = exc
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return outcome, peak


@pytest.fixture
def big(tmp_path: Path) -> Iterator[CompanionWorkspace]:
    root = tmp_path / "app"
    root.mkdir()
    with (root / "huge.log").open("wb") as out:  # sparse: 64 MB that cost no disk
        out.write(b"line one\nline two\n")
        out.truncate(BIG)
    (root / "notes.txt").write_text("the needle is here\n")
    yield CompanionWorkspace(root)


def test_open_file_counts_lines_of_the_start_of_a_big_file_without_reading_it_whole(
    big: CompanionWorkspace,
) -> None:
    opened, peak = peak_of(lambda: run(big.open_file({"path": "huge.log"})))
    assert peak < BOUND
    assert opened["opened"] == "huge.log" and opened["truncated"] is True and opened["bytes"] == BIG
    assert opened["lines"] >= 2


def test_read_search_and_edit_never_hold_a_big_file(big: CompanionWorkspace) -> None:
    read, peak = peak_of(lambda: run(big.read_file({"path": "huge.log"})))
    assert peak < BOUND and isinstance(read, ToolError)  # NUL bytes: not a text file
    found, peak = peak_of(lambda: run(big.search({"query": "needle"})))
    assert peak < BOUND and found["matches"] == ["notes.txt:1: the needle is here"]
    refused, peak = peak_of(
        lambda: run(big.replace_text({"path": "huge.log", "startLine": 1, "endLine": 1, "text": "x"}))
    )
    assert peak < BOUND and isinstance(refused, ToolError)
    assert "huge.log is 67,108,864 bytes: the companion edits files up to 4,194,304 bytes" in str(refused)


def test_open_file_of_a_small_file_is_as_before(tmp_path: Path) -> None:
    (tmp_path / "a.swift").write_text("one\ntwo\nthree")
    (tmp_path / "empty.txt").write_text("")
    workspace = CompanionWorkspace(tmp_path)
    assert run(workspace.open_file({"path": "a.swift", "line": 2})) == {"opened": "a.swift", "line": 2, "lines": 3}
    assert run(workspace.open_file({"path": "empty.txt"})) == {"opened": "empty.txt", "line": 1, "lines": 0}


@pytest.fixture
def inner(tmp_path: Path) -> CompanionWorkspace:
    """The folder ``apps/ios`` of a repository that holds other things too."""
    top = tmp_path / "monorepo"
    folder = top / "apps" / "ios"
    (folder / "Sources").mkdir(parents=True)
    (top / "server").mkdir()
    (folder / "Sources" / "main.swift").write_text("print(1)\n")
    (folder / "old.swift").write_text("let old = 1\n")
    (top / "server" / "app.py").write_text("x = 1\n")
    (top / "README.md").write_text("# Monorepo\n")
    git(top, "init", "-q", "-b", "main")
    git(top, "-c", "user.email=dev@example.com", "-c", "user.name=Dev", "add", ".")
    git(top, "-c", "user.email=dev@example.com", "-c", "user.name=Dev", "commit", "-q", "-m", "first")
    (folder / "Sources" / "main.swift").write_text("print(2)\n")
    git(top, "mv", "apps/ios/old.swift", "apps/ios/new.swift")
    (folder / "added.swift").write_text("new\n")
    (top / "server" / "app.py").write_text("x = 2\n")  # outside the workspace's folder
    (top / "stray.txt").write_text("?\n")
    return CompanionWorkspace(folder)


def test_git_status_lists_the_folders_changes_only_relative_to_it(inner: CompanionWorkspace) -> None:
    status = run(inner.git_status({}))
    assert status["branch"] == "main" and status["truncated"] is False
    assert sorted(status["changed"]) == [" M Sources/main.swift", "?? added.swift", "R  old.swift -> new.swift"]


def test_git_diff_shows_the_folders_changes_only_relative_to_it(inner: CompanionWorkspace) -> None:
    diff = run(inner.git_diff({}))["diff"]
    assert "diff --git a/Sources/main.swift b/Sources/main.swift" in diff and "+print(2)" in diff
    assert "server" not in diff and "app.py" not in diff and "apps/ios" not in diff
    one = run(inner.git_diff({"path": "Sources"}))
    assert one["path"] == "Sources" and "a/Sources/main.swift" in one["diff"]
