"""When a person last asked the conductor to remember something: the memory's write limit.

One item per person in the conductor's table, ``pk = PERSON#<actor>``, ``sk = MEMORY-WRITES``: the
times of their writes in the last minute and a version. A write reads it, asks the rule
(``shared.core.person_memory.write_allowed``) and puts it back conditional on the version it read,
so two writes at once of the same person (two sessions) are both counted. Touched only by
``memory.write``: never on a turn's way to its first word.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from botocore.exceptions import ClientError

from shared.core.person_memory import WRITE_WINDOW_S, write_allowed

ATTEMPTS = 4


class MemoryWriteLog:
    def __init__(self, client: Any, table_name: str, clock: Callable[[], float] = time.time) -> None:
        self._client = client
        self._table = table_name
        self._clock = clock

    def take(self, actor: str) -> float | None:
        """Count one write of ``actor`` now; None when taken, else the seconds to wait (nothing counted)."""
        key = {"pk": {"S": f"PERSON#{actor}"}, "sk": {"S": "MEMORY-WRITES"}}
        for _ in range(ATTEMPTS):
            now = self._clock()
            item = self._client.get_item(TableName=self._table, Key=key, ConsistentRead=True).get("Item") or {}
            times = [float(value["N"]) for value in item.get("times", {}).get("L", [])]
            kept, wait = write_allowed(times, now)
            if wait is not None:
                return wait
            version = int(item["v"]["N"]) if "v" in item else 0
            try:
                self._client.put_item(
                    TableName=self._table,
                    Item={
                        **key,
                        "times": {"L": [{"N": f"{at:.3f}"} for at in kept]},
                        "v": {"N": str(version + 1)},
                        "expires_at": {"N": str(int(now + 2 * WRITE_WINDOW_S))},
                    },
                    ConditionExpression="attribute_not_exists(v) OR v = :v",
                    ExpressionAttributeValues={":v": {"N": str(version)}},
                )
            except ClientError as error:
                if error.response["Error"]["Code"] != "ConditionalCheckFailedException":
                    raise
                continue  # another write of the same person came first: read again
            return None
        return WRITE_WINDOW_S / 2  # the person writes from many places at once: let the model say so
