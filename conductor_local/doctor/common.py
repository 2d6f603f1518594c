"""What every ``voiceide-conductor doctor`` check shares: the stage it looks at, the line it prints,
and how it reads AWS's errors."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from botocore.config import Config
from botocore.exceptions import ClientError

from shared.wire.model_rules import base_model_id

CLIENT_CONFIG = Config(connect_timeout=5, read_timeout=30, retries={"mode": "standard", "total_max_attempts": 2})
# Error codes AWS services answer a caller lacking a permission with (Bedrock, Lambda, API Gateway and
# Service Quotas: AccessDeniedException; CloudFormation: AccessDenied).
DENIED_CODES = frozenset({"AccessDenied", "AccessDeniedException", "UnauthorizedOperation", "UnauthorizedException"})


@dataclass(frozen=True)
class Target:
    """What the doctor looks at: one stage's deployment, as configured in cdk.json."""

    stage: str
    stack_name: str
    region: str
    model_id: str
    bedrock_region: str
    profile_regions: tuple[str, ...] = ()
    # How the turn runner asks the model to answer (``bedrock.effort``, ``bedrock.thinking``).
    effort: str = "low"
    thinking: str = "off"
    # API Gateway's account-level CloudWatch Logs role: whether this stage sets it
    # (``api_gateway_cloudwatch_role``), whether its WebSocket stage writes access logs (which need it)
    # and the ``access_logging`` setting that decided it, and the stages of cdk.json that set it in this region.
    creates_cloudwatch_role: bool = False
    access_logging: bool = True
    access_logging_setting: str = ""
    role_owners: tuple[str, ...] = ()
    # The account the stage pins (``account``; None: none): synth trusts a quota reading only for it.
    account: str | None = None
    # Reserved concurrency the stage asks for, of the message Lambda and of the turn runner (None: none),
    # and the account concurrency cdk.json plans (``lambdas.planned_account_concurrency``, never trusted).
    message_reserved_concurrency: int | None = None
    turn_reserved_concurrency: int | None = None
    planned_account_concurrency: int | None = None
    # The Bedrock quotas of the stage's model cdk.json plans (``bedrock.tokens_per_minute``,
    # ``bedrock.requests_per_minute``; None: no plan, the capacity model assumes the defaults).
    bedrock_tokens_per_minute: int | None = None
    bedrock_requests_per_minute: int | None = None

    @property
    def is_profile(self) -> bool:
        return bool(self.profile_regions)

    @property
    def is_global_profile(self) -> bool:
        return self.model_id.startswith("global.")

    @property
    def foundation_id(self) -> str:
        """The foundation model behind ``model_id`` (a profile id without its geography)."""
        return base_model_id(self.model_id)

    @property
    def reserved_concurrency(self) -> dict[str, int]:
        """The stage's reserved concurrency by function, for the functions that reserve any."""
        reserved = {"message": self.message_reserved_concurrency, "turn": self.turn_reserved_concurrency}
        return {name: value for name, value in reserved.items() if value}


@dataclass
class Readings:
    """The quotas the checks read (None: not read), for doctor to record (infra/quota_readings.py)."""

    lambda_concurrency: int | None = None
    lambda_unreserved: int | None = None
    bedrock_tokens_per_minute: int | None = None
    bedrock_requests_per_minute: int | None = None

    @property
    def lambda_read(self) -> bool:
        return self.lambda_concurrency is not None

    @property
    def bedrock_read(self) -> bool:
        return self.bedrock_tokens_per_minute is not None or self.bedrock_requests_per_minute is not None


@dataclass(frozen=True)
class CheckResult:
    """One printed line. ``ok`` False fails the run; ``warning`` marks a passing line worth reading
    (something doctor could not check, or a setting that works but is off)."""

    name: str
    ok: bool
    detail: str
    fix: str = ""
    warning: bool = False

    def line(self) -> str:
        if self.ok and not self.warning:
            return f"✓ {self.name}: {self.detail}"
        mark = "!" if self.ok else "✗"
        return f"{mark} {self.name}: {self.detail}" + (f" → {self.fix}" if self.fix else "")


def warning(name: str, detail: str, fix: str = "") -> CheckResult:
    return CheckResult(name, True, detail, fix, warning=True)


def could_not_check(name: str, action: str, resource: str = "") -> CheckResult:
    """A read-only call the caller may not make: said, never a failed run."""
    return warning(name, f"could not check: allow {action}" + (f" on {resource}" if resource else ""))


def code(error: ClientError) -> str:
    return str(error.response.get("Error", {}).get("Code", ""))


def message(error: ClientError) -> str:
    return str(error.response.get("Error", {}).get("Message", ""))


def error_text(error: ClientError) -> str:
    return f"{code(error) or 'error'}: {message(error) or error}"


def denied(error: ClientError) -> bool:
    """The caller lacks a permission (a read doctor makes is then reported, not failed)."""
    return code(error) in DENIED_CODES


def date(value: Any) -> str:
    return value.date().isoformat() if isinstance(value, datetime) else str(value)
