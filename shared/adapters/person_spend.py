"""A person's estimated spend per UTC day, for the daily ceiling (``CONDUCTOR_DAILY_BUDGET_USD``).

One item per person and day in the conductor's table, ``pk = PERSON#<principal>``,
``sk = SPEND#<yyyy-mm-dd>``, expiring two days later. ``usd`` is what the day's model requests
cost, with what the ones still running may cost: each request *reserves* its most before it is
sent, in one conditional update that also checks the ceiling (so requests of the person's sessions
at once can never pass it together), and is *settled* when it ends (its real cost replaces the
reservation; ``ADD``, so none is lost). Read and written only when the stage has a ceiling: without
one, no request touches it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from decimal import Decimal
from typing import Any

from botocore.exceptions import ClientError

KEPT_SECONDS = 2 * 24 * 3600


def _key(principal: str, day: str) -> dict[str, Any]:
    return {"pk": {"S": f"PERSON#{principal}"}, "sk": {"S": f"SPEND#{day}"}}


class PersonSpend:
    def __init__(self, client: Any, table_name: str, clock: Callable[[], float] = time.time) -> None:
        self._client = client
        self._table = table_name
        self._clock = clock

    def spent(self, principal: str, day: str) -> float:
        item = self._client.get_item(TableName=self._table, Key=_key(principal, day), ConsistentRead=True).get("Item")
        return float(item["usd"]["N"]) if item and "usd" in item else 0.0

    def reserve(self, principal: str, day: str, usd: float, ceiling: float) -> bool:
        """Add ``usd`` to the day's spend if it then stays within ``ceiling``; False (nothing
        added) when it would not. One conditional update: the check and the spend are one."""
        room = ceiling - usd
        if room < 0:
            return False
        try:
            self._client.update_item(
                TableName=self._table,
                Key=_key(principal, day),
                UpdateExpression="ADD usd :usd SET expires_at = :expires",
                ConditionExpression="attribute_not_exists(usd) OR usd <= :room",
                ExpressionAttributeValues={
                    ":usd": _number(usd),
                    ":room": _number(room),
                    ":expires": {"N": str(int(self._clock()) + KEPT_SECONDS)},
                },
            )
        except ClientError as error:
            if error.response["Error"]["Code"] != "ConditionalCheckFailedException":
                raise
            return False
        return True

    def add(self, principal: str, day: str, usd: float) -> None:
        """Add to (or, negative, take from) the day's spend: a request settled at its real cost."""
        if usd == 0:
            return
        self._client.update_item(
            TableName=self._table,
            Key=_key(principal, day),
            UpdateExpression="ADD usd :usd SET expires_at = :expires",
            ExpressionAttributeValues={
                ":usd": _number(usd),
                ":expires": {"N": str(int(self._clock()) + KEPT_SECONDS)},
            },
        )


def _number(usd: float) -> dict[str, str]:
    return {"N": str(Decimal(str(round(usd, 8))))}
