"""What a stage that keeps data must name before it synthesizes: someone to hear its alarms, and an
e-mail sender that can invite its people. Each refusal is one line naming the setting.

These are deployment requirements, not the settings' shape (infra/config.py): ``select_stage`` still
reads such a stage (doctor, the capacity model), and only synth refuses it.
"""

from __future__ import annotations

from infra.config import StageConfig, StageConfigError

# Cognito's built-in e-mail (COGNITO_DEFAULT) sends about 50 messages a day per account: far below
# inviting a launch's people (Amazon Cognito quotas, "Email messages sent daily").
COGNITO_DEFAULT_EMAILS_PER_DAY = 50


def check_deployable(config: StageConfig) -> None:
    """Refuse a retaining stage that names nobody to alarm, or that would invite its users through
    Cognito's built-in e-mail, or that allows the plain password flow."""
    if not config.retain:
        return
    name = config.name
    if not config.alarm_listeners:
        raise StageConfigError(
            f"stage {name!r} keeps data (removal_policy retain) but names nobody to hear its alarms: set "
            f"stages.{name}.alarm_email or stages.{name}.alarm_topic_arn (in cdk.json, or "
            f"-c stages.{name}.alarm_email=<address>)"
        )
    cognito = config.cognito
    if config.auth != "cognito" or cognito.existing:
        return
    if not cognito.ses_from_email:
        raise StageConfigError(
            f"stage {name!r} keeps data and invites its users through its own pool, but Cognito's built-in "
            f"e-mail sends about {COGNITO_DEFAULT_EMAILS_PER_DAY} a day: set stages.{name}.cognito.ses_from_email "
            f"to an address of a verified Amazon SES identity (in cdk.json, or "
            f"-c stages.{name}.cognito.ses_from_email=<address>)"
        )
    if cognito.password_sign_in:
        raise StageConfigError(
            f"stage {name!r} keeps data: stages.{name}.cognito.password_sign_in must be false (the app signs in "
            "with SRP; the plain password flow is for development stages)"
        )
