"""The companion's name index: the names Python files define (``ast``), those of JavaScript,
TypeScript, Go, Rust and Swift (tree-sitter), the code names a tokenizer finds elsewhere and the
files' own names; ranked open file first, then changed files, then by use; bounded; read again only
where files changed; and cut into parts that each fit a frame and together hold every name. The
phone shows the names the conductor says it heard, and keeps the vocabulary for its recognizer."""

from __future__ import annotations

import io
import subprocess
from pathlib import Path

import pytest

from shared.wire.protocol import make_event
from shared.wire.workspace import MAX_NAME_PARTS, MAX_NAMES, NameHeard, NamesHeard, Vocabulary
from voiceide_client.companion.code_names import grammars, names_of, python_names, token_names
from voiceide_client.companion.name_index import (
    MAX_PART_BYTES,
    IndexedName,
    NameIndex,
    index_names,
    names_parts,
    set_id_of,
)
from voiceide_client.conversation.client import ConductorClient
from voiceide_client.rendering.transcript import TranscriptRenderer

from .fake_conductor import FakeConductor, async_test

PYTHON = '''
"""A module."""
import os

MAX_USERS = 10
UserId = str
counter = 0
_CACHE_SIZE = 3


class UserStore:
    def __init__(self) -> None:
        local_value = 1

    def find_user(self, user_id: UserId) -> None:
        def inner_helper() -> None:
            pass


async def fetch_users() -> None:
    pass
'''


def git(root: Path, *args: str) -> None:
    command = ["git", "-C", str(root), "-c", "user.email=dev@example.com", "-c", "user.name=Dev", *args]
    subprocess.run(command, check=True, capture_output=True)


def write(root: Path, path: str, text: str) -> None:
    file = root / path
    file.parent.mkdir(parents=True, exist_ok=True)
    file.write_text(text)


def test_python_names_come_from_the_syntax_tree() -> None:
    assert python_names(PYTHON) == [
        "MAX_USERS", "UserId", "_CACHE_SIZE", "UserStore", "find_user", "inner_helper", "fetch_users",
    ]  # fmt: skip
    assert python_names("def broken(:\n") is None
    assert names_of("def broken(:\n    getUserById()\n", "python") == ["getUserById"]  # the tokenizer instead


def test_the_tokenizer_keeps_what_looks_like_code_and_no_keyword_or_word() -> None:
    text = "Call getUserById or make_event with MAX_SIZE, HTTPServer and UserService; not the id, x_y, NaN or __init__"
    assert token_names(text) == ["getUserById", "make_event", "MAX_SIZE", "HTTPServer", "UserService"]
    assert token_names("plain words only, and keywords: function return instanceof") == []


@pytest.mark.parametrize(
    ("language", "source", "expected"),
    [
        (
            "javascript",
            "export function getUserById(id) { const localValue = 1 }\nclass UserStore { findAll() {} }\n"
            "const fetchUsers = async () => 1\n",
            ["getUserById", "UserStore", "findAll", "fetchUsers"],
        ),
        (
            "typescript",
            "interface UserProps { name: string }\ntype UserId = string\nenum Color { Red }\n"
            "export class UserService { getUser(id: UserId): void { let innerValue = 2 } }\n",
            ["UserProps", "UserId", "Color", "UserService", "getUser"],
        ),
        (
            "go",
            "package main\ntype UserStore struct{}\nfunc (s *UserStore) FindUser() { var localVar = 1 }\n"
            "const MaxUsers = 3\n",
            ["UserStore", "FindUser", "MaxUsers"],
        ),
        (
            "rust",
            "struct UserStore {}\ntrait Finder { fn find_one(&self); }\n"
            "impl UserStore { fn find_user(&self) { let local_x = 1; } }\nconst MAX_USERS: u32 = 3;\n",
            ["UserStore", "Finder", "find_one", "find_user", "MAX_USERS"],
        ),
        (
            "swift",
            "struct LoginView { var userName: String }\n"
            "class AuthService { func signIn(user: String) { let localOne = 1 } }\nprotocol Authenticating {}\n",
            ["LoginView", "userName", "AuthService", "signIn", "Authenticating"],
        ),
    ],
)
def test_other_languages_are_read_with_their_grammars(language: str, source: str, expected: list[str]) -> None:
    assert language in grammars()
    assert names_of(source, language) == expected


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "app"
    write(root, "src/users.ts", "export function getUserById(id: string) {}\nexport class UserService {}\n")
    write(root, "src/store.py", PYTHON)
    write(root, "src/api.py", "from store import UserStore, fetch_users\n\ndef list_users():\n    fetch_users()\n")
    write(root, "src/view.py", "from store import fetch_users\n\ndef render_page():\n    fetch_users()\n")
    write(root, "docs/notes.md", "See getUserById and the renderPipeline.\n")
    write(root, "logo.png", "\0binary")
    write(root, "generated/big.py", "def too_big():\n    pass\n" + "#" * (512 * 1024))
    write(root, "ignored/secret.py", "def hidden_function():\n    pass\n")
    write(root, ".gitignore", "ignored/\n")
    git(root, "init", "-q", "-b", "main")
    git(root, "add", ".")
    git(root, "commit", "-q", "-m", "first")
    return root


