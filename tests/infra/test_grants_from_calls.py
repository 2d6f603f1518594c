"""Every function's role grants exactly the AWS actions its code can call, no more and no fewer.

The calls come from the code (``tests/infra/code_calls.py``: the boto3 clients the handlers build,
the operations their adapters call on them, what each handler reaches); each becomes an IAM action
(``OPERATION_ACTIONS``); the platform's own use of a role (``PLATFORM_ACTIONS``) is added. The result
must equal the actions of the function's role in each synthesized template.
"""

from __future__ import annotations

import copy
import dataclasses
import textwrap
from pathlib import Path
from typing import Any

import pytest

from infra.constructs.memory import MEMORY_ACTIONS, MEMORY_ID_ENV
from tests.infra.code_calls import AnalysisError, Code, Operation, code, handler_operations, signing_name
from tests.infra.conftest import Synth
from tests.infra.test_stack import as_list, function_role, role_statements

pytestmark = pytest.mark.infra

# botocore operation -> the IAM action it is authorized as, where that is not <IAM prefix>:<operation>.
# (DynamoDB transactions are expanded to their items' actions by the analysis: TRANSACT_ITEMS.)
OPERATION_ACTIONS: dict[Operation, str] = {
    ("bedrock-runtime", "ConverseStream"): "bedrock:InvokeModelWithResponseStream",
    ("bedrock-runtime", "Converse"): "bedrock:InvokeModel",
    ("lambda", "Invoke"): "lambda:InvokeFunction",
    ("apigatewaymanagementapi", "PostToConnection"): "execute-api:ManageConnections",
    ("apigatewaymanagementapi", "GetConnection"): "execute-api:ManageConnections",
    ("apigatewaymanagementapi", "DeleteConnection"): "execute-api:ManageConnections",
}
# Calls the code makes only when the function is configured for them (the variable names the resource).
CONFIGURED_BY: dict[str, tuple[str, ...]] = {
    # the authorizer's token key (auth: dev-signed-token only), the sessions API's cursor key
    "secretsmanager:GetSecretValue": ("CONDUCTOR_AUTH_SECRET_ARN", "CONDUCTOR_CURSOR_SECRET_ARN"),
    "sqs:SendMessage": ("CONDUCTOR_DEADLINE_QUEUE_URL",),
    # the stage's long-term memory (memory.enabled; infra/constructs/memory.py)
    **{action: (MEMORY_ID_ENV,) for actions in MEMORY_ACTIONS.values() for action in actions},
}
# What AWS does with a function's role on its behalf, beside the code's calls.
EVERY_FUNCTION = frozenset(
    {
        "logs:CreateLogStream",  # Lambda writes the function's logs to its log group
        "logs:PutLogEvents",
        "xray:PutTraceSegments",  # active tracing
        "xray:PutTelemetryRecords",
    }
)
PLATFORM_ACTIONS: dict[str, frozenset[str]] = {
    # Lambda delivers a failed turn to its on-failure destination with the runner's role.
    "lambdas.turn.handler": frozenset({"lambda:InvokeFunction"}),
    # The SQS event source's poller (as CDK's SqsEventSource grants it).
    "lambdas.tool_deadline.handler": frozenset(
        {
            "sqs:ReceiveMessage",
            "sqs:DeleteMessage",
            "sqs:ChangeMessageVisibility",
            "sqs:GetQueueAttributes",
            "sqs:GetQueueUrl",
        }
    ),
    # The table stream's poller (as CDK's DynamoEventSource grants it): the stream's shards and records,
    # and ListStreams (which takes no resource but '*': tests/infra/test_stack.py).
    "lambdas.session_reaper.handler": frozenset(
        {
            "dynamodb:DescribeStream",
            "dynamodb:GetRecords",
            "dynamodb:GetShardIterator",
            "dynamodb:ListStreams",
        }
    ),
}


def iam_action(operation: Operation) -> str:
    service, name = operation
    return OPERATION_ACTIONS.get(operation, f"{signing_name(service)}:{name}")


def expected_actions(handler: str, environment: dict[str, Any]) -> set[str]:
    """What the role of the function running ``handler`` with ``environment`` must grant."""
    called = {iam_action(op) for op in handler_operations(handler)}
    called = {
        action for action in called if action not in CONFIGURED_BY or set(CONFIGURED_BY[action]) & set(environment)
    }
    return called | EVERY_FUNCTION | PLATFORM_ACTIONS.get(handler, frozenset())


