"""The client stub's simulated IDE tools, on a temporary workspace."""

from __future__ import annotations

import asyncio
import subprocess
import tracemalloc
from pathlib import Path

import pytest

from voiceide_client.tools.declarations import declared_tools
from voiceide_client.tools.router import ToolError
from voiceide_client.tools.workspace import Workspace


@pytest.fixture
def workspace(tmp_path: Path) -> Workspace:
    (tmp_path / "Sources").mkdir()
    (tmp_path / "Sources" / "main.swift").write_text("import UIKit\n// TODO: wire the view\nprint(1)\n")
    (tmp_path / "README.md").write_text("# App\n")
    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "config").write_text("TODO in git internals must not match\n")
    return Workspace(tmp_path)


def run(coro: object) -> object:
    return asyncio.run(coro)  # type: ignore[arg-type]


def test_open_and_read_files(workspace: Workspace) -> None:
    assert run(workspace.open_file({"path": "Sources/main.swift", "line": 2})) == {
        "opened": "Sources/main.swift",
        "line": 2,
        "lines": 3,  # three lines, the last one ended by its newline
    }
    assert run(workspace.read_file({"path": "README.md"})) == {
        "path": "README.md",
        "text": "# App\n",
        "truncated": False,
    }
    with pytest.raises(ToolError, match="no such file"):
        run(workspace.open_file({"path": "missing.swift"}))


def test_paths_cannot_leave_the_workspace(workspace: Workspace) -> None:
    with pytest.raises(ToolError, match="outside the workspace"):
        run(workspace.read_file({"path": "../../etc/passwd"}))
    with pytest.raises(ToolError, match="path is required"):
        run(workspace.open_file({}))


def test_search_skips_tool_folders(workspace: Workspace) -> None:
    result = run(workspace.search({"query": "todo"}))
    assert result == {"query": "todo", "matches": ["Sources/main.swift:2: // TODO: wire the view"], "truncated": False}


def test_list_files_and_refusals(workspace: Workspace) -> None:
    assert run(workspace.list_files({})) == {"path": ".", "entries": ["README.md", "Sources/"]}
    with pytest.raises(ToolError, match="does not build"):
        run(workspace.refuse({}))
    assert set(workspace.handlers()) >= {"editor.openFile", "project.search", "git.status", "build.run"}


def test_git_status_reports_branch_and_changes(tmp_path: Path) -> None:
    subprocess.run(["git", "init", "-q", "-b", "work", str(tmp_path)], check=True)
    (tmp_path / "new.txt").write_text("x")
    result = run(Workspace(tmp_path).git_status({}))
    assert result["branch"].startswith("No commits yet on work") or result["branch"].startswith("work")  # type: ignore[index]
    assert result["changed"] == ["?? new.txt"]  # type: ignore[index]
    with pytest.raises(ToolError):
        run(Workspace(tmp_path / "new.txt").git_status({}))


def test_a_simulated_build_succeeds_after_its_seconds_and_is_refused_without(tmp_path: Path) -> None:
    assert run(Workspace(tmp_path, build_seconds=0.01).simulated_build({}))["status"] == "succeeded"
    assert run(Workspace(tmp_path, build_seconds=0.01).simulated_tests({}))["failed"] == 0
    with pytest.raises(ToolError, match="does not build"):
        run(Workspace(tmp_path).simulated_build({}))


def test_the_stubs_tools_are_declared_as_the_catalog_describes_them(tmp_path: Path) -> None:
    declared = {tool.name: tool for tool in declared_tools(Workspace(tmp_path).handlers())}
    assert "tts.speak" not in declared and "convo.setState" not in declared
    assert declared["build.run"].background and declared["build.run"].deadline_seconds == 600
    assert declared["editor.replaceText"].effects == "changes"
    assert declared["editor.openFile"].arguments["required"] == ["path"]


def test_a_huge_file_is_opened_and_read_without_reading_it_whole(tmp_path: Path) -> None:
    with (tmp_path / "huge.log").open("wb") as out:  # sparse: 64 MB that cost no disk
        out.write(b"line one\nline two\n")
        out.truncate(64 * 1024 * 1024)
    workspace = Workspace(tmp_path)
    tracemalloc.start()
    try:
        opened = run(workspace.open_file({"path": "huge.log"}))
        read = run(workspace.read_file({"path": "huge.log"}))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 12 * 1024 * 1024  # the whole file would be 64 MB (and more as text)
    assert opened["truncated"] is True and opened["bytes"] == 64 * 1024 * 1024  # type: ignore[index]
    assert read["truncated"] is True and read["text"].startswith("line one\nline two\n")  # type: ignore[index]


def test_git_status_lists_only_the_folders_changes_inside_a_larger_repository(tmp_path: Path) -> None:
    subprocess.run(["git", "init", "-q", "-b", "work", str(tmp_path)], check=True)
    (tmp_path / "outside.txt").write_text("x")
    (tmp_path / "app").mkdir()
    (tmp_path / "app" / "inside.txt").write_text("y")
    result = run(Workspace(tmp_path / "app").git_status({}))
    assert result["changed"] == ["?? inside.txt"]  # type: ignore[index]
