"""cfn-lint and cdk-nag on every synthesized template."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from cfnlint.api import lint

from infra.constructs.monitoring import NO_SUBSCRIBER_WARNING
from infra.reservations import UNPROVEN_WARNING
from tests.infra.conftest import Synth, synthesize

pytestmark = pytest.mark.infra

# CDK adds DependsOn on a function's role although the Role GetAtt already implies it.
ALLOWED_LINT_WARNINGS = {"W3005"}
# CDK's own plugin that copies construct annotations into the validation report.
ANNOTATIONS_PLUGIN = "Construct Annotations"

SESSIONS_API_HANDLER = "lambdas.sessions_api.handler"
POSTING_HANDLERS = (
    "lambdas.message.handler",
    "lambdas.disconnect.handler",  # tells the devices that stay when one leaves
    "lambdas.turn.handler",
    "lambdas.turn_abandoned.handler",
    "lambdas.tool_deadline.handler",
)
REVIEWED_FINDINGS = (
    "AwsSolutions-L1",
    "AwsSolutions-IAM5[Resource::*]",
    "AwsSolutions-IAM5[Resource::arn:aws:execute-api:",
    "AwsSolutions-IAM5[Resource::<FunctionsTurnabandonedFunction",  # the runner's on-failure destination
    "AwsSolutions-SMG4",
    "AwsSolutions-COG2",  # MFA optional where the stage says so
    "AwsSolutions-COG8",  # Cognito Essentials plan where the stage says so
    "AwsSolutions-APIG4",
    "AwsSolutions-APIG1",  # no access logs where the account's API Gateway logging role may be missing
    "AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AmazonAPIGatewayPushToCloudWatchLogs]",
)


@pytest.fixture(params=["dev", "prod", "variant"])
def any_stage(request: pytest.FixtureRequest) -> Synth:
    return request.getfixturevalue(request.param)


def findings(report: dict[str, Any]) -> list[dict[str, Any]]:
    """The policy plugins' reports (cdk-nag), without the construct annotations CDK adds to them."""
    return [p for p in report["pluginReports"] if p["pluginName"] != ANNOTATIONS_PLUGIN]


def test_cfn_lint_finds_no_errors(any_stage: Synth) -> None:
    matches = lint(json.dumps(any_stage.template), regions=[any_stage.config.region])
    errors = [f"{m.rule.id} {m.message} at {'/'.join(map(str, m.path))}" for m in matches if m.rule.id.startswith("E")]
    assert errors == []
    warnings = {m.rule.id for m in matches if m.rule.id.startswith("W")}
    assert warnings <= ALLOWED_LINT_WARNINGS


def test_cdk_nag_ran_and_reported_nothing_unacknowledged(any_stage: Synth) -> None:
    report = json.loads((any_stage.outdir / "validation-report.json").read_text())
    # The stack's own annotations join the report: only the warnings of a stage whose alarms reach nobody
    # and of one asking for reserved concurrency no quota reading proves.
    annotations = [p for p in report["pluginReports"] if p["pluginName"] == ANNOTATIONS_PLUGIN]
    assert findings(report) == []
    warnings = {v["ruleName"] for p in annotations for v in p["violations"] if v["severity"] == "warning"}
    expected = set() if any_stage.config.alarm_listeners else {f"Annotation::{NO_SUBSCRIBER_WARNING}"}
    if any_stage.stack.reservations.withheld:
        expected.add(f"Annotation::{UNPROVEN_WARNING}")
    assert warnings == expected
    assert all(p["conclusion"] == "success" for p in annotations)


def acknowledgments(synth: Synth) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for name, resource in synth.resources.items():
        for rule in resource.get("Metadata", {}).get("cdk_nag", {}).get("rules_to_suppress", []):
            assert len(rule["reason"]) >= 60, f"{name}: {rule['id']} needs a real reason"
            found.setdefault(rule["id"], []).append(name)
    return found


def test_every_acknowledgment_is_reviewed_and_reasoned(any_stage: Synth) -> None:
    found = acknowledgments(any_stage)
    assert found
    for rule_id in found:
        assert rule_id.startswith(REVIEWED_FINDINGS), f"unreviewed acknowledgment {rule_id}"