def granted_actions(synth: Synth, handler: str) -> set[str]:
    return {
        action
        for statement in role_statements(synth, function_role(synth, handler))
        if statement["Effect"] == "Allow"
        for action in as_list(statement["Action"])
    }


def mismatches(synth: Synth) -> dict[str, dict[str, list[str]]]:
    """Per handler: actions the code needs and the role lacks, and actions granted beyond them."""
    found = {}
    for fn in synth.of_type("AWS::Lambda::Function").values():
        handler = fn["Properties"]["Handler"]
        environment = fn["Properties"].get("Environment", {}).get("Variables", {})
        expected, granted = expected_actions(handler, environment), granted_actions(synth, handler)
        if expected != granted:
            found[handler] = {"missing": sorted(expected - granted), "extra": sorted(granted - expected)}
    return found


@pytest.fixture(params=["dev", "prod", "variant", "signed_token"])
def any_stage(request: pytest.FixtureRequest) -> Synth:
    return request.getfixturevalue(request.param)


def test_every_function_is_granted_exactly_what_its_code_calls(any_stage: Synth) -> None:
    assert mismatches(any_stage) == {}


def test_the_turn_runner_may_stream_and_summarize_on_the_model(any_stage: Synth) -> None:
    """ConverseStream answers; the rolling summary's Converse is authorized as InvokeModel."""
    assert {("bedrock-runtime", "ConverseStream"), ("bedrock-runtime", "Converse")} <= handler_operations(
        "lambdas.turn.handler"
    )
    granted = granted_actions(any_stage, "lambdas.turn.handler")
    assert {"bedrock:InvokeModel", "bedrock:InvokeModelWithResponseStream"} <= granted


def test_a_missing_or_an_extra_grant_is_found(prod: Synth) -> None:
    tampered = dataclasses.replace(prod, template=copy.deepcopy(prod.template))
    turn_role = function_role(prod, "lambdas.turn.handler")
    connect_role = function_role(prod, "lambdas.connect.handler")
    for policy in tampered.of_type("AWS::IAM::Policy").values():
        roles = {r.get("Ref") for r in policy["Properties"]["Roles"]}
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
            actions = as_list(statement["Action"])
            if turn_role in roles and "bedrock:InvokeModel" in actions:
                statement["Action"] = [a for a in actions if a != "bedrock:InvokeModel"]
            if connect_role in roles and "dynamodb:GetItem" in actions:
                statement["Action"] = [*actions, "dynamodb:BatchWriteItem"]
    assert mismatches(tampered) == {
        "lambdas.turn.handler": {"missing": ["bedrock:InvokeModel"], "extra": []},
        "lambdas.connect.handler": {"missing": [], "extra": ["dynamodb:BatchWriteItem"]},
    }


