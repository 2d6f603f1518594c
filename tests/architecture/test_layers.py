"""The layers of the code and the absence of import circles, checked on the real tree, and shown to
catch a forbidden import or a circle on a small tree made for the purpose."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.architecture.import_graph import PACKAGES, circles, layer_violations, read_graph


def test_the_product_has_no_import_circle() -> None:
    assert circles(read_graph()) == []


def test_the_layers_are_kept() -> None:
    assert layer_violations(read_graph()) == []


def test_every_package_is_read() -> None:
    graph = read_graph()
    for package in PACKAGES:
        assert any(module.split(".")[0] == package for module in graph.internal), package
    assert "shared.flows.conductor_service" in graph.internal["lambdas.message"] or any(
        target.startswith("shared.flows") for target in graph.internal["lambdas.message"]
    )


def _tree(tmp_path: Path, files: dict[str, str]) -> dict[str, Path]:
    for name, text in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return {"shared": tmp_path / "shared", "lambdas": tmp_path / "lambdas"}


CLEAN = {
    "shared/__init__.py": "",
    "shared/core/__init__.py": "",
    "shared/core/rules.py": "from shared.wire import protocol\n",
    "shared/wire/__init__.py": "",
    "shared/wire/protocol.py": "import json\nimport pydantic\n",
    "shared/adapters/__init__.py": "",
    "shared/adapters/store.py": "import boto3\nfrom shared.core import rules\n",
    "shared/flows/__init__.py": "",
    "shared/flows/service.py": "from shared.adapters.store import x\nfrom shared.core.rules import y\n",
    "lambdas/__init__.py": "",
    "lambdas/message.py": "from shared.flows import service\n",
}


def test_a_clean_tree_passes(tmp_path: Path) -> None:
    graph = read_graph(_tree(tmp_path, CLEAN))
    assert circles(graph) == []
    assert layer_violations(graph) == []


@pytest.mark.parametrize(
    ("file", "text", "rule"),
    [
        ("shared/core/rules.py", "import boto3\n", "never touch AWS"),
        ("shared/core/rules.py", "def f():\n    from botocore.exceptions import ClientError\n", "never touch AWS"),
        ("shared/core/rules.py", "from shared.adapters import store\n", "the core imports only itself"),
        ("shared/wire/protocol.py", "from shared.core.rules import z\n", "the wire formats import only each other"),
        ("shared/adapters/store.py", "from shared.flows.service import run\n", "adapters never import flows"),
        ("shared/flows/service.py", "import lambdas.message\n", "imports nothing outside it"),
    ],
)
def test_a_forbidden_import_is_caught(tmp_path: Path, file: str, text: str, rule: str) -> None:
    graph = read_graph(_tree(tmp_path, {**CLEAN, file: text}))
    broken = layer_violations(graph)
    assert any(rule in line for line in broken), broken


def test_a_circle_is_caught_even_behind_a_lazy_import(tmp_path: Path) -> None:
    files = {
        **CLEAN,
        "shared/flows/delivery.py": "from shared.flows import service\n",
        "shared/flows/service.py": "def later():\n    from . import delivery\n",
    }
    assert circles(read_graph(_tree(tmp_path, files))) == [["shared.flows.delivery", "shared.flows.service"]]


def test_the_clients_rooms_import_only_the_rooms_below_them(tmp_path: Path) -> None:
    client = tmp_path / "voiceide_client"
    files = {
        "__init__.py": "",
        "voice/__init__.py": "",
        "voice/speaker.py": "import json\n",
        "connection/__init__.py": "",
        "connection/link.py": "from voiceide_client.voice import speaker\n",
        "companion/__init__.py": "",
        "companion/session.py": "from voiceide_client.connection import link\n",
    }
    for name, text in files.items():
        (client / name).parent.mkdir(parents=True, exist_ok=True)
        (client / name).write_text(text, encoding="utf-8")
    assert layer_violations(read_graph({"voiceide_client": client})) == []
    (client / "voice" / "speaker.py").write_text("from voiceide_client.companion import session\n", encoding="utf-8")
    (client / "connection" / "link.py").write_text("import lambdas.message\n", encoding="utf-8")
    broken = layer_violations(read_graph({"voiceide_client": client}))
    assert any("imports only the rooms below it" in line for line in broken), broken