def test_acknowledgments_sit_on_the_resources_that_need_them(dev: Synth, prod: Synth) -> None:
    found = acknowledgments(prod)
    functions = set(prod.of_type("AWS::Lambda::Function"))
    assert set(found["AwsSolutions-L1"]) == functions
    assert set(found["AwsSolutions-IAM5[Resource::*]"]) == set(prod.of_type("AWS::IAM::Policy"))
    routes = {
        res["Properties"]["RouteKey"]: name
        for name, res in prod.of_api("AWS::ApiGatewayV2::Route", "WEBSOCKET").items()
    }
    # prod's sessions API routes all have the JWT authorizer: nothing to acknowledge on them.
    assert set(found["AwsSolutions-APIG4"]) == {routes["$default"], routes["$disconnect"]}
    # prod signs in with Cognito: no token secret; the one acknowledged is the sessions API's cursor key
    assert set(found["AwsSolutions-SMG4"]) == set(prod.of_type("AWS::SecretsManager::Secret"))
    assert len(found["AwsSolutions-SMG4"]) == 1
    # prod requires MFA and is on the Plus plan; dev's pool acknowledges both, with their reasons.
    assert "AwsSolutions-COG2" not in found and "AwsSolutions-COG8" not in found
    pools = set(dev.of_type("AWS::Cognito::UserPool"))
    dev_found = acknowledgments(dev)
    assert pools and set(dev_found["AwsSolutions-COG2"]) == set(dev_found["AwsSolutions-COG8"]) == pools
    management = [rule for rule in found if rule.startswith("AwsSolutions-IAM5[Resource::arn:aws:execute-api:")]
    by_method = {rule.split("/prod/", 1)[1].split("/", 1)[0]: rule for rule in management}
    assert len(management) == 2 and set(by_method) == {"POST", "DELETE"}
    assert all(rule.endswith("/@connections/*]") for rule in management)
    # Posting to connections: $default, the turn runner and its on-failure destination, the tool-deadline
    # function and the sessions API; closing them: the sessions API alone.
    posting = {prod.function(handler)[0] for handler in (*POSTING_HANDLERS, SESSIONS_API_HANDLER)}
    assert {policy.rsplit("RoleDefaultPolicy", 1)[0] for policy in found[by_method["POST"]]} == {
        name.rsplit("Function", 1)[0] for name in posting
    }
    sessions_api = prod.function(SESSIONS_API_HANDLER)[0].rsplit("Function", 1)[0]
    assert [policy.rsplit("RoleDefaultPolicy", 1)[0] for policy in found[by_method["DELETE"]]] == [sessions_api]
    destination = [rule for rule in found if rule.startswith("AwsSolutions-IAM5[Resource::<FunctionsTurnabandoned")]
    assert len(destination) == 1 and destination[0].endswith(".Arn>:*]")
    assert [policy.startswith("FunctionsTurnRoleDefaultPolicy") for policy in found[destination[0]]] == [True]

    # dev signs in like prod: only $default and $disconnect (authorized on $connect) are acknowledged.
    dev_routes = {res["Properties"]["RouteKey"]: name for name, res in dev.of_type("AWS::ApiGatewayV2::Route").items()}
    assert len(dev_routes) == 3 + 8
    assert set(acknowledgments(dev)["AwsSolutions-APIG4"]) == {dev_routes["$default"], dev_routes["$disconnect"]}
    # A stage without WebSocket access logs (dev: it does not own the account's logging role) says why; prod
    # logs. The sessions API's HTTP stage logs on both (it needs no account role).
    assert "AwsSolutions-APIG1" not in found
    assert acknowledgments(dev)["AwsSolutions-APIG1"] == list(dev.of_api("AWS::ApiGatewayV2::Stage", "WEBSOCKET"))


def test_an_unacknowledged_finding_fails_the_synth(tmp_path: Path) -> None:
    from aws_cdk import aws_iam as iam

    from infra.app import build_app

    app, stack = build_app({"stage": "dev", "skip_bundle_deps": "true"}, outdir=str(tmp_path))
    stack.functions.connect.add_to_role_policy(
        iam.PolicyStatement(actions=["s3:*"], resources=["arn:aws:s3:::voiceide-example/object"])
    )
    with pytest.raises(RuntimeError, match=r"(?s)ValidationFailed: .*AwsSolutions-IAM5\[Action::s3:\*\]"):
        app.synth()
    report = json.loads((tmp_path / "validation-report.json").read_text())
    rules = {v["ruleName"] for p in findings(report) for v in p["violations"]}
    assert rules == {"AwsSolutions-IAM5[Action::s3:*]"}


def differing_resources(first: dict[str, Any], second: dict[str, Any]) -> list[str]:
    """The logical ids (and top-level sections) whose definitions differ between two templates."""
    ones, twos = first.get("Resources", {}), second.get("Resources", {})
    found = sorted(key for key in ones.keys() | twos.keys() if ones.get(key) != twos.get(key))
    sections = sorted(
        key for key in first.keys() | second.keys() if key != "Resources" and first.get(key) != second.get(key)
    )
    return found + sections


def test_synthesizing_twice_is_deterministic(tmp_path: Path) -> None:
    """Two synths of the same inputs, back to back (not against the session's cached one: the process
    it was made in has run other tests since)."""
    first = synthesize(tmp_path / "first", "prod")
    again = synthesize(tmp_path / "again", "prod")
    assert differing_resources(first.template, again.template) == []
