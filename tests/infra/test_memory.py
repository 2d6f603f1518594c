"""Long-term memory across sessions: the stage's AgentCore Memory, its strategies, and who may call it."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import pytest
from cfnlint.api import lint
from cfnlint.data import AdditionalSpecs
from cfnlint.helpers import load_resource

from infra.config import StageConfigError, read_cdk_json_context, select_stage
from infra.constructs.memory import MEMORY_ACTIONS, MEMORY_ID_ENV, PROJECT_KEY, memory_name
from tests.infra.conftest import Synth, synthesize
from tests.infra.test_checks import ALLOWED_LINT_WARNINGS, findings
from tests.infra.test_stack import as_list, function_role, grants, ref_of

pytestmark = pytest.mark.infra

MEMORY_TYPE = "AWS::BedrockAgentCore::Memory"
SERVICE = "bedrock-agentcore"
# The functions that call the memory, by their name in MEMORY_ACTIONS.
CALLERS = {
    "message": "lambdas.message.handler",
    "turn": "lambdas.turn.handler",
    "sessionsApi": "lambdas.sessions_api.handler",
}
# The shared contract of the feature: strategy name -> (CfnMemory strategy property, namespace template).
CONTRACT_STRATEGIES = {
    "preferences": ("UserPreferenceMemoryStrategy", "/people/{actorId}/preferences"),
    "facts": ("SemanticMemoryStrategy", "/people/{actorId}/projects/{project}"),
    "summaries": ("SummaryMemoryStrategy", "/people/{actorId}/sessions/{sessionId}"),
}
# The calls each function's code makes ("Calls the conductor makes"), as IAM actions.
CONTRACT_ACTIONS = {
    "message": {"RetrieveMemoryRecords"},
    "turn": {
        "CreateEvent",
        "RetrieveMemoryRecords",
        "BatchCreateMemoryRecords",
        "GetMemoryRecord",
        "DeleteMemoryRecord",
    },
    "sessionsApi": {
        "ListMemoryRecords",
        "GetMemoryRecord",
        "DeleteMemoryRecord",
        "BatchDeleteMemoryRecords",
        "ListSessions",
        "ListEvents",
        "DeleteEvent",
    },
}
BUILT_IN_VARIABLES = {"actorId", "sessionId", "memoryStrategyId"}
# What CloudFormation (EventExpiryDuration: 3-365) and the CreateMemory API (7-3650 days) both accept.
EXPIRY_RANGE = range(7, 366)


@pytest.fixture(params=["dev", "prod", "variant"])
def any_stage(request: pytest.FixtureRequest) -> Synth:
    return request.getfixturevalue(request.param)


def the_memory(synth: Synth) -> tuple[str, dict[str, Any]]:
    return synth.one(MEMORY_TYPE)


def memory_grants(synth: Synth, handler: str) -> set[tuple[str, str]]:
    return {(a, r) for a, r in grants(synth, function_role(synth, handler)) if a.startswith(f"{SERVICE}:")}


def memory_ids_by_handler(synth: Synth) -> dict[str, Any]:
    return {
        fn["Properties"]["Handler"]: fn["Properties"]["Environment"]["Variables"][MEMORY_ID_ENV]
        for fn in synth.of_type("AWS::Lambda::Function").values()
        if MEMORY_ID_ENV in fn["Properties"].get("Environment", {}).get("Variables", {})
    }


# --- the resource ------------------------------------------------------------------------------


def test_each_stage_has_one_memory_with_the_contracts_three_strategies(any_stage: Synth) -> None:
    _, memory = the_memory(any_stage)
    props = memory["Properties"]
    assert props["Name"] == f"voiceide_{any_stage.config.name}"
    strategies = {}
    for entry in props["MemoryStrategies"]:
        [(kind, strategy)] = entry.items()
        assert set(strategy) == {"Name", "NamespaceTemplates"}  # built-in: no model override, no schema
        strategies[strategy["Name"]] = (kind, *strategy["NamespaceTemplates"])
    assert strategies == CONTRACT_STRATEGIES
    # Built-in strategies need no execution role; the service's own key encrypts (as the table's AWS key does).
    assert "MemoryExecutionRoleArn" not in props and "EncryptionKeyArn" not in props


def test_every_namespace_variable_is_built_in_or_declared(any_stage: Synth) -> None:
    """AgentCore substitutes only built-in variables and the memory's declared keys: the project facts'
    {project} is declared, with the slug pattern the conductor writes."""
    props = the_memory(any_stage)[1]["Properties"]
    declared = {entry["Key"]: entry for entry in props["NamespaceKeys"]}
    assert set(declared) == {PROJECT_KEY}
    pattern = declared[PROJECT_KEY]["Validation"]["RegexPattern"]
    assert re.fullmatch(pattern, "voiceide-conductor") and re.fullmatch(pattern, "no-project")
    assert not re.fullmatch(pattern, "Voice IDE") and not re.fullmatch(pattern, "a" * 65)
    used = {
        variable
        for entry in props["MemoryStrategies"]
        for strategy in entry.values()
        for template in strategy["NamespaceTemplates"]
        for variable in re.findall(r"\{([^}]*)\}", template)
    }
    assert used - BUILT_IN_VARIABLES == set(declared)
    # Every record of a person sits under /people/<sub>/: one namespace path lists or erases them all.
    assert all(t.startswith("/people/{actorId}/") for _, t in CONTRACT_STRATEGIES.values())


def test_event_expiry_is_the_stages_and_within_what_aws_accepts(dev: Synth, prod: Synth) -> None:
    stages = read_cdk_json_context()["stages"]
    for synth, days in ((dev, 30), (prod, 90)):
        assert stages[synth.config.name]["memory"] == {"enabled": True, "event_expiry_days": days}
        expiry = the_memory(synth)[1]["Properties"]["EventExpiryDuration"]
        assert expiry == synth.config.memory.event_expiry_days == days
        assert expiry in EXPIRY_RANGE


@pytest.mark.parametrize(("days", "message"), [(6, "greater than or equal to 7"), (366, "less than or equal to 365")])
def test_an_expiry_aws_refuses_fails_synth(days: int, message: str) -> None:
    stages = copy.deepcopy(read_cdk_json_context()["stages"])
    stages["dev"]["memory"]["event_expiry_days"] = days
    with pytest.raises(StageConfigError, match=rf"(?s)memory\.event_expiry_days.*{message}"):
        select_stage(stages, "dev")


def test_a_stage_without_memory_settings_remembers_nothing_and_names_fit_the_service() -> None:
    stages = copy.deepcopy(read_cdk_json_context()["stages"])
    del stages["dev"]["memory"]
    assert select_stage(stages, "dev").memory.enabled is False
    stages["qa-eu"] = stages["prod"]
    name = memory_name(select_stage(stages, "qa-eu"))
    assert name == "voiceide_qa_eu" and re.fullmatch(r"[a-zA-Z][a-zA-Z0-9_]{0,47}", name)


def test_a_retaining_stage_keeps_the_memory(dev: Synth, prod: Synth) -> None:
    """Like the table: kept on stack deletion and replacement in prod, unless its first create rolls back."""
    _, kept = the_memory(prod)
    assert (kept["DeletionPolicy"], kept["UpdateReplacePolicy"]) == ("RetainExceptOnCreate", "Retain")
    _, dropped = the_memory(dev)
    assert (dropped["DeletionPolicy"], dropped["UpdateReplacePolicy"]) == ("Delete", "Delete")


def test_outputs_name_the_memory(any_stage: Synth) -> None:
    memory_id, _ = the_memory(any_stage)
    outputs = any_stage.template["Outputs"]
    assert outputs["MemoryId"]["Value"] == {"Fn::GetAtt": [memory_id, "MemoryId"]}
    assert outputs["MemoryArn"]["Value"] == {"Fn::GetAtt": [memory_id, "MemoryArn"]}


# --- who may call it ---------------------------------------------------------------------------


def test_the_contracts_callers_get_exactly_their_calls_on_this_memory_only(any_stage: Synth) -> None:
    memory_id, _ = the_memory(any_stage)
    arn = f"<{memory_id}.MemoryArn>"
    assert {name: {a.split(":", 1)[1] for a in actions} for name, actions in MEMORY_ACTIONS.items()} == (
        CONTRACT_ACTIONS
    )
    for name, handler in CALLERS.items():
        assert memory_grants(any_stage, handler) == {(f"{SERVICE}:{a}", arn) for a in CONTRACT_ACTIONS[name]}, name
    for fn in any_stage.of_type("AWS::Lambda::Function").values():
        if (handler := fn["Properties"]["Handler"]) not in CALLERS.values():
            assert not memory_grants(any_stage, handler), handler


def test_no_role_gets_a_memory_action_on_a_wildcard(any_stage: Synth) -> None:
    checked = 0
    for policy in any_stage.of_type("AWS::IAM::Policy").values():
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
            actions = [a for a in as_list(statement["Action"]) if a.startswith(f"{SERVICE}:")]
            if not actions:
                continue
            checked += 1
            assert statement["Effect"] == "Allow" and "Condition" not in statement
            assert not [a for a in actions if "*" in a]
            [resource] = as_list(statement["Resource"])
            assert isinstance(resource, dict) and resource["Fn::GetAtt"][1] == "MemoryArn"
            assert ref_of(resource) == the_memory(any_stage)[0]
    assert checked == 3


def test_every_granted_action_exists_and_authorizes_on_the_memory() -> None:
    """The Service Authorization Reference as cfn-lint ships it: each action is bedrock-agentcore's and
    takes the memory resource type, so naming the memory's ARN grants it (no '*' needed)."""
    service = load_resource(AdditionalSpecs, "Policies.json")[SERVICE]
    actions = {name.lower(): spec for name, spec in service["Actions"].items()}
    for granted in {a for names in MEMORY_ACTIONS.values() for a in names}:
        prefix, name = granted.split(":", 1)
        assert prefix == SERVICE
        assert actions[name.lower()]["Resources"] == ["memory"], granted
    assert service["Resources"]["memory"]["ARNFormats"] == [
        "arn:${Partition}:bedrock-agentcore:${Region}:${Account}:memory/.*"
    ]


