"""``voiceide-client`` in a newcomer's first hour: a refused transcript, a paste, a line typed over
an answer, ``!`` with nothing to stop, a refused sign-in, a missing Cognito endpoint, the next page
of the sessions list."""

from __future__ import annotations

import asyncio
import io
import itertools
import os
import time
from http import HTTPStatus
from pathlib import Path
from typing import Any, TextIO

import pytest
from botocore.exceptions import EndpointConnectionError
from websockets.asyncio.server import ServerConnection
from websockets.datastructures import Headers
from websockets.http11 import Request, Response

from shared.wire.protocol import ErrorCode, ErrorPayload
from voiceide_client.command_line import cli
from voiceide_client.command_line.arguments import DEFAULT_PACE, EXIT_OK, EXIT_SERVER_ERROR, EXIT_SIGN_IN_FAILED
from voiceide_client.command_line.sessions import run_sessions
from voiceide_client.connection.sign_in import CognitoSignIn, SignInError
from voiceide_client.voice.recognizer import send_transcript, speaking_time

from .fake_conductor import FakeConductor, FakeSession, async_test, speak, standard_turn

FAST = [0.01] * 5
LIMIT = 8000


@pytest.fixture(autouse=True)
def no_espeak(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "no-bin"))


def _script(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "script.txt"
    path.write_text(text, encoding="utf-8")
    return path


async def _limited(session: FakeSession, text: str) -> None:
    """The conductor's answer to a transcript over its limit: the error alone, no turn."""
    if len(text) > LIMIT:
        await session.send(
            ErrorPayload(code=ErrorCode.TRANSCRIPT_TOO_LONG, message=f"transcripts are limited to {LIMIT} characters")
        )
        return
    await session.call_nowait("convo.setState", {"state": "thinking"})
    await speak(session, "Fine.")
    await session.call_nowait("convo.setState", {"state": "idle"})


@async_test
async def test_a_refused_transcript_ends_the_scripts_turn_at_once_with_exit_5_and_a_short_message(
    tmp_path: Path,
) -> None:
    long_line = ("word " * 4000).strip() + "!"  # 20,000 characters
    out, err = io.StringIO(), io.StringIO()
    async with FakeConductor(_limited) as fake:
        argv = ["--url", fake.url, "--script", str(_script(tmp_path, f"{long_line}\nshort one\n")), "--timeout", "30"]
        started = time.monotonic()
        code = await cli.run(argv, stdout=out, stderr=err, backoff=FAST)
        took = time.monotonic() - started
        session = next(iter(fake.sessions.values()))

    assert code == EXIT_SERVER_ERROR
    assert took < 5  # not the 30 s --timeout
    assert session.transcripts() == [long_line, "short one"]  # the script went on
    lines = out.getvalue().splitlines() + err.getvalue().splitlines()
    assert "[error] transcript_too_long: transcripts are limited to 8000 characters" in lines
    assert "assistant: Fine." in lines
    assert max(len(line) for line in lines) < 300, [line[:100] for line in lines if len(line) >= 300]
    assert any(line.startswith("you: word word") and "20,000 characters" in line for line in lines)


def test_a_pasted_text_goes_out_in_a_few_seconds_not_at_typing_speed() -> None:
    pasted = " ".join(f"w{i}" for i in range(420))
    assert speaking_time(pasted, DEFAULT_PACE) <= 3.0
    assert speaking_time("open the readme", DEFAULT_PACE) == pytest.approx(2 * 0.2 + 0.8)

    sent: list[Any] = []
    slept: list[float] = []

    async def send(event: Any) -> None:
        sent.append(event.payload)

    async def sleep(seconds: float) -> None:
        slept.append(seconds)

    asyncio.run(send_transcript(send, pasted, DEFAULT_PACE, sleep=sleep))
    partials = [p.text for p in sent[:-1]]
    assert 1 < len(partials) <= 15
    assert partials[-1] == pasted and sent[-1].text == pasted  # the whole text, cumulative, then the final
    assert all(later.startswith(earlier) for earlier, later in itertools.pairwise(partials))
    assert sum(slept) == pytest.approx(speaking_time(pasted, DEFAULT_PACE))


class TypedLines(io.TextIOWrapper):
    """A pipe read end that says it is a terminal: lines a person types."""

    def isatty(self) -> bool:
        return True


def _typing() -> tuple[TextIO, TextIO]:
    read_end, write_end = os.pipe()
    typed = os.fdopen(write_end, "w", encoding="utf-8")
    return TypedLines(io.FileIO(read_end, "r"), encoding="utf-8"), typed


@async_test
async def test_a_line_typed_during_a_long_answer_interrupts_it() -> None:
    story = " ".join(f"word{i}" for i in range(200))
    answered: list[str] = []

    async def turn(session: FakeSession, text: str) -> None:
        await session.call_nowait("convo.setState", {"state": "thinking"})
        reply = story if text == "tell me a story" else "Sure, something else."
        result = await speak(session, reply)
        answered.append(result.result or "")
        await session.call_nowait("convo.setState", {"state": "idle"})

    stdin, typed = _typing()
    out = io.StringIO()
    async with FakeConductor(turn) as fake:
        argv = ["--url", fake.url, "--no-partials", "--speech-rate", "120", "--timeout", "30"]
        run = asyncio.create_task(cli.run(argv, stdin=stdin, stdout=out, stderr=io.StringIO(), backoff=FAST))
        typed.write("tell me a story\n")
        typed.flush()
        await fake.wait_until(lambda: any(s.results() for s in fake.sessions.values()) or "🔊 word0" in out.getvalue())
        await asyncio.sleep(1.2)  # two words or so heard
        typed.write("something else\n")
        typed.flush()
        session = next(iter(fake.sessions.values()))
        await fake.wait_until(lambda: len(answered) == 2, 5)
        typed.close()
        code = await asyncio.wait_for(run, 5)
    stdin.close()

    assert code == EXIT_OK
    assert session.transcripts() == ["tell me a story", "something else"]
    barge_ins = [e for e in session.errors() if e.code == ErrorCode.AUDIO_OUTPUT_INTERRUPTED]
    assert len(barge_ins) == 1 and barge_ins[0].heard_text.startswith("word0")
    assert '"spoken":false' in answered[0] and answered[1] == '{"spoken":true}'
    lines = out.getvalue().splitlines()
    cut = next(line for line in lines if line.startswith("[barge-in]"))
    assert "word0" in cut and "word199" not in cut


@async_test
async def test_bang_with_nothing_to_interrupt_sends_nothing_and_says_so() -> None:
    stdin = io.StringIO("!\n")
    out = io.StringIO()
    async with FakeConductor(standard_turn("Okay.")) as fake:
        code = await cli.run(["--url", fake.url], stdin=stdin, stdout=out, stderr=io.StringIO(), backoff=FAST)
        session = next(iter(fake.sessions.values()))

    assert code == EXIT_OK
    assert session.errors() == []
    lines = out.getvalue().splitlines()
    assert "[barge-in]" not in " ".join(lines)
    assert any("nothing to interrupt" in line for line in lines), lines


@async_test
async def test_bang_during_an_answer_shows_what_was_heard() -> None:
    stdin, typed = _typing()
    out = io.StringIO()
    reply = "one two three four five six seven eight nine ten eleven twelve"
    async with FakeConductor(standard_turn(reply)) as fake:
        argv = ["--url", fake.url, "--no-partials", "--speech-rate", "120"]
        run = asyncio.create_task(cli.run(argv, stdin=stdin, stdout=out, stderr=io.StringIO(), backoff=FAST))
        typed.write("count\n")
        typed.flush()
        await fake.wait_until(lambda: "🔊 one" in out.getvalue())
        await asyncio.sleep(1.3)
        typed.write("!\n")
        typed.close()
        code = await asyncio.wait_for(run, 5)
    stdin.close()

    assert code == EXIT_OK
    cut = next(line for line in out.getvalue().splitlines() if line.startswith("[barge-in]"))
    assert cut.startswith('[barge-in] cut after "one two') and "twelve" not in cut


class UnauthorizedConductor(FakeConductor):
    """Answers every handshake as API Gateway does when the authorizer refuses it."""

    def _process_request(self, connection: ServerConnection, request: Request) -> Response | None:
        self.handshakes += 1
        body = b'{"message":"Unauthorized"}'
        return Response(HTTPStatus.UNAUTHORIZED, "Unauthorized", Headers({"Content-Type": "application/json"}), body)


@async_test
async def test_a_401_handshake_exits_with_the_sign_in_code_and_says_it_once(tmp_path: Path) -> None:
    out, err = io.StringIO(), io.StringIO()
    async with UnauthorizedConductor() as fake:
        argv = ["--url", fake.url, "--script", str(_script(tmp_path, "hi\n"))]
        code = await cli.run(argv, stdout=out, stderr=err, backoff=FAST)

    assert code == EXIT_SIGN_IN_FAILED == 4
    said = out.getvalue().splitlines() + err.getvalue().splitlines()
    refused = [line for line in said if "HTTP 401" in line]
    assert len(refused) == 1, said
    assert "signed-in user" in refused[0]


class UnreachableCognito:
    def initiate_auth(self, **kwargs: Any) -> Any:
        raise EndpointConnectionError(endpoint_url="https://cognito-idp.us-east-1.amazonaws.com/")


def test_without_a_cognito_endpoint_the_error_says_where_it_went_and_what_to_pass() -> None:
    sign_in = CognitoSignIn("client", "dev", "secret-pw", cognito=UnreachableCognito())
    with pytest.raises(SignInError) as caught:
        sign_in.sign_in()
    message = str(caught.value)
    assert "https://cognito-idp.us-east-1.amazonaws.com" in message
    assert "--cognito-endpoint" in message
    assert "secret-pw" not in message


class PagedApi:
    """Stands in for the sessions API: one page, then a cursor."""

    def list(self, **kwargs: Any) -> dict[str, Any]:
        return {"sessions": [], "nextCursor": "abc123"}


@async_test
async def test_the_more_line_of_sessions_list_runs_as_printed(monkeypatch: pytest.MonkeyPatch) -> None:
    from voiceide_client.command_line import sessions

    monkeypatch.setattr(sessions, "api_for", lambda args, parser, sign_in: PagedApi())
    out = io.StringIO()
    argv = ["list", "--url", "ws://127.0.0.1:8080/", "--status", "idle", "--limit", "5"]
    code = await run_sessions(argv, stdin=io.StringIO(), stdout=out, stderr=io.StringIO())

    assert code == 0
    more = next(line for line in out.getvalue().splitlines() if line.startswith("more: "))
    assert more == (
        "more: voiceide-client sessions list --url ws://127.0.0.1:8080/ --status idle --limit 5 --cursor abc123"
        "  (or --all)"
    )
