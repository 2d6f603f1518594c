"""Long-term memory across sessions: one Amazon Bedrock AgentCore Memory per stage, its three built-in
strategies, and the grants of the functions that call it (docs/deploying.md, "Memory across sessions")."""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import aws_bedrockagentcore as agentcore
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from constructs import Construct

from infra.config import StageConfig
from infra.constructs.functions import removal_policy

# The memory's id (CfnMemory attribute MemoryId), for the functions that call it; absent: memory off.
MEMORY_ID_ENV = "CONDUCTOR_MEMORY_ID"
# The custom namespace key of the project facts: each turn's CreateEvent names its workspace's slug in
# extractionConfig.namespaceVariables. AgentCore substitutes only keys the memory declares.
PROJECT_KEY = "project"
PROJECT_SLUG_PATTERN = r"^[a-z0-9-]{1,64}$"


@dataclass(frozen=True)
class Strategy:
    """A built-in strategy: its name, its CfnMemory.MemoryStrategyProperty field and namespace template."""

    name: str
    kind: str
    namespace: str


# Every record is filed under /people/{actorId}/ (actorId: the person's verified Cognito sub), so one
# namespace path reads or erases all that a person has.
STRATEGIES: tuple[Strategy, ...] = (
    Strategy("preferences", "user_preference_memory_strategy", "/people/{actorId}/preferences"),
    Strategy("facts", "semantic_memory_strategy", "/people/{actorId}/projects/{" + PROJECT_KEY + "}"),
    Strategy("summaries", "summary_memory_strategy", "/people/{actorId}/sessions/{sessionId}"),
)
_PROPERTIES = {
    "user_preference_memory_strategy": agentcore.CfnMemory.UserPreferenceMemoryStrategyProperty,
    "semantic_memory_strategy": agentcore.CfnMemory.SemanticMemoryStrategyProperty,
    "summary_memory_strategy": agentcore.CfnMemory.SummaryMemoryStrategyProperty,
}

# The data-plane actions each function's code calls, by its name in infra/constructs/functions.py. Each
# authorizes on the memory resource type (Service Authorization Reference, Amazon Bedrock AgentCore), so
# every grant names this memory's ARN and nothing else.
# No condition keys: bedrock-agentcore:namespace (RetrieveMemoryRecords, ListMemoryRecords,
# BatchCreateMemoryRecords) and bedrock-agentcore:actorId (CreateEvent, ListEvents, DeleteEvent) could only
# pin a namespace or actor known when the policy is written, but one role serves every person and the
# namespace is /people/<the caller's sub>/..., known per request; GetMemoryRecord, DeleteMemoryRecord and
# BatchDeleteMemoryRecords take neither key. Whose records a call touches is decided by the code, from
# the sub the authorizer verified.
MEMORY_ACTIONS: dict[str, tuple[str, ...]] = {
    # sessionStart: what the person's memory holds that bears on the new session
    "message": ("bedrock-agentcore:RetrieveMemoryRecords",),
    # each committed turn becomes an event; memory.search, memory.write, memory.forget
    "turn": (
        "bedrock-agentcore:CreateEvent",
        "bedrock-agentcore:RetrieveMemoryRecords",
        "bedrock-agentcore:BatchCreateMemoryRecords",
        "bedrock-agentcore:GetMemoryRecord",
        "bedrock-agentcore:DeleteMemoryRecord",
    ),
    # GET /memories, DELETE /memories/{id}, DELETE /memories; erasing a session deletes its events
    "sessionsApi": (
        "bedrock-agentcore:ListMemoryRecords",
        "bedrock-agentcore:GetMemoryRecord",
        "bedrock-agentcore:DeleteMemoryRecord",
        "bedrock-agentcore:BatchDeleteMemoryRecords",
        "bedrock-agentcore:ListSessions",
        "bedrock-agentcore:ListEvents",
        "bedrock-agentcore:DeleteEvent",
    ),
}


def strategy_property(strategy: Strategy) -> agentcore.CfnMemory.MemoryStrategyProperty:
    """The CfnMemory entry of a built-in strategy (the namespace as a template: ``namespaces`` is the
    legacy spelling of the same setting)."""
    built_in = _PROPERTIES[strategy.kind](name=strategy.name, namespace_templates=[strategy.namespace])
    return agentcore.CfnMemory.MemoryStrategyProperty(**{strategy.kind: built_in})


def memory_name(config: StageConfig) -> str:
    """The memory's name, unique in the account: ``voiceide_<stage>`` (letters, digits and '_' only)."""
    return f"voiceide_{config.name.replace('-', '_')}"


class ConductorMemory(Construct):
    """The stage's AgentCore Memory. Encrypted with the service's own key, as the table is with an AWS
    managed one: AgentCore offers no AWS managed key, and a customer managed key (EncryptionKeyArn, fixed at
    creation) would need its own key policy and kms: grants for every caller. Kept on stack deletion and
    replacement on a retaining stage, like the table."""

    def __init__(self, scope: Construct, construct_id: str, *, config: StageConfig) -> None:
        super().__init__(scope, construct_id)
        self.memory = agentcore.CfnMemory(
            self,
            "Memory",
            name=memory_name(config),
            description=f"What the VoiceIDE conductor remembers of each person across sessions ({config.name})",
            event_expiry_duration=config.memory.event_expiry_days,
            namespace_keys=[
                agentcore.CfnMemory.NamespaceKeyEntryProperty(
                    key=PROJECT_KEY,
                    validation=agentcore.CfnMemory.NamespaceKeyValidationProperty(regex_pattern=PROJECT_SLUG_PATTERN),
                )
            ],
            memory_strategies=[strategy_property(strategy) for strategy in STRATEGIES],
        )
        self.memory.apply_removal_policy(removal_policy(config))

    @property
    def memory_id(self) -> str:
        return self.memory.attr_memory_id

    @property
    def memory_arn(self) -> str:
        return self.memory.attr_memory_arn

    def connect(self, name: str, function: lambda_.Function) -> None:
        """Give ``function`` (``name`` in ``MEMORY_ACTIONS``) the memory's id and its actions on the memory."""
        function.add_environment(MEMORY_ID_ENV, self.memory_id)
        statement = iam.PolicyStatement(actions=list(MEMORY_ACTIONS[name]), resources=[self.memory_arn])
        function.add_to_role_policy(statement)