def test_the_names_of_the_workspace_and_its_files_names(repo: Path) -> None:
    found = {(entry.name, entry.path) for entry in index_names(repo)}
    assert {
        ("getUserById", "src/users.ts"), ("UserService", "src/users.ts"), ("users.ts", "src/users.ts"),
        ("UserStore", "src/store.py"), ("fetch_users", "src/store.py"), ("MAX_USERS", "src/store.py"),
        ("list_users", "src/api.py"), ("render_page", "src/view.py"), ("renderPipeline", "docs/notes.md"),
    } <= found  # fmt: skip
    names = {name for name, _ in found}
    assert not {"local_value", "counter", "__init__", "hidden_function", "too_big", "secret.py"} & names
    assert {"logo.png", "big.py"} <= names  # a file skipped for its content is still named
    assert len(names) == len(found)  # each name once, at its most relevant file


def test_the_open_file_ranks_first_then_the_changed_files_then_the_most_used(repo: Path) -> None:
    ranked = [entry.name for entry in index_names(repo)]
    # fetch_users is used in three files, UserStore in two: before the names used in one only
    assert ranked.index("fetch_users") < ranked.index("UserStore") < ranked.index("render_page")
    index = NameIndex(repo)
    ranked = index.index(open_file="src/view.py", changed=["src/api.py"])
    paths = [entry.path for entry in ranked]
    assert paths[: paths.index("src/api.py")] == ["src/view.py"] * paths.index("src/api.py")
    assert set(paths[: paths.count("src/view.py") + paths.count("src/api.py")]) == {"src/view.py", "src/api.py"}
    assert index.complete


def test_an_index_again_reads_only_what_changed_and_forgets_what_is_gone(repo: Path) -> None:
    index = NameIndex(repo)
    first = index.index()
    write(repo, "src/view.py", "def draw_chart():\n    pass\n")
    (repo / "src" / "api.py").unlink()
    again = {(e.name, e.path) for e in index.index()}
    assert ("draw_chart", "src/view.py") in again and ("render_page", "src/view.py") not in again
    assert not any(path == "src/api.py" for _, path in again)
    assert ("getUserById", "src/users.ts") in again and len(first) > 0


def test_the_index_keeps_its_bounds(tmp_path: Path) -> None:
    root = tmp_path / "many"
    many = "".join(f"def function_number_{n}():\n    pass\n" for n in range(MAX_NAMES + 500))
    write(root, "big_module.py", many)
    for n in range(30):
        write(root, f"pkg/module_{n:02d}.py", f"def handler_{n:02d}():\n    pass\n")
    assert len(index_names(root)) == MAX_NAMES
    (root / "big_module.py").unlink()
    few = NameIndex(root, max_files=10)
    assert len({entry.path for entry in few.index()}) == 10
    stopped = NameIndex(root, time_limit=-1.0)  # past its limit before the first file
    assert stopped.index() == [] and not stopped.complete


def test_parts_each_fit_a_frame_and_together_hold_every_name_in_order(repo: Path) -> None:
    names = [IndexedName(f"someFunctionName{n:05d}", f"src/folder_{n % 7}/file_{n % 50}.ts") for n in range(MAX_NAMES)]
    set_id = set_id_of(names)
    parts = names_parts(names, set_id)
    assert 1 < len(parts) <= MAX_NAME_PARTS
    assert [(p.set_id, p.part, p.parts) for p in parts] == [(set_id, n, len(parts)) for n in range(len(parts))]
    assert all(len(make_event(part).to_json().encode("utf-8")) <= MAX_PART_BYTES for part in parts)
    held = sorted((name, files.path) for part in parts for files in part.files for name in files.names)
    assert held == sorted((entry.name, entry.path) for entry in names)
    assert set_id_of(list(names)) == set_id and set_id_of(names[1:]) != set_id
    assert names_parts([], set_id)[0].files == ()


def test_names_too_many_for_eight_parts_keep_the_most_relevant(repo: Path) -> None:
    names = [IndexedName(f"n{n:04d}_" + "x" * 110, f"src/{n}.py") for n in range(MAX_NAMES)]
    parts = names_parts(names, "set-1")
    assert len(parts) == MAX_NAME_PARTS
    assert all(len(make_event(part).to_json().encode("utf-8")) <= MAX_PART_BYTES for part in parts)
    held = [name for part in parts for files in part.files for name in files.names]
    assert held == [entry.name for entry in names[: len(held)]] and len(held) < MAX_NAMES


def test_the_names_of_a_real_workspace_are_sent_whole(repo: Path) -> None:
    names = index_names(repo)
    parts = names_parts(names, set_id_of(names))
    held = {(name, files.path) for part in parts for files in part.files for name in files.names}
    assert held == {(entry.name, entry.path) for entry in names}
    assert all(not files.path.startswith("/") for part in parts for files in part.files)


@async_test
async def test_the_phone_shows_the_names_heard_and_keeps_the_vocabulary() -> None:
    out = io.StringIO()
    async with FakeConductor() as fake:
        client = ConductorClient(fake.url, renderer=TranscriptRenderer(out, err=io.StringIO()))
        async with client:
            session = fake.session(client.session_id)
            phrases = ("getUserById", "UserService", "fetch_users")
            await session.send(Vocabulary(phrases=phrases), seq=False)
            await session.send(Vocabulary(phrases=phrases), seq=False)  # the same again: not shown again
            heard = NameHeard(heard="get user buy id", name="getUserById", path="src/users.ts")
            await session.send(
                NamesHeard(event_id="e-1", matches=(heard, NameHeard(heard="user store", name="UserStore")))
            )
            await client.wait_until(lambda: any(isinstance(e.payload, NamesHeard) for e in client.events))
    assert client.vocabulary == phrases
    assert out.getvalue().splitlines() == [
        "[vocabulary] 3 phrases: getUserById, UserService, fetch_users",
        "heard 'get user buy id' → getUserById (src/users.ts)",
        "heard 'user store' → UserStore",
    ]
