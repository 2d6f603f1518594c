"""The desktop companion's tools over a temporary git repository: reads, search, listing, paths that
never leave the folder, edits applied exactly, git status and diff, and declarations."""

from __future__ import annotations

import asyncio
import subprocess
from pathlib import Path
from typing import Any

import pytest

from voiceide_client.companion.edit import LineRange, replace_lines
from voiceide_client.companion.workspace import CompanionWorkspace
from voiceide_client.tools.router import ToolError
from voiceide_client.tools.workspace import Workspace

MAIN = "import UIKit\n// TODO: wire the view\nprint(1)\n"


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def git(root: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True, text=True).stdout


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "app"
    (root / "Sources").mkdir(parents=True)
    (root / "Sources" / "main.swift").write_text(MAIN)
    (root / "README.md").write_text("# App\n")
    git(root, "init", "-q", "-b", "main")
    git(root, "-c", "user.email=dev@example.com", "-c", "user.name=Dev", "add", ".")
    git(root, "-c", "user.email=dev@example.com", "-c", "user.name=Dev", "commit", "-q", "-m", "first")
    return root


@pytest.fixture
def workspace(repo: Path) -> CompanionWorkspace:
    return CompanionWorkspace(repo)


def test_reads_search_and_listing_over_the_folder(workspace: CompanionWorkspace) -> None:
    assert run(workspace.read_file({"path": "Sources/main.swift"})) == {
        "path": "Sources/main.swift",
        "text": MAIN,
        "truncated": False,
    }
    assert run(workspace.open_file({"path": "README.md"})) == {"opened": "README.md", "line": 1, "lines": 1}
    assert run(workspace.search({"query": "todo"}))["matches"] == ["Sources/main.swift:2: // TODO: wire the view"]
    assert run(workspace.list_files({})) == {"path": ".", "entries": ["README.md", "Sources/"]}
    assert run(workspace.list_files({"path": "Sources"}))["entries"] == ["main.swift"]
    with pytest.raises(ToolError, match="no such file"):
        run(workspace.read_file({"path": "missing.swift"}))


def test_a_big_file_is_read_up_to_100_000_characters_and_a_binary_one_refused(workspace: CompanionWorkspace) -> None:
    (workspace.root / "big.txt").write_text("x" * 150_000)
    result = run(workspace.read_file({"path": "big.txt"}))
    assert len(result["text"]) == 100_000 and result["truncated"] is True
    (workspace.root / "logo.png").write_bytes(b"\x89PNG\r\n\x1a\n\0\0\0")
    with pytest.raises(ToolError, match="not a text file"):
        run(workspace.read_file({"path": "logo.png"}))


@pytest.mark.parametrize(
    ("path", "why"),
    [
        ("../outside.txt", "'..' is refused"),
        ("Sources/../../outside.txt", "'..' is refused"),
        ("Sources/../README.md", "'..' is refused"),  # even when it would stay inside
        ("/etc/passwd", "relative to its folder"),
        ("~/secrets.txt", "relative to its folder"),
        ("escape/outside.txt", "symbolic link"),
        ("link-out.txt", "symbolic link"),
    ],
)
def test_paths_never_leave_the_folder(workspace: CompanionWorkspace, path: str, why: str) -> None:
    outside = workspace.root.parent / "outside.txt"
    outside.write_text("secret\n")
    (workspace.root / "escape").symlink_to(workspace.root.parent, target_is_directory=True)
    (workspace.root / "link-out.txt").symlink_to(outside)
    for tool in (workspace.read_file, workspace.open_file, workspace.list_files, workspace.git_diff):
        with pytest.raises(ToolError, match=why):
            run(tool({"path": path}))
    with pytest.raises(ToolError, match=why):
        run(workspace.replace_text({"path": path, "startLine": 1, "endLine": 1, "text": "x"}))
    assert outside.read_text() == "secret\n"


