"""The voice console's Memories panel in headless Chromium. The console talks to the local stack's
WebSocket as usual; its sessions API is a stub of ``/memories`` in this module (given to the page
with ``?sessions=``, on an origin of its own, so the requests cross origins with CORS as a deployed
stage's do), which keeps the person's memories and records each request with its
``Authorization``. The list renders what the server sends as text, pages with More, Forget deletes
one (a 404 too removes the row, quietly), Forget everything asks first, a failure is one line, and
a final answer reads the list again."""

from __future__ import annotations

import json
import threading
import urllib.parse
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from conductor_local.stack import LocalStack
from tests.client.stack_support import event_processed
from tests.console.conftest import Console
from tests.console.test_console_sessions import no_page_errors

pytestmark = pytest.mark.browser

TOKEN = "test-token"
HOSTILE = '<img src=x onerror="window.__pwned = 1">'


def memory(n: int, **fields: Any) -> dict[str, Any]:
    return {
        "id": f"mem-{n:03d}",
        "text": f"memory number {n}",
        "kind": "preference",
        "scope": "person",
        "project": None,
        "createdAt": "2025-01-02T03:04:05Z",
    } | fields


class MemoriesStub:
    """GET/DELETE /memories and DELETE /memories/{id} of the sessions API, over real HTTP."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.memories: list[dict[str, Any]] = []
        self.requests: list[dict[str, Any]] = []
        self.fail_next: list[int | str] = []  # a status to answer the next /memories request with, or "drop"
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_OPTIONS(self) -> None:  # the CORS preflight of a request with Authorization
                self.answer(204)

            def do_GET(self) -> None:
                stub.handle(self, "GET")

            def do_DELETE(self) -> None:
                stub.handle(self, "DELETE")

            def answer(self, status: int, body: Any = None) -> None:
                data = b"" if body is None else json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Access-Control-Allow-Origin", "*")
                self.send_header("Access-Control-Allow-Methods", "GET, DELETE, PATCH, POST")
                self.send_header("Access-Control-Allow-Headers", "Authorization, Content-Type")
                if data:
                    self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def handle(self, handler: Any, method: str) -> None:
        url = urllib.parse.urlsplit(handler.path)
        query = dict(urllib.parse.parse_qsl(url.query))
        if not url.path.startswith("/memories"):  # e.g. the earlier conversation read at the start
            handler.answer(404, {"error": {"code": "not_found", "message": "no such session"}})
            return
        with self.lock:
            self.requests.append(
                {"method": method, "path": url.path, "query": query, "auth": handler.headers.get("Authorization")}
            )
            failure = self.fail_next.pop(0) if self.fail_next else None
            if failure == "drop":
                handler.close_connection = True  # no answer at all: the browser's fetch fails
                return
            if failure is not None:
                handler.answer(int(failure), {"error": {"code": "failure", "message": "the stub says no"}})
                return
            status, body = self.route(method, url.path, query)
        handler.answer(status, body)

    def route(self, method: str, path: str, query: dict[str, str]) -> tuple[int, Any]:
        if path == "/memories" and method == "GET":
            start = int(query.get("cursor", "0"))
            limit = int(query.get("limit", "20"))
            page = self.memories[start : start + limit]
            more = start + limit < len(self.memories)
            return 200, {"memories": page, "nextCursor": str(start + limit) if more else None}
        if path == "/memories" and method == "DELETE":
            deleted = len(self.memories)
            self.memories.clear()
            return 200, {"deleted": deleted}
        if path.startswith("/memories/") and method == "DELETE":
            wanted = urllib.parse.unquote(path.removeprefix("/memories/"))
            kept = [m for m in self.memories if m["id"] != wanted]
            if len(kept) == len(self.memories):
                return 404, {"error": {"code": "not_found", "message": "no such memory"}}
            self.memories[:] = kept
            return 204, None
        return 404, {"error": {"code": "not_found", "message": "no such route"}}

    def reset(self, memories: list[dict[str, Any]]) -> None:
        with self.lock:
            self.memories[:] = memories
            self.requests.clear()
            self.fail_next.clear()

    def made(self, method: str) -> list[dict[str, Any]]:
        with self.lock:
            return [r for r in self.requests if r["method"] == method]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(scope="module")
def stub() -> Iterator[MemoriesStub]:
    running = MemoriesStub()
    try:
        yield running
    finally:
        running.close()


def open_console(console: Console, stack: LocalStack, stub: MemoriesStub) -> Console:
    """The console on a fresh session of the stack, its sessions API the stub, signed in with TOKEN."""
    console.session_id = str(uuid.uuid4())
    query = urllib.parse.urlencode({"sessionId": console.session_id, "sessions": stub.url, "token": TOKEN})
    console.driver.get(f"{stack.console_url}?{query}")
    console.js("window.__fake.msPerWord = 5")
    console.wait("window.voiceConsole && window.voiceConsole.connected")
    start_id = console.js("return voiceConsole.record.sent.find(e => e.kind.sessionStart).id")
    console.until(lambda: event_processed(console.stack, console.session_id, start_id))
    return console


def rows(console: Console) -> list[dict[str, Any]]:
    return console.js(
        """return [...document.querySelectorAll('#memory-list li.memory-row')].map(li => ({
            id: li.dataset.memoryId,
            text: li.querySelector('.memory-text').textContent,
            meta: li.querySelector('.memory-meta').textContent,
            time: (li.querySelector('time') || {getAttribute: () => null}).getAttribute('datetime'),
        }))"""
    )


def status(console: Console) -> str:
    return console.js("return document.getElementById('memories-status').textContent")


def status_is_error(console: Console) -> bool:
    return console.js("return document.getElementById('memories-status').classList.contains('error')")


def loaded(console: Console) -> None:
    console.wait("document.getElementById('memories-status').textContent !== 'Loading…'")


def open_panel(console: Console) -> list[dict[str, Any]]:
    """Open the Memories panel (it reads the first page) and wait until it is read."""
    console.driver.find_element("id", "memories-title").click()
    assert console.js("return document.getElementById('memories-panel').open") is True
    loaded(console)
    return rows(console)


def click(console: Console, element_id: str) -> None:
    console.driver.find_element("id", element_id).click()


def forget_button(console: Console, memory_id: str) -> Any:
    return console.driver.find_element("css selector", f'#memory-list li[data-memory-id="{memory_id}"] .forget')


def transcript_notes(console: Console) -> list[str]:
    return console.js(
        "return [...document.querySelectorAll('#transcript li.note, #transcript li.error')].map(li => li.textContent)"
    )


def test_the_list_renders_what_the_server_sends_as_text_and_pages_with_more(
    console: Console, stack: LocalStack, stub: MemoriesStub
) -> None:
    hostile = memory(0, text=HOSTILE, kind="fact", scope="project", project="<b>shop</b>")
    stub.reset([hostile, memory(1, scope="session", kind="summary"), *[memory(n) for n in range(2, 23)]])
    open_console(console, stack, stub)
    assert stub.made("GET") == []  # nothing is read before the panel is opened

    shown = open_panel(console)
    assert [r["id"] for r in shown] == [f"mem-{n:03d}" for n in range(20)]
    assert shown[0]["text"] == HOSTILE  # the markup as words, never as an element
    assert shown[0]["meta"].startswith("fact · project <b>shop</b> · remembered ")
    assert shown[0]["time"] == "2025-01-02T03:04:05Z"
    assert shown[1]["meta"].startswith("summary · from a session · remembered ")
    assert shown[2]["text"] == "memory number 2" and shown[2]["meta"].startswith("preference · about you · ")
    assert console.js("return document.querySelectorAll('#memory-list img, #memory-list b').length") == 0
    assert console.js("return window.__pwned") is None
    first = stub.made("GET")
    assert len(first) == 1 and first[0]["query"] == {"limit": "20"} and first[0]["auth"] == f"Bearer {TOKEN}"
    assert console.js("return document.getElementById('memories-more').hidden") is False

    click(console, "memories-more")
    loaded(console)
    assert [r["id"] for r in rows(console)] == [f"mem-{n:03d}" for n in range(23)]
    assert stub.made("GET")[-1]["query"] == {"limit": "20", "cursor": "20"}
    assert console.js("return document.getElementById('memories-more').hidden") is True
    assert status(console) == ""

    # Refresh reads from the start again
    stub.reset([memory(7)])
    click(console, "memories-refresh")
    console.until(lambda: [r["id"] for r in rows(console)] == ["mem-007"])
    stub.reset([])
    click(console, "memories-refresh")
    console.until(lambda: rows(console) == [] and status(console) == "Nothing remembered.")
    no_page_errors(console)


def test_forget_deletes_one_and_a_404_removes_the_row_quietly(
    console: Console, stack: LocalStack, stub: MemoriesStub
) -> None:
    stub.reset([memory(1), memory(2), memory(3)])
    open_console(console, stack, stub)
    assert len(open_panel(console)) == 3

    forget_button(console, "mem-002").click()
    console.until(lambda: [r["id"] for r in rows(console)] == ["mem-001", "mem-003"])
    deletes = stub.made("DELETE")
    assert [(d["path"], d["auth"]) for d in deletes] == [("/memories/mem-002", f"Bearer {TOKEN}")]
    assert [m["id"] for m in stub.memories] == ["mem-001", "mem-003"]
    assert not status_is_error(console)

    # forgotten elsewhere meanwhile: the server answers 404, and the row goes all the same
    stub.reset([memory(1)])
    forget_button(console, "mem-003").click()
    console.until(lambda: [r["id"] for r in rows(console)] == ["mem-001"])
    assert [d["path"] for d in stub.made("DELETE")] == ["/memories/mem-003"]
    assert not status_is_error(console) and "404" not in status(console)
    assert transcript_notes(console) == []
    no_page_errors(console)


def test_forget_everything_asks_first_then_deletes_all(console: Console, stack: LocalStack, stub: MemoriesStub) -> None:
    stub.reset([memory(n) for n in range(5)])
    open_console(console, stack, stub)
    assert len(open_panel(console)) == 5

    console.js("window.__asked = []; window.confirm = (text) => { __asked.push(text); return false; }")
    click(console, "memories-forget-all")
    assert console.js("return __asked") == [
        "Forget everything the conductor remembers about you? This cannot be undone."
    ]
    assert stub.made("DELETE") == [] and len(rows(console)) == 5  # said no: nothing is deleted

    console.js("window.confirm = (text) => { __asked.push(text); return true; }")
    click(console, "memories-forget-all")
    console.until(lambda: rows(console) == [])
    assert [(d["path"], d["auth"]) for d in stub.made("DELETE")] == [("/memories", f"Bearer {TOKEN}")]
    assert stub.memories == []
    assert status(console) == "Forgot everything (5 memories)."
    no_page_errors(console)


@pytest.mark.parametrize(
    ("failure", "expected"),
    [
        (500, "Listing the memories failed: 500 the stub says no."),
        (401, "Listing the memories: the sign-in was refused (401). Sign in again under Connection and sign-in."),
        ("drop", "Listing the memories: the sessions API cannot be reached (Failed to fetch; "),
    ],
)
def test_a_failure_is_one_line_in_the_panel(
    console: Console, stack: LocalStack, stub: MemoriesStub, failure: int | str, expected: str
) -> None:
    stub.reset([memory(1)])
    open_console(console, stack, stub)
    assert len(open_panel(console)) == 1

    stub.fail_next.append(failure)
    click(console, "memories-refresh")
    loaded(console)
    line = status(console)
    assert line.startswith(expected) and "\n" not in line
    assert status_is_error(console)
    assert [r["id"] for r in rows(console)] == ["mem-001"]  # what was shown stays
    assert console.js("return document.getElementById('settings-panel').open") is (failure == 401)

    # a failed Forget is the same one line, and its row stays
    stub.fail_next.append(failure)
    forget_button(console, "mem-001").click()
    console.until(lambda: status(console).startswith("Forgetting the memory"))
    assert [r["id"] for r in rows(console)] == ["mem-001"] and status_is_error(console)

    click(console, "memories-refresh")  # and the next read clears it
    console.until(lambda: status(console) == "" and not status_is_error(console))
    no_page_errors(console)


def test_a_final_answer_reads_the_open_list_again(console: Console, stack: LocalStack, stub: MemoriesStub) -> None:
    stub.reset([])
    open_console(console, stack, stub)
    console.js("voiceConsole.say('before the panel is open')")
    console.idle_after(1)
    assert stub.made("GET") == []  # a closed panel reads nothing

    assert open_panel(console) == []
    with stub.lock:
        stub.memories.append(memory(9, text="you prefer tabs over spaces"))
    console.js("voiceConsole.say('remember that I prefer tabs')")
    console.idle_after(2)
    console.until(lambda: [r["text"] for r in rows(console)] == ["you prefer tabs over spaces"])
    assert len(stub.made("GET")) >= 2
    no_page_errors(console)
