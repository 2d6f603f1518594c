"""``voiceide-conductor local`` prices each turn as the dev stage does: its table is cdk.json's dev
prices, and a turn's ``turnUsage`` carries the cost."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from conductor_local.stack import DEV_PRICES, LocalStack
from voiceide_client.conversation.client import ConductorClient

REPO = Path(__file__).resolve().parents[2]


def test_the_local_prices_are_the_dev_stages() -> None:
    stages = json.loads((REPO / "cdk.json").read_text(encoding="utf-8"))["context"]["stages"]
    assert stages["dev"]["bedrock"]["prices"] == DEV_PRICES


def test_a_local_turn_says_what_it_cost(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CONDUCTOR_PRICES", raising=False)

    async def converse(url: str) -> None:
        async with ConductorClient(url) as client:
            turn = await client.say("hello there", timeout=30)
            await client.wait_until(lambda: turn.usage is not None, 15)
        usage = turn.usage
        assert usage is not None and usage.input_tokens > 0
        assert usage.cost_usd is not None and usage.cost_usd > 0
        assert usage.prices_as_of == DEV_PRICES["as_of"]

    with LocalStack(port=0, quiet=True) as stack:
        asyncio.run(asyncio.wait_for(converse(stack.ws_url), 60))