def test_search_skips_links_that_lead_out_and_a_link_inside_is_followed(workspace: CompanionWorkspace) -> None:
    outside = workspace.root.parent / "outside.txt"
    outside.write_text("needle outside\n")
    (workspace.root / "link-out.txt").symlink_to(outside)
    (workspace.root / "notes.txt").write_text("needle inside\n")
    (workspace.root / "link-in.txt").symlink_to(workspace.root / "notes.txt")
    (workspace.root / "dangling.txt").symlink_to(workspace.root / "gone.txt")
    matches = run(workspace.search({"query": "needle"}))["matches"]
    assert matches == ["link-in.txt:1: needle inside", "notes.txt:1: needle inside"]
    assert run(workspace.read_file({"path": "link-in.txt"}))["text"] == "needle inside\n"


def test_replace_text_applies_exactly_the_line_range(workspace: CompanionWorkspace) -> None:
    path = workspace.root / "Sources" / "main.swift"
    done = run(
        workspace.replace_text(
            {"path": "Sources/main.swift", "startLine": 2, "endLine": 2, "text": "// the view is wired\nlet v = 1"}
        )
    )
    assert path.read_text() == "import UIKit\n// the view is wired\nlet v = 1\nprint(1)\n"
    assert done == {
        "path": "Sources/main.swift",
        "startLine": 2,
        "endLine": 2,
        "removedLines": 1,
        "insertedLines": 2,
        "lines": 4,
    }
    run(workspace.replace_text({"path": "Sources/main.swift", "startLine": 1, "endLine": 3, "text": ""}))
    assert path.read_text() == "print(1)\n"
    run(workspace.replace_text({"path": "Sources/main.swift", "startLine": 2, "endLine": 1, "text": "print(2)"}))
    assert path.read_text() == "print(1)\nprint(2)\n"  # endLine = startLine - 1 inserts; one past the end appends


def test_replace_text_refuses_bad_ranges_and_the_files_that_decide_what_runs(workspace: CompanionWorkspace) -> None:
    path = workspace.root / "Sources" / "main.swift"
    for arguments, why in (
        ({"startLine": 5, "endLine": 5}, "startLine 5 is past the end of Sources/main.swift \\(3 lines\\)"),
        ({"startLine": 2, "endLine": 9}, "endLine 9 is past the end"),
        ({"startLine": 0, "endLine": 1}, "lines count from 1"),
        ({"startLine": 3, "endLine": 1}, "endLine 1 is before startLine 3"),
        ({"startLine": "1", "endLine": 1}, "startLine must be a whole line number"),
        ({"startLine": True, "endLine": 1}, "startLine must be a whole line number"),
    ):
        with pytest.raises(ToolError, match=why):
            run(workspace.replace_text({"path": "Sources/main.swift", "text": "x", **arguments}))
    assert path.read_text() == MAIN
    (workspace.root / ".voiceide.toml").write_text('build = "swift build"\n')
    for protected in (".voiceide.toml", ".git/config", ".GIT/config"):
        with pytest.raises(ToolError, match="does not change"):
            run(workspace.replace_text({"path": protected, "startLine": 1, "endLine": 1, "text": "x"}))
    assert (workspace.root / ".voiceide.toml").read_text() == 'build = "swift build"\n'


def test_replace_text_keeps_line_endings_permissions_and_links(workspace: CompanionWorkspace) -> None:
    crlf = workspace.root / "win.txt"
    crlf.write_bytes(b"one\r\ntwo\r\nthree")
    crlf.chmod(0o750)
    run(workspace.replace_text({"path": "win.txt", "startLine": 3, "endLine": 3, "text": "3\n4"}))
    assert crlf.read_bytes() == b"one\r\ntwo\r\n3\r\n4"  # no final line ending before: none after
    assert crlf.stat().st_mode & 0o777 == 0o750
    (workspace.root / "alias.txt").symlink_to("win.txt")
    run(workspace.replace_text({"path": "alias.txt", "startLine": 1, "endLine": 1, "text": "ONE"}))
    assert (workspace.root / "alias.txt").is_symlink() and crlf.read_bytes().startswith(b"ONE\r\ntwo")
    (workspace.root / "latin1.txt").write_bytes("café\n".encode("latin-1"))
    with pytest.raises(ToolError, match="not UTF-8"):
        run(workspace.replace_text({"path": "latin1.txt", "startLine": 1, "endLine": 1, "text": "x"}))
    assert [p.name for p in workspace.root.iterdir() if p.name.endswith(".voiceide")] == []  # no temporary left


