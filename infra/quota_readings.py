"""What ``voiceide-conductor doctor`` read of an account's quotas, kept where synth finds it.

doctor records each reading in ``cdk.context.json`` at the repository root (CDK's own file for values
looked up from an account; the CDK CLI hands it to the app as context; an operator commits it), one key
per account and region::

    "voiceide:quotas:<account>:<region>": {
      "account": "123456789012", "region": "us-east-1", "read_at": "2026-11-28T12:00:00Z",
      "lambda": {"concurrent_executions": 1000, "unreserved_concurrent_executions": 1000},
      "bedrock": {"<model id>": {"tokens_per_minute": 2000000, "requests_per_minute": 200}}
    }

Numbers doctor could not read are absent. A stage trusts a reading only when it pins its account
(``stages.<stage>.account``) and a reading for that account and the stage's region exists; a value
stated in cdk.json without a reading is a plan and never reserves anything.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CDK_CONTEXT_JSON = Path(__file__).resolve().parent.parent / "cdk.context.json"
KEY_PREFIX = "voiceide:quotas"


@dataclass(frozen=True)
class BedrockReading:
    """One model's Bedrock quotas in the reading's region (None: not read)."""

    tokens_per_minute: int | None = None
    requests_per_minute: int | None = None


@dataclass(frozen=True)
class QuotaReading:
    """The quotas doctor read in one account and region, and when."""

    account: str
    region: str
    read_at: str
    lambda_concurrency: int | None = None
    lambda_unreserved: int | None = None
    bedrock: dict[str, BedrockReading] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """The reading as stored under its key (absent numbers left out)."""
        lambda_part = _without_none(
            {
                "concurrent_executions": self.lambda_concurrency,
                "unreserved_concurrent_executions": self.lambda_unreserved,
            }
        )
        bedrock_part = {
            model: _without_none(
                {"tokens_per_minute": quotas.tokens_per_minute, "requests_per_minute": quotas.requests_per_minute}
            )
            for model, quotas in sorted(self.bedrock.items())
        }
        stored: dict[str, Any] = {"account": self.account, "region": self.region, "read_at": self.read_at}
        if lambda_part:
            stored["lambda"] = lambda_part
        if bedrock_part:
            stored["bedrock"] = bedrock_part
        return stored

    @classmethod
    def from_json(cls, stored: Mapping[str, Any]) -> QuotaReading:
        """A reading from its stored form; malformed numbers count as not read."""
        lambda_part = stored.get("lambda")
        lambda_part = lambda_part if isinstance(lambda_part, Mapping) else {}
        bedrock_part = stored.get("bedrock")
        bedrock_part = bedrock_part if isinstance(bedrock_part, Mapping) else {}
        return cls(
            account=str(stored.get("account", "")),
            region=str(stored.get("region", "")),
            read_at=str(stored.get("read_at", "")),
            lambda_concurrency=_count(lambda_part.get("concurrent_executions")),
            lambda_unreserved=_count(lambda_part.get("unreserved_concurrent_executions")),
            bedrock={
                str(model): BedrockReading(
                    tokens_per_minute=_count(quotas.get("tokens_per_minute")),
                    requests_per_minute=_count(quotas.get("requests_per_minute")),
                )
                for model, quotas in bedrock_part.items()
                if isinstance(quotas, Mapping)
            },
        )


def reading_key(account: str, region: str) -> str:
    """The context key of the reading for ``account`` in ``region``."""
    return f"{KEY_PREFIX}:{account}:{region}"


def reading_for(context: Mapping[str, Any], account: str | None, region: str) -> QuotaReading | None:
    """The reading for ``account`` in ``region`` in ``context``; None when no account is pinned or none was read.

    The CDK CLI passes cdk.context.json's values as context; a value given with ``-c`` arrives as a string.
    """
    if not account:
        return None
    stored = context.get(reading_key(account, region))
    if isinstance(stored, str):
        try:
            stored = json.loads(stored)
        except ValueError:
            return None
    if not isinstance(stored, Mapping):
        return None
    reading = QuotaReading.from_json(stored)
    if reading.account != account or reading.region != region:
        return None
    return reading


def load_context(path: Path = CDK_CONTEXT_JSON) -> dict[str, Any]:
    """The context file's values (an empty dict when the file is absent)."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    loaded = json.loads(text)
    return loaded if isinstance(loaded, dict) else {}


def record(path: Path, reading: QuotaReading) -> None:
    """Merge ``reading`` into the context file at ``path`` under its key, keeping every other key."""
    context = load_context(path)
    context[reading_key(reading.account, reading.region)] = reading.to_json()
    path.write_text(json.dumps(context, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def _without_none(values: dict[str, int | None]) -> dict[str, int]:
    return {name: value for name, value in values.items() if value is not None}


def _count(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        return None
    return value
