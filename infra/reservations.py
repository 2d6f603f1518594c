"""Which reserved concurrency a stage may apply: only what a quota ``doctor`` read proves.

A reservation that leaves less than 100 of the account's Lambda quota unreserved makes the deploy fail
(and a first deploy roll back). New accounts start at 10 or 50 executions, not 1,000, so a quota stated in
cdk.json proves nothing. Synth applies ``lambdas.turn_reserved_concurrency`` and
``lambdas.reserved_concurrency`` only when the stage pins its account (``account``) and cdk.context.json
holds a reading of that account's quota in the stage's region (infra/quota_readings.py); a reading that
cannot hold them fails synth with one line naming the setting. Without a reading the stage reserves
nothing: it deploys at any quota, and synth says why it reserved nothing.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from aws_cdk import Annotations, Stack

from infra.config import LAMBDA_CONCURRENCY_QUOTA_CODE, MIN_UNRESERVED_CONCURRENCY, StageConfig, StageConfigError
from infra.quota_readings import QuotaReading, reading_for

UNPROVEN_WARNING = "@voiceide/conductor:reservationWithoutReading"


@dataclass(frozen=True)
class Reservations:
    """The reserved concurrency synth applies (None: none), and why it applies none of what the stage wants."""

    turn: int | None = None
    message: int | None = None
    withheld: str = ""


def reservations(config: StageConfig, context: Mapping[str, Any]) -> Reservations:
    """What ``config`` may reserve, given the readings in ``context`` (cdk.context.json's values)."""
    lambdas = config.lambdas
    wanted = lambdas.reserved
    if not wanted:
        return Reservations()
    reading = reading_for(context, config.account, config.region)
    name = config.name
    if config.account is None:
        return Reservations(
            withheld=f"stage {name!r} pins no account (stages.{name}.account), so no quota reading covers it: "
            f"it reserves none of the {wanted:,} executions lambdas asks for (the functions share the account's "
            "unreserved pool)"
        )
    if reading is None or reading.lambda_concurrency is None:
        return Reservations(
            withheld=f"stage {name!r} has no Lambda quota reading for account {config.account} in {config.region} "
            f"(cdk.context.json): it reserves none of the {wanted:,} executions lambdas asks for; run "
            f"`voiceide-conductor doctor --stage {name}` with that account's credentials and commit cdk.context.json"
        )
    _check_fits(config, reading)
    return Reservations(turn=lambdas.turn_reserved_concurrency, message=lambdas.reserved_concurrency)


def _check_fits(config: StageConfig, reading: QuotaReading) -> None:
    quota = reading.lambda_concurrency or 0
    lambdas = config.lambdas
    room = max(quota - MIN_UNRESERVED_CONCURRENCY, 0)
    if lambdas.reserved <= room:
        return
    setting = f"stages.{config.name}.lambdas.turn_reserved_concurrency"
    asked = f"{lambdas.turn_reserved_concurrency or 0:,}"
    if lambdas.reserved_concurrency:
        setting += " + reserved_concurrency"
        asked += f" + {lambdas.reserved_concurrency:,}"
    raise StageConfigError(
        f"{setting} ({asked}) must leave {MIN_UNRESERVED_CONCURRENCY} of account {reading.account}'s Lambda quota "
        f"in {reading.region} unreserved ({quota:,}, read {reading.read_at}): at most {room:,}; lower it, or raise "
        f"the quota (Service Quotas, {LAMBDA_CONCURRENCY_QUOTA_CODE}) and run `voiceide-conductor doctor --stage "
        f"{config.name}` again"
    )


def announce(stack: Stack, reserved: Reservations) -> None:
    """Say why the stage reserves nothing, in the assembly and on stderr (a synth's reader sees it)."""
    if not reserved.withheld:
        return
    Annotations.of(stack).add_warning_v2(UNPROVEN_WARNING, reserved.withheld)
    print(f"warning: {reserved.withheld}", file=sys.stderr, flush=True)
