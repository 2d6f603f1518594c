"""Tool-call deadline alarms as delayed SQS messages.

A message becomes visible when the deadline is due, and the tool-deadline function then expires
the session's overdue calls. SQS delays a message by at most 900 s (15 min); a later deadline
(a build or a test run) is sent with the maximum delay and sent again by the consumer with what
remains, until it is due.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

MAX_DELAY_S = 900
"""SQS's maximum ``DelaySeconds`` (15 minutes)."""
DUE_SLACK_S = 1.0
"""An alarm this close to its deadline counts as due (a delay is whole seconds)."""


class DeadlineAlarm(BaseModel):
    """The body of an alarm message."""

    model_config = ConfigDict(populate_by_name=True, extra="ignore", frozen=True)

    session_id: str = Field(alias="sessionId", min_length=1, max_length=200)
    endpoint: str = Field(min_length=1, max_length=2048)
    due_at: float = Field(alias="dueAt", ge=0)

    def to_body(self) -> str:
        return json.dumps(self.model_dump(by_alias=True), separators=(",", ":"))


def delay_seconds(due_at: float, now: float) -> int:
    """The ``DelaySeconds`` for a deadline: rounded up (never early), within 0..900."""
    return max(0, min(MAX_DELAY_S, math.ceil(due_at - now)))


class SqsDeadlineAlarms:
    """``DeadlineAlarms`` on an SQS queue (standard queue: a per-message delay is allowed)."""

    def __init__(self, client: Any, queue_url: str, clock: Callable[[], float] = time.time) -> None:
        self.client = client
        self.queue_url = queue_url
        self.clock = clock

    def set_alarm(self, session_id: str, endpoint: str, due_at: float) -> None:
        self.send(DeadlineAlarm(session_id=session_id, endpoint=endpoint, due_at=due_at))

    def send(self, alarm: DeadlineAlarm) -> None:
        self.client.send_message(
            QueueUrl=self.queue_url,
            MessageBody=alarm.to_body(),
            DelaySeconds=delay_seconds(alarm.due_at, self.clock()),
        )

    def is_due(self, alarm: DeadlineAlarm) -> bool:
        return alarm.due_at - self.clock() <= DUE_SLACK_S
