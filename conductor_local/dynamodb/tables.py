"""The conductor's DynamoDB table, created on a local endpoint the way the infrastructure defines it."""

from __future__ import annotations

import contextlib
from typing import Any

from shared.adapters.session_records import SESSIONS_INDEX, SESSIONS_INDEX_PROJECTED

TTL_ATTRIBUTE = "expires_at"


def create_tables(dynamodb: Any, table_name: str) -> None:
    """Create the single ``pk``/``sk`` table (pay per request, TTL on ``expires_at``, the sessions
    index); idempotent."""
    with contextlib.suppress(dynamodb.exceptions.ResourceInUseException):
        dynamodb.create_table(
            TableName=table_name,
            AttributeDefinitions=[
                {"AttributeName": "pk", "AttributeType": "S"},
                {"AttributeName": "sk", "AttributeType": "S"},
                {"AttributeName": "owner", "AttributeType": "S"},
                {"AttributeName": "last_active", "AttributeType": "N"},
            ],
            KeySchema=[
                {"AttributeName": "pk", "KeyType": "HASH"},
                {"AttributeName": "sk", "KeyType": "RANGE"},
            ],
            GlobalSecondaryIndexes=[
                {
                    "IndexName": SESSIONS_INDEX,
                    "KeySchema": [
                        {"AttributeName": "owner", "KeyType": "HASH"},
                        {"AttributeName": "last_active", "KeyType": "RANGE"},
                    ],
                    "Projection": {"ProjectionType": "INCLUDE", "NonKeyAttributes": list(SESSIONS_INDEX_PROJECTED)},
                }
            ],
            BillingMode="PAY_PER_REQUEST",
        )
    dynamodb.get_waiter("table_exists").wait(TableName=table_name, WaiterConfig={"Delay": 1, "MaxAttempts": 30})
    ttl = dynamodb.describe_time_to_live(TableName=table_name)["TimeToLiveDescription"]
    if ttl.get("TimeToLiveStatus") not in ("ENABLED", "ENABLING"):
        dynamodb.update_time_to_live(
            TableName=table_name, TimeToLiveSpecification={"Enabled": True, "AttributeName": TTL_ATTRIBUTE}
        )
