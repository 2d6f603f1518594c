"""The reliability suites run on the handler harness of ``tests/handlers``.

The harness fixtures are re-used (``conductor`` → ``Harness``, moto in server mode answering one
request at a time as DynamoDB's atomicity needs, the local Bedrock endpoint, the recording
management API), with one change: each test gets a table of its own (moto deep-copies the table
on every transaction, so a table shared by the whole run gets slower with every test).

After every test the harness still asserts that every touched session's history is valid.
The figures the suites collect (``tests.reliability.figures``) are printed in the terminal
summary (``tests/conftest.py``, which also adds up what each parallel worker counted), so the CI
log shows how many examples, iterations and fault cases actually ran.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import boto3
import pytest

from conductor_local.bedrock.server import LocalBedrockServer, RejectRequest, Script
from conductor_local.dynamodb.tables import create_tables
from lambdas import runtime
from shared.adapters.store import VersionConflict
from tests.handlers.conftest import (  # noqa: F401  (fixtures, re-exported for this directory)
    Harness,
    bedrock_server,
    lambda_server,
    management,
    moto_url,
)
from tests.handlers.conftest import conductor as handler_conductor  # noqa: F401  (fixture)
from tests.reliability.figures import count
from tests.reliability.support import RoutingResponder, release_moto_copies


def _dynamodb(url: str) -> Any:
    return boto3.client(
        "dynamodb", endpoint_url=url, region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x"
    )


@pytest.fixture
def _tables(moto_url: str) -> Iterator[list[str]]:  # noqa: F811
    """Tables made for one test; dropped after the harness has checked their histories."""
    made: list[str] = []
    yield made
    client = _dynamodb(moto_url)
    for table in made:
        client.delete_table(TableName=table)
    release_moto_copies()


@pytest.fixture
def conductor(
    _tables: list[str],
    handler_conductor: Harness,  # noqa: F811
    moto_url: str,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> Harness:
    """The handler harness on a fresh table of its own."""
    table = f"reliability-{uuid.uuid4().hex[:12]}"
    create_tables(_dynamodb(moto_url), table)
    _tables.append(table)
    monkeypatch.setenv("CONDUCTOR_TABLE", table)
    runtime.reset()
    return handler_conductor


@pytest.fixture
def route(
    conductor: Harness,
    bedrock_server: tuple[LocalBedrockServer, Any],  # noqa: F811  (the fixture)
) -> Callable[[Callable[[dict[str, Any]], Script | RejectRequest]], RoutingResponder]:
    """Install a ``RoutingResponder`` on the local Bedrock endpoint (instead of the script queue)."""
    _, switchable = bedrock_server

    def install(rule: Callable[[dict[str, Any]], Script | RejectRequest]) -> RoutingResponder:
        responder = RoutingResponder(rule)
        switchable.current = responder
        return responder

    return install


class ConflictCounter:
    """Counts the commits DynamoDB refused because the session changed (and that were retried)."""

    def __init__(self) -> None:
        self.conflicts = 0
        self._lock = threading.Lock()

    def add(self) -> None:
        with self._lock:
            self.conflicts += 1


@pytest.fixture
def conflicts(conductor: Harness, monkeypatch: pytest.MonkeyPatch) -> Iterator[ConflictCounter]:
    """Wrap the store's commit to count version conflicts; adds them to the run's figures."""
    store = runtime.store()
    original = store.commit
    counter = ConflictCounter()

    def counting_commit(*args: Any, **kwargs: Any) -> Any:
        try:
            return original(*args, **kwargs)
        except VersionConflict:
            counter.add()
            raise

    monkeypatch.setattr(store, "commit", counting_commit)
    yield counter
    count("races: version conflicts met and retried", counter.conflicts)