def test_the_analysis_sees_every_client_and_every_handler_calls_something() -> None:
    figures = {
        handler: sorted(iam_action(op) for op in handler_operations(f"lambdas.{handler}.handler"))
        for handler in (
            "connect",
            "disconnect",
            "message",
            "turn",
            "turn_abandoned",
            "tool_deadline",
            "authorizer",
            "sessions_api",
        )
    }
    # A commit may delete the stored parts of a tool result sent in parts (a transaction's Delete items),
    # and read the outbox (the events of a decision whose stream it ended before a runner claimed it).
    assert figures["connect"] == [
        "dynamodb:DeleteItem",
        "dynamodb:GetItem",
        "dynamodb:PutItem",
        "dynamodb:Query",
        "dynamodb:UpdateItem",
    ]
    assert "dynamodb:DeleteItem" in figures["disconnect"]  # forgets the connection
    assert "execute-api:ManageConnections" in figures["disconnect"]  # the devices that stay hear it
    assert {"lambda:InvokeFunction", "execute-api:ManageConnections", "dynamodb:Query"} <= set(figures["message"])
    assert "sqs:SendMessage" in figures["turn"] and "sqs:SendMessage" in figures["tool_deadline"]
    assert figures["authorizer"] == ["secretsmanager:GetSecretValue"]
    # The sessions API: its routes are registered with Powertools' resolver, reached through app.resolve.
    assert set(figures["sessions_api"]) == {
        "dynamodb:GetItem",  # a session's state
        "dynamodb:PutItem",  # renaming and ending commit the state (transaction items)
        "dynamodb:UpdateItem",
        "dynamodb:Query",  # the index, the transcript, a session's keys
        "dynamodb:DeleteItem",  # erasing: the state first
        "dynamodb:BatchWriteItem",  # ...then the rest in batches
        "dynamodb:BatchGetItem",  # the active sessions' device counts
        "execute-api:ManageConnections",
        "secretsmanager:GetSecretValue",  # the cursor key, once per cold start
        # /memories: listed, one found and forgotten, all forgotten with the person's events
        "bedrock-agentcore:ListMemoryRecords",
        "bedrock-agentcore:GetMemoryRecord",
        "bedrock-agentcore:DeleteMemoryRecord",
        "bedrock-agentcore:BatchDeleteMemoryRecords",
        "bedrock-agentcore:ListSessions",
        "bedrock-agentcore:ListEvents",
        "bedrock-agentcore:DeleteEvent",
    }
    assert set(figures["message"]) >= {"bedrock-agentcore:RetrieveMemoryRecords"}  # at sessionStart
    assert {op for op in handler_operations("lambdas.sessions_api.handler") if op[0] == "apigatewaymanagementapi"} == {
        ("apigatewaymanagementapi", "PostToConnection"),  # session_ended / session_erased
        ("apigatewaymanagementapi", "DeleteConnection"),  # the close
    }
    services = {op[0] for handler in figures for op in handler_operations(f"lambdas.{handler}.handler")}
    assert services == {
        "dynamodb",
        "lambda",
        "apigatewaymanagementapi",
        "bedrock-runtime",
        "sqs",
        "secretsmanager",
        "bedrock-agentcore",
    }


# --- the analysis on code written for the test --------------------------------------------------

RUNTIME = """
import boto3
from shared.adapters.brain import Brain
from shared.adapters.store import Store

def brain():
    client = boto3.client("bedrock-runtime")
    return Brain(client)

def store():
    return Store(boto3.client("dynamodb"))
"""
BRAIN = """
class Brain:
    def __init__(self, client):
        self._client = client

    def stream(self, messages):
        return self._client.converse_stream(messages=messages)

    def summarize(self, messages):
        return self._client.converse(messages=messages)
"""
STORE = """
class Store:
    def __init__(self, client):
        self.client = client

    def load(self, key):
        return self.client.get_item(Key=key)

    def commit(self, state):
        self.client.transact_write_items(TransactItems=[{"Put": state}, {"ConditionCheck": state}])
"""
WORKER = """
from shared.adapters.brain import Brain
from shared.adapters.store import Store

class Worker:
    def __init__(self, brain: Brain, store: Store) -> None:
        self.brain = brain
        self.store = store

    def answer(self, messages):
        self.store.load("k")
        return self.brain.stream(messages)
"""
HANDLERS = """
from lambdas.runtime import brain, store
from shared.worker import Worker

def answer(event, context):
    return Worker(brain(), store()).answer(event)

def commit(event, context):
    store().commit(event)
"""


def tree(root: Path, files: dict[str, str]) -> Code:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text), encoding="utf-8")
    return Code(root)


READS = """
class Reads:
    def history(self, key):
        return self.client.query(Key=key)
"""
STORE_WITH_READS = """
from shared.reads import Reads

class Store(Reads):
    def __init__(self, client):
        self.client = client

    def load(self, key):
        return self.client.get_item(Key=key)

    def commit(self, state):
        self.client.put_item(Item=state)
"""
HISTORY_HANDLER = """
from lambdas.runtime import store

def history(event, context):
    return store().history(event)
"""


def test_a_method_the_adapter_inherits_uses_its_client(tmp_path: Path) -> None:
    source = tree(
        tmp_path,
        {
            "lambdas/runtime.py": RUNTIME,
            "lambdas/handlers.py": HISTORY_HANDLER,
            "shared/adapters/brain.py": BRAIN,
            "shared/adapters/store.py": STORE_WITH_READS,
            "shared/reads.py": READS,
        },
    )
    assert handler_operations("lambdas.handlers.history", source) == {("dynamodb", "Query")}


