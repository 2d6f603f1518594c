"""The conductor's table on a moto server."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto.server import ThreadedMotoServer

from conductor_local.dynamodb.tables import create_tables
from shared.adapters.session_records import SESSIONS_INDEX, SESSIONS_INDEX_PROJECTED


@pytest.fixture
def dynamodb() -> Iterator[Any]:
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        yield boto3.client(
            "dynamodb",
            endpoint_url=f"http://{host}:{port}",
            region_name="us-east-1",
            aws_access_key_id="x",
            aws_secret_access_key="x",
        )
    finally:
        server.stop()


def test_create_tables_builds_the_single_table_once(dynamodb: Any) -> None:
    create_tables(dynamodb, "conductor-tables-test")
    create_tables(dynamodb, "conductor-tables-test")

    table = dynamodb.describe_table(TableName="conductor-tables-test")["Table"]
    assert {(k["AttributeName"], k["KeyType"]) for k in table["KeySchema"]} == {("pk", "HASH"), ("sk", "RANGE")}
    assert {(a["AttributeName"], a["AttributeType"]) for a in table["AttributeDefinitions"]} == {
        ("pk", "S"),
        ("sk", "S"),
        ("owner", "S"),
        ("last_active", "N"),
    }
    (index,) = table["GlobalSecondaryIndexes"]
    assert index["IndexName"] == SESSIONS_INDEX
    assert [(k["AttributeName"], k["KeyType"]) for k in index["KeySchema"]] == [
        ("owner", "HASH"),
        ("last_active", "RANGE"),
    ]
    assert index["Projection"] == {"ProjectionType": "INCLUDE", "NonKeyAttributes": list(SESSIONS_INDEX_PROJECTED)}
    assert table["BillingModeSummary"]["BillingMode"] == "PAY_PER_REQUEST"
    ttl = dynamodb.describe_time_to_live(TableName="conductor-tables-test")["TimeToLiveDescription"]
    assert (ttl["TimeToLiveStatus"], ttl["AttributeName"]) == ("ENABLED", "expires_at")
