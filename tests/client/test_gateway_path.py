"""The local API Gateway's WebSocket URL is its stage's: ``ws://HOST:PORT/`` (with or without the
slash, as the README writes it) or ``/local``, the stage's name. Any other path is refused before
``$connect`` with API Gateway's 403 ``{"message": "Forbidden"}``; no connection is made."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Iterator

import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import InvalidStatus

from conductor_local.stack import LocalStack

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def stack() -> Iterator[LocalStack]:
    with LocalStack(port=0, quiet=True) as local:
        yield local


def _base(stack: LocalStack) -> str:
    return stack.ws_url.rstrip("/")


async def _status(url: str) -> int:
    try:
        async with connect(f"{url}?sessionId={uuid.uuid4()}", open_timeout=5):
            return 101
    except InvalidStatus as refused:
        assert json.loads(refused.response.body or b"{}") == {"message": "Forbidden"}
        return refused.response.status_code


@pytest.mark.parametrize("path", ["", "/", "/local", "/local/"])
def test_the_stage_paths_connect(stack: LocalStack, path: str) -> None:
    assert asyncio.run(_status(_base(stack) + path)) == 101


@pytest.mark.parametrize("path", ["/wrong/path", "/wrong", "/local/extra", "/console/"])
def test_any_other_path_is_refused_as_api_gateway_refuses_it(stack: LocalStack, path: str) -> None:
    assert asyncio.run(_status(_base(stack) + path)) == 403