def test_exactly_the_callers_know_the_memory_id(any_stage: Synth) -> None:
    memory_id, _ = the_memory(any_stage)
    assert memory_ids_by_handler(any_stage) == {
        handler: {"Fn::GetAtt": [memory_id, "MemoryId"]} for handler in CALLERS.values()
    }


def test_a_stage_without_the_sessions_api_still_remembers(signed_token: Synth) -> None:
    """dev-signed-token stages have no sessions API: $default and the turn runner alone call the memory."""
    assert the_memory(signed_token)
    callers = {CALLERS["message"], CALLERS["turn"]}
    assert set(memory_ids_by_handler(signed_token)) == callers
    for name in ("message", "turn"):
        assert {a for a, _ in memory_grants(signed_token, CALLERS[name])} == {
            f"{SERVICE}:{a}" for a in CONTRACT_ACTIONS[name]
        }


@pytest.fixture(scope="module")
def forgetful(tmp_path_factory: pytest.TempPathFactory) -> Synth:
    stages = copy.deepcopy(read_cdk_json_context()["stages"])
    stages["dev"]["memory"]["enabled"] = False
    return synthesize(tmp_path_factory.mktemp("cdk-forgetful"), "dev", stages={"dev": stages["dev"]})


def test_a_stage_with_memory_off_has_no_memory_no_id_and_no_grant(forgetful: Synth) -> None:
    assert not forgetful.of_type(MEMORY_TYPE)
    assert memory_ids_by_handler(forgetful) == {}
    for policy in forgetful.of_type("AWS::IAM::Policy").values():
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
            assert not [a for a in as_list(statement["Action"]) if a.startswith(f"{SERVICE}:")]
    assert not {"MemoryId", "MemoryArn"} & set(forgetful.template["Outputs"])


# --- the checks every template passes ----------------------------------------------------------


def test_dev_and_prod_pass_cdk_nag_and_cfn_lint_with_the_memory(dev: Synth, prod: Synth) -> None:
    for synth in (dev, prod):
        assert the_memory(synth)
        report = json.loads((Path(synth.outdir) / "validation-report.json").read_text())
        assert findings(report) == []
        matches = lint(json.dumps(synth.template), regions=[synth.config.region])
        assert [m for m in matches if m.rule.id.startswith("E")] == []
        assert {m.rule.id for m in matches} <= ALLOWED_LINT_WARNINGS
