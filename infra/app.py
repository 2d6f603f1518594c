"""Builds the CDK app: reads the stage, validates its settings, adds the stack and cdk-nag."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from aws_cdk import App, Aws, CfnRule, CfnRuleAssertion, Environment, Fn, Stack, Validations
from cdk_nag import AwsSolutionsChecks

from infra.bundling import BundlingError
from infra.config import apply_overrides, is_true, read_cdk_json_context, select_stage
from infra.quota_readings import load_context
from infra.reservations import announce, reservations
from infra.stack import ConductorStack
from infra.stage_checks import check_deployable

#: the template rule that keeps a stack synthesized without its dependencies from being deployed
SYNTH_ONLY_RULE = "SynthOnlyNeverDeploy"
SYNTH_ONLY_REFUSAL = (
    "This template was synthesized with -c skip_bundle_deps=true: its Lambda layer is empty and every "
    "function would fail. Synthesize and deploy without skip_bundle_deps."
)


def build_app(overrides: Mapping[str, Any] | None = None, outdir: str | None = None) -> tuple[App, ConductorStack]:
    """The app with the stack of the stage named by the ``stage`` context (``dev`` by default).

    cdk.json's context and the quota readings of cdk.context.json are the base (so ``python app.py``
    behaves like ``cdk synth``), the CLI's ``-c`` values come next, and ``overrides`` win. A
    ``stages.<stage>.<setting>`` key sets one setting of one stage (``apply_overrides``).
    """
    base = {**load_context(), **read_cdk_json_context()}
    app = App(context=base, post_cli_context=dict(overrides or {}), outdir=outdir)
    context = app.node.get_all_context()
    stages = apply_overrides(app.node.try_get_context("stages"), context)
    config = select_stage(stages, app.node.try_get_context("stage"))
    check_deployable(config)
    reserved = reservations(config, context)
    skip_bundle_deps = _skip_bundle_deps(app, overrides or {})
    account = config.account or os.environ.get("CDK_DEFAULT_ACCOUNT")
    stack = ConductorStack(
        app,
        config.stack_name,
        config=config,
        reservations=reserved,
        skip_bundle_deps=skip_bundle_deps,
        env=Environment(account=account, region=config.region),
        description=f"VoiceIDE conductor ({config.name}): WebSocket API, Lambdas, DynamoDB, Bedrock",
        termination_protection=config.retain,
    )
    announce(stack, reserved)
    if skip_bundle_deps:
        refuse_deployment(stack)
    Validations.of(app).add_plugins(AwsSolutionsChecks(app, verbose=True, write_suppressions_to_cloud_formation=True))
    return app, stack


def _skip_bundle_deps(app: App, overrides: Mapping[str, Any]) -> bool:
    """Whether to build the layer without its dependencies: synth-only use, never a deploy.

    The CDK CLI runs the app the same way for ``synth`` and ``deploy`` and does not tell it which,
    so context from the CLI (or cdk.json) must say ``synth_only`` as well. ``overrides`` come from
    code in this process (the tests), which only synthesizes. Either way the template then carries
    a rule that makes CloudFormation refuse to create or update the stack from it.
    """
    if not is_true(app.node.try_get_context("skip_bundle_deps") or False):
        return False
    if is_true(overrides.get("skip_bundle_deps", False)) or is_true(app.node.try_get_context("synth_only") or False):
        return True
    raise BundlingError(
        "-c skip_bundle_deps=true builds an empty Lambda layer that must never be deployed: "
        "add -c synth_only=true to only synthesize, or drop skip_bundle_deps to build the real layer"
    )


def refuse_deployment(stack: Stack) -> CfnRule:
    """A template rule that always fails: CloudFormation validates rules before it creates or updates
    anything, so a change set or deploy of this template stops there with ``SYNTH_ONLY_REFUSAL``.
    (A stack name never contains ``_``, so it never equals the compared value.)"""
    return CfnRule(
        stack,
        SYNTH_ONLY_RULE,
        assertions=[
            CfnRuleAssertion(
                assert_=Fn.condition_equals(Aws.STACK_NAME, "skip_bundle_deps"),
                assert_description=SYNTH_ONLY_REFUSAL,
            )
        ],
    )