def test_the_analysis_follows_typed_attributes_and_expands_transactions(tmp_path: Path) -> None:
    source = tree(
        tmp_path,
        {
            "lambdas/runtime.py": RUNTIME,
            "lambdas/handlers.py": HANDLERS,
            "shared/adapters/brain.py": BRAIN,
            "shared/adapters/store.py": STORE,
            "shared/worker.py": WORKER,
        },
    )
    # The worker's brain only streams: its summarize (Converse) is not reached.
    assert handler_operations("lambdas.handlers.answer", source) == {
        ("bedrock-runtime", "ConverseStream"),
        ("dynamodb", "GetItem"),
    }
    assert handler_operations("lambdas.handlers.commit", source) == {
        ("dynamodb", "PutItem"),
        ("dynamodb", "ConditionCheckItem"),
    }


def test_the_analysis_refuses_what_it_cannot_attribute(tmp_path: Path) -> None:
    source = tree(
        tmp_path,
        {
            "lambdas/runtime.py": 'import boto3\n\ndef table():\n    return boto3.resource("dynamodb").Table("t")\n',
            "lambdas/handlers.py": "from lambdas.runtime import table\n\ndef run(event, context):\n    table()\n",
        },
    )
    with pytest.raises(AnalysisError, match=r"boto3\.resource"):
        handler_operations("lambdas.handlers.run", source)


RESOLVER_RUNTIME = """
import boto3
from shared.adapters.store import Store
from shared.adapters.gateway import Gateway

def store():
    return Store(boto3.client("dynamodb"))

def gateway():
    def management_client(endpoint):
        return boto3.client("apigatewaymanagementapi", endpoint_url=endpoint)

    return Gateway(management_client)
"""
RESOLVER_STORE = """
class Store:
    def __init__(self, client):
        self.client = client

    def load(self, key):
        return self.client.get_item(Key=key)

    def commit(self, state):
        self.client.put_item(Item=state)

    def delete_connection(self, connection_id):
        self.client.delete_item(Key=connection_id)
"""
RESOLVER_GATEWAY = """
class Gateway:
    def __init__(self, factory):
        self._client = factory

    def close(self, endpoint, connection_id):
        self._client(endpoint).delete_connection(ConnectionId=connection_id)
"""
RESOLVER_HANDLERS = """
import re
from aws_lambda_powertools.event_handler import APIGatewayHttpResolver
from lambdas.runtime import gateway, store

WORD = re.compile(r"[a-z]+")
app = APIGatewayHttpResolver()


class Session:
    def end(self):
        store().commit({})


@app.get("/things")
def things():
    return store().load("k")


@app.exception_handler(ValueError)
def failed(error):
    gateway().close("https://example", "c")


def unregistered():
    store().commit({})


def words(text):
    if match := WORD.search(text):
        return match.end()
    for found in re.finditer("x", text):
        found.end()
    return 0


def handler(event, context):
    words(event["body"])
    return app.resolve(event, context)
"""
UNTYPED_HANDLER = """
def untyped(event, context):
    event["session"].end()
"""


def test_the_analysis_follows_a_resolvers_routes_and_tells_library_calls_from_the_codes(tmp_path: Path) -> None:
    source = tree(
        tmp_path,
        {
            "lambdas/runtime.py": RESOLVER_RUNTIME,
            "lambdas/handlers.py": RESOLVER_HANDLERS,
            "lambdas/other.py": UNTYPED_HANDLER,
            "shared/adapters/store.py": RESOLVER_STORE,
            "shared/adapters/gateway.py": RESOLVER_GATEWAY,
        },
    )
    # The route and the exception handler are reached through app.resolve; the unregistered function
    # is not; a regex match's end() is no Session.end; the gateway's delete_connection is its client's
    # operation, not Store.delete_connection.
    assert handler_operations("lambdas.handlers.handler", source) == {
        ("dynamodb", "GetItem"),
        ("apigatewaymanagementapi", "DeleteConnection"),
    }
    # An object of unknown type still reaches every method of the name.
    assert handler_operations("lambdas.other.untyped", source) == {("dynamodb", "PutItem")}


def test_the_real_code_is_analysed() -> None:
    assert code().modules.keys() >= {
        "lambdas.runtime",
        "shared.adapters.store",
        "shared.adapters.brain",
        "lambdas.tool_deadline",
    }