@pytest.mark.parametrize(
    ("text", "start", "end", "new", "expected"),
    [
        ("a\nb\nc\n", 2, 2, "B", "a\nB\nc\n"),
        ("a\nb\nc\n", 1, 3, "x\ny\n", "x\ny\n"),
        ("a\nb", 2, 2, "B", "a\nB"),
        ("a\nb", 3, 2, "c", "a\nb\nc"),
        ("a\nb", 2, 2, "", "a"),
        ("", 1, 0, "first", "first\n"),
        ("a\n", 1, 0, "\n", "\na\n"),
    ],
)
def test_line_replacement(text: str, start: int, end: int, new: str, expected: str) -> None:
    assert replace_lines(text, LineRange(start, end), new, "f")[0] == expected


def test_git_status_and_diff(workspace: CompanionWorkspace) -> None:
    assert run(workspace.git_status({})) == {"branch": "main", "changed": [], "truncated": False}
    assert run(workspace.git_diff({})) == {"path": ".", "diff": "", "truncated": False}
    run(workspace.replace_text({"path": "Sources/main.swift", "startLine": 3, "endLine": 3, "text": "print(2)"}))
    (workspace.root / "new.txt").write_text("n\n")
    (workspace.root / "README.md").write_text("# App!\n")
    status = run(workspace.git_status({}))
    assert status["changed"] == [" M README.md", " M Sources/main.swift", "?? new.txt"]
    diff = run(workspace.git_diff({"path": "Sources"}))
    assert diff["path"] == "Sources" and "-print(1)\n+print(2)" in diff["diff"] and "README" not in diff["diff"]
    assert "+# App!" in run(workspace.git_diff({}))["diff"]


def test_git_diff_before_the_first_commit_and_outside_a_repository(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))  # no repository above the test's folders
    fresh, plain = tmp_path / "fresh", tmp_path / "plain"
    fresh.mkdir()
    plain.mkdir()
    git(fresh, "init", "-q")
    (fresh / "a.txt").write_text("staged\n")
    git(fresh, "add", "a.txt")
    (fresh / "a.txt").write_text("staged\nand not\n")
    diff = run(CompanionWorkspace(fresh).git_diff({}))["diff"]
    assert "+staged" in diff and "+and not" in diff
    for tool in (CompanionWorkspace(plain).git_diff, CompanionWorkspace(plain).git_status):
        with pytest.raises(ToolError, match="not a git repository"):
            run(tool({}))


def test_git_runs_no_fsmonitor_the_repository_names(workspace: CompanionWorkspace) -> None:
    marker = workspace.root.parent / "ran"
    git(workspace.root, "config", "core.fsmonitor", f"touch {marker}; false")
    run(workspace.git_status({}))
    run(workspace.git_diff({}))
    assert not marker.exists()


def test_declarations_mark_the_edit_as_a_change_and_the_build_as_background(workspace: CompanionWorkspace) -> None:
    (workspace.root / ".voiceide.toml").write_text('build = "swift build -c release"\ntimeout_seconds = 900\n')
    declared = {tool.name: tool for tool in workspace.declarations()}
    assert sorted(declared) == sorted(workspace.handlers())
    assert declared["editor.replaceText"].effects == "changes"
    assert all(tool.effects == "none" for name, tool in declared.items() if name != "editor.replaceText")
    build, tests = declared["build.run"], declared["tests.run"]
    assert build.background and tests.background and build.deadline_seconds == 930
    assert "`swift build -c release`" in build.description and "no test command" in tests.description
    assert declared["git.diff"].arguments["properties"] == {"path": {"type": "string"}}


def test_the_plain_stub_workspace_is_unchanged(repo: Path) -> None:
    plain = Workspace(repo)
    with pytest.raises(ToolError, match="does not build, test or edit"):
        run(plain.handlers()["editor.replaceText"]({"path": "README.md"}))
    assert "git.diff" not in plain.handlers()
    assert run(plain.read_file({"path": "Sources/../README.md"}))["text"] == "# App\n"
