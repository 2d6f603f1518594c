"""Builds the CDK app: reads the stage, validates its settings, adds the stack and cdk-nag."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from aws_cdk import App, Environment, Validations
from cdk_nag import AwsSolutionsChecks

from infra.config import is_true, read_cdk_json_context, select_stage
from infra.stack import ConductorStack


def build_app(overrides: Mapping[str, Any] | None = None, outdir: str | None = None) -> tuple[App, ConductorStack]:
    """The app with the stack of the stage named by the ``stage`` context (``dev`` by default).

    cdk.json's context is the base (so ``python app.py`` behaves like ``cdk synth``), the CLI's
    ``-c`` values come next, and ``overrides`` win.
    """
    app = App(context=read_cdk_json_context(), post_cli_context=dict(overrides or {}), outdir=outdir)
    config = select_stage(app.node.try_get_context("stages"), app.node.try_get_context("stage"))
    account = config.account or os.environ.get("CDK_DEFAULT_ACCOUNT")
    stack = ConductorStack(
        app,
        config.stack_name,
        config=config,
        skip_bundle_deps=is_true(app.node.try_get_context("skip_bundle_deps") or False),
        env=Environment(account=account, region=config.region),
        description=f"VoiceIDE conductor ({config.name}): WebSocket API, Lambdas, DynamoDB, Bedrock",
        termination_protection=config.retain,
    )
    Validations.of(app).add_plugins(AwsSolutionsChecks(app, verbose=True, write_suppressions_to_cloud_formation=True))
    return app, stack
