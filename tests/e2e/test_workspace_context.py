"""The person's project on the local stack, over real WebSockets: the phone (the client stub as a
voice and display device) and the desktop companion over a temporary git repository. The
companion's context reaches the model (the offline brain's ``context`` directive says what it was
given), changes when a file changes, waits for the next turn when it changes mid-turn, and never
reaches another person's session; the companion's names give the phone its recognizer's
vocabulary and the model the names the phone's words may have meant."""

from __future__ import annotations

import asyncio
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from conductor_local.stack import LocalStack
from shared.wire.protocol import AssistantSpeechFinal
from shared.wire.workspace import NamesHeard, Vocabulary
from tests.e2e.conftest import TURN_TIMEOUT_S, WAIT_S, async_test, client_for
from voiceide_client.companion.context_sender import ContextTiming
from voiceide_client.companion.device import companion_device
from voiceide_client.companion.session import Companion
from voiceide_client.connection.link import scaled_backoff
from voiceide_client.conversation.client import ConductorClient

pytestmark = pytest.mark.e2e

PHONE = {"id": "iphone-ana", "name": "Ana's iPhone", "roles": ["voice", "display"]}
FAST = ContextTiming(poll_s=0.1, min_gap_s=0.1, names_every_s=0.5, max_busy=1.0)
CHANGE_S = 20.0  # bound on a file change reaching the model (the companion polls every 0.1 s)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "shop"
    (root / "src").mkdir(parents=True)
    (root / "src" / "users.ts").write_text("export function getUserById(id: string) {\n  return id;\n}\n")
    (root / "src" / "orders.py").write_text("def place_order(cart):\n    return cart\n")
    subprocess.run(["git", "init", "-q", "-b", "main", str(root)], check=True)
    return root


async def said(client: ConductorClient, text: str) -> str:
    turn = await client.say(text, timeout=TURN_TIMEOUT_S)
    assert turn.completed, turn
    return "\n".join(turn.finals)


async def context_until(client: ConductorClient, wanted: str) -> str:
    """Ask for the context until it shows ``wanted`` (the companion sends a change within a poll)."""
    deadline = time.monotonic() + CHANGE_S
    while True:
        given = await said(client, "context")
        if wanted in given or time.monotonic() > deadline:
            return given
        await asyncio.sleep(0.2)


def companion_on(stack: LocalStack, session_id: str, repo: Path) -> Companion:
    return Companion(
        stack.ws_url,
        session_id,
        repo,
        device=companion_device(repo, display=False),
        backoff=scaled_backoff(0.01),
        context_timing=FAST,
    )


@async_test
async def test_the_companions_context_and_names_reach_the_model_and_the_phone(stack: LocalStack, repo: Path) -> None:
    session_id = str(uuid.uuid4())
    phone = client_for(stack, session_id, device=PHONE)
    async with phone:
        await phone.wait_for(lambda e: e.kind_name == "sessionReady", WAIT_S)
        async with companion_on(stack, session_id, repo):
            vocabulary = await phone.wait_for(lambda e: isinstance(e.payload, Vocabulary), CHANGE_S)
            assert isinstance(vocabulary.payload, Vocabulary)
            assert "get user by id" in vocabulary.payload.phrases

            given = await context_until(phone, "workspace: shop")
            assert '<context kind="workspace">' in given and "workspace: shop" in given
            assert "branch: main" in given
            assert str(repo.parent) not in given and "pytest" not in given  # a name, never the folder's path

            (repo / "src" / "billing.py").write_text("def charge_card(card):\n    return card\n")
            assert "src/billing.py" in await context_until(phone, "src/billing.py")

            # A change while a turn streams waits for the next request; the answer is not cut.
            before = len(phone.events)
            streaming = asyncio.create_task(said(phone, "slow 1.5 the answer goes on while the file changes"))
            await phone.wait_for(lambda e: e.kind_name == "assistantSpeechPartial", TURN_TIMEOUT_S, since=before)
            (repo / "src" / "refunds.py").write_text("def refund(order):\n    return order\n")
            answer = await streaming
            assert "the answer goes on while the file changes" in answer and "src/refunds.py" not in answer
            finals = [e.payload for e in phone.events[before:] if isinstance(e.payload, AssistantSpeechFinal)]
            assert not any(final.interrupted for final in finals)
            assert "src/refunds.py" in await context_until(phone, "src/refunds.py")

            # The words are never rewritten; the model and the phone's screen get the candidates.
            before = len(phone.events)
            heard = await said(phone, "what does get user buy id return")
            assert heard == "You said: what does get user buy id return"
            shown = [e.payload for e in phone.events[before:] if isinstance(e.payload, NamesHeard)]
            assert shown and shown[0].matches[0].name == "getUserById"
            assert "getUserById in src/users.ts" in await said(phone, "context get user buy id")  # shown plain


@async_test
async def test_another_persons_session_never_gets_the_context(stack: LocalStack, repo: Path) -> None:
    session_id = str(uuid.uuid4())
    phone = client_for(stack, session_id, device=PHONE)
    stranger = client_for(stack, str(uuid.uuid4()), device={**PHONE, "id": "iphone-bob"})
    async with phone, companion_on(stack, session_id, repo):
        await phone.wait_for(lambda e: e.kind_name == "sessionReady", WAIT_S)
        assert "workspace: shop" in await context_until(phone, "workspace: shop")
        async with stranger:
            await stranger.wait_for(lambda e: e.kind_name == "sessionReady", WAIT_S)
            assert await said(stranger, "context") == "No context was given."
            assert not any(isinstance(e.payload, Vocabulary | NamesHeard) for e in stranger.events)
