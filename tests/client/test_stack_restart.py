"""The client against a local stack that is stopped and started again on the same port.

The local stack keeps its table in the process: after a restart the session is new to it
(``sessionReady resumed=false lastSeq=0``) and its events are numbered from 1 again. The client
must take them as new, tell the person once that the conductor did not have the conversation,
and go on: the next request is answered.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from websockets.asyncio.client import connect

from voiceide_client.connection.link import scaled_backoff
from voiceide_client.conversation.client import ConductorClient

from .test_connect import unused_port

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
STARTUP_S = 60.0


@contextmanager
def stack_process(port: int) -> Iterator[subprocess.Popen[bytes]]:
    """``python -m conductor_local local --port PORT`` as a process of its own, stopped with Ctrl-C
    (SIGINT) as a person stops it."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "ios-client-stub")])}
    proc = subprocess.Popen(
        [sys.executable, "-m", "conductor_local", "local", "--port", str(port), "--quiet"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


async def wait_listening(url: str, proc: subprocess.Popen[bytes]) -> None:
    async with asyncio.timeout(STARTUP_S):
        while True:
            assert proc.poll() is None, f"the stack exited with {proc.returncode}"
            try:
                async with connect(f"{url}?sessionId={uuid.uuid4()}", open_timeout=2):
                    return
            except (OSError, TimeoutError):
                await asyncio.sleep(0.2)


def test_after_a_restart_the_client_starts_its_numbering_afresh_and_the_next_request_is_answered() -> None:
    asyncio.run(asyncio.wait_for(restarted_stack(), 3 * STARTUP_S))


async def restarted_stack() -> None:
    port = unused_port()
    url = f"ws://127.0.0.1:{port}/"
    notices: list[str] = []
    with stack_process(port) as first:
        await wait_listening(url, first)
        client = ConductorClient(url, backoff=scaled_backoff(0.5), max_attempts=60, on_progress=notices.append)
        await client.connect()
        try:
            before = await client.say("hello there", timeout=20)
            assert before.completed and before.final_text == "You said: hello there"
            seen_before = client.last_seq
            assert seen_before is not None and seen_before > 2

            first.send_signal(signal.SIGINT)
            await asyncio.to_thread(first.wait, 20)
            await client.wait_until(lambda: not client.connected, 10)
            with stack_process(port) as second:
                await wait_listening(url, second)
                await client.wait_until(lambda: client.connected and client.session_ready is not None, 60)
                await client.wait_until(lambda: client.session_ready is not None and client.connections == 2, 10)
                assert client.session_ready is not None and not client.session_ready.resumed

                after = await client.say("second request", timeout=20)
                assert after.completed, after.events
                assert after.final_text == "You said: second request"
                assert next(e.seq for e in after.events if e.seq is not None) < seen_before
                assert client.duplicates == []
                again = await client.say("third request", timeout=20)
                assert again.completed and again.final_text == "You said: third request"
        finally:
            await client.close()

    afresh = [n for n in notices if "did not have this conversation" in n]
    assert len(afresh) == 1, notices
