"""A person's estimated spend per UTC day, for the daily ceiling (``CONDUCTOR_DAILY_BUDGET_USD``).

One item per person and day in the conductor's table, ``pk = PERSON#<principal>``,
``sk = SPEND#<yyyy-mm-dd>``, ``usd`` added to at each turn's end (``ADD``, so concurrent turns of
the person's sessions never lose one) and expiring two days later. Read and written only when the
stage has a ceiling: without one, the hot path never touches it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from decimal import Decimal
from typing import Any

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

    def add(self, principal: str, day: str, usd: float) -> None:
        if usd <= 0:
            return
        self._client.update_item(
            TableName=self._table,
            Key=_key(principal, day),
            UpdateExpression="ADD usd :usd SET expires_at = :expires",
            ExpressionAttributeValues={
                ":usd": {"N": str(Decimal(str(round(usd, 8))))},
                ":expires": {"N": str(int(self._clock()) + KEPT_SECONDS)},
            },
        )
