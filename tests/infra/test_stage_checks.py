"""A stage that keeps data names someone to alarm and an SES sender before it synthesizes
(infra/stage_checks.py): one line names the setting, in process and from ``python app.py``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from infra.config import StageConfigError, select_stage
from infra.stage_checks import check_deployable
from tests.infra.conftest import stage_like_prod

ROOT = Path(__file__).resolve().parents[2]


def check(**changes: Any) -> None:
    check_deployable(select_stage({"qa": stage_like_prod(**changes)}, "qa"))


def refusal(**changes: Any) -> str:
    with pytest.raises(StageConfigError) as error:
        check(**changes)
    assert "\n" not in str(error.value)
    return str(error.value)


def test_a_retaining_stage_with_someone_to_alarm_and_an_ses_sender_passes() -> None:
    check()  # prod's settings as deployed
    check(alarm_email=None, alarm_topic_arn="arn:aws:sns:us-east-1:123456789012:oncall")


def test_a_retaining_stage_naming_nobody_to_alarm_is_refused() -> None:
    assert refusal(alarm_email=None) == (
        "stage 'qa' keeps data (removal_policy retain) but names nobody to hear its alarms: set "
        "stages.qa.alarm_email or stages.qa.alarm_topic_arn (in cdk.json, or -c stages.qa.alarm_email=<address>)"
    )


def test_a_retaining_stage_inviting_through_cognitos_own_email_is_refused() -> None:
    cognito = {**stage_like_prod()["cognito"], "ses_from_email": None}
    assert refusal(cognito=cognito).startswith(
        "stage 'qa' keeps data and invites its users through its own pool, but Cognito's built-in e-mail sends "
        "about 50 a day: set stages.qa.cognito.ses_from_email"
    )
    # An existing pool sends its own e-mail; a stage that keeps nothing may use Cognito's.
    check(cognito={"user_pool_id": "us-east-1_AbC", "client_ids": ["abc"]})
    check(cognito=cognito, removal_policy="destroy", alarm_email=None)


def test_a_retaining_stage_may_not_allow_the_plain_password_flow() -> None:
    cognito = {**stage_like_prod()["cognito"], "password_sign_in": True}
    assert "stages.qa.cognito.password_sign_in must be false" in refusal(cognito=cognito)


@pytest.mark.infra
def test_python_app_py_refuses_prod_without_its_deploy_settings_in_one_line(tmp_path: Path) -> None:
    """As the CDK CLI runs the app: cdk.json's prod as shipped fails synth with one error line; given the
    settings with ``-c stages.prod.…`` it passes that check (and, pinning no account, reserves nothing)."""

    def run(context: dict[str, str]) -> subprocess.CompletedProcess[str]:
        env = {k: v for k, v in os.environ.items() if k != "CDK_DEFAULT_ACCOUNT"}
        env.update(CDK_OUTDIR=str(tmp_path), CDK_CONTEXT_JSON=json.dumps(context))
        return subprocess.run(
            [sys.executable, "app.py"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False
        )

    result = run({"stage": "prod"})
    assert result.returncode == 1
    assert [line for line in result.stderr.splitlines() if line.startswith("error:")] == [
        "error: stage 'prod' keeps data (removal_policy retain) but names nobody to hear its alarms: set "
        "stages.prod.alarm_email or stages.prod.alarm_topic_arn (in cdk.json, or "
        "-c stages.prod.alarm_email=<address>)"
    ]
    result = run({"stage": "prod", "stages.prod.alarm_email": "oncall@example.com"})
    assert [line for line in result.stderr.splitlines() if line.startswith("error:")] == [
        "error: stage 'prod' keeps data and invites its users through its own pool, but Cognito's built-in e-mail "
        "sends about 50 a day: set stages.prod.cognito.ses_from_email to an address of a verified Amazon SES "
        "identity (in cdk.json, or -c stages.prod.cognito.ses_from_email=<address>)"
    ]
    assert not list(tmp_path.glob("*.template.json"))
