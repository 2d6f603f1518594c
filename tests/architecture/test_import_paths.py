"""Every name of ``shared`` has one import path, the module that defines it: checked on the real tree,
and shown to catch a re-export on a small tree made for the purpose."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.architecture.import_graph import module_files
from tests.architecture.import_paths import SOURCES, borrowed_names


def test_every_name_is_imported_from_the_module_that_defines_it() -> None:
    assert list(borrowed_names()) == []


def test_the_product_and_the_tests_are_read() -> None:
    modules = module_files(SOURCES)
    for module in ("shared.core.stream", "lambdas.turn_abandoned", "voiceide_client", "tests.core.test_conductor"):
        assert module in modules, module


STREAM = """\
from shared.core.decision import Outcome

STALL_LINE = "Sorry."
NORMAL, CUT = "end_turn", "max_tokens"
LIMIT: int = 3


class StreamTaken(Exception):
    pass


def claim_stream() -> Outcome:
    ...


try:
    import fast_json as json_module
except ImportError:
    FALLBACK = True
"""

CONDUCTOR = """\
import time

from shared.core.stream import StreamTaken, claim_stream


def handle_transcript() -> None:
    claim_stream()
"""


def _tree(tmp_path: Path, files: dict[str, str]) -> dict[str, Path]:
    for name, text in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return {"shared": tmp_path / "shared", "tests": tmp_path / "tests"}


CLEAN = {
    "shared/__init__.py": "",
    "shared/core/__init__.py": "",
    "shared/core/decision.py": "class Outcome:\n    pass\n",
    "shared/core/stream.py": STREAM,
    "shared/core/conductor.py": CONDUCTOR,
    "shared/core/speech.py": "from .stream import STALL_LINE\nfrom . import conductor\n",
    "tests/__init__.py": "",
    "tests/test_turns.py": (
        "import shared.core.stream\n"
        "from shared.core import conductor, stream\n"
        "from shared.core.stream import CUT, LIMIT, NORMAL, StreamTaken\n\n"
        "def test_it(monkeypatch, harness) -> None:\n"
        "    conductor.handle_transcript()\n"
        "    stream.FALLBACK, conductor.__name__, shared.core.stream.claim_stream\n"
        "    monkeypatch.setattr(conductor.time, 'time', lambda: 0.0)\n"
        "    conductor.extra = 1\n"
    ),
    # a parameter named like a module is that parameter, not the module
    "tests/test_harness.py": (
        "from shared.core import conductor\n\ndef test_it(conductor) -> None:\n    conductor.script.push()\n"
    ),
}


def test_a_clean_tree_passes(tmp_path: Path) -> None:
    assert list(borrowed_names(_tree(tmp_path, CLEAN))) == []


@pytest.mark.parametrize(
    ("file", "text", "borrowed"),
    [
        ("tests/test_x.py", "from shared.core.conductor import claim_stream\n", "shared.core.conductor.claim_stream"),
        ("tests/test_x.py", "from shared.core.conductor import StreamTaken as Taken\n", "conductor.StreamTaken"),
        ("tests/test_x.py", "def later():\n    from shared.core.stream import Outcome\n", "shared.core.stream.Outcome"),
        ("tests/test_x.py", "from shared.core import conductor\nconductor.claim_stream()\n", "conductor.claim_stream"),
        ("tests/test_x.py", "from shared.core import conductor as c\nc.StreamTaken\n", "conductor.StreamTaken"),
        ("tests/test_x.py", "import shared.core.conductor as c\nc.claim_stream()\n", "conductor.claim_stream"),
        ("tests/test_x.py", "import shared.core.conductor\nshared.core.conductor.claim_stream\n", "claim_stream"),
        ("tests/test_x.py", "from shared.core.stream import json_module\n", "shared.core.stream.json_module"),
        ("shared/core/speech.py", "from .conductor import StreamTaken\n", "shared.core.conductor.StreamTaken"),
        ("shared/core/speech.py", "from shared.core import Outcome\n", "shared.core.Outcome"),
    ],
)
def test_a_name_reached_through_a_module_that_only_imports_it_is_caught(
    tmp_path: Path, file: str, text: str, borrowed: str
) -> None:
    importer = file.removesuffix(".py").replace("/", ".")
    found = list(borrowed_names(_tree(tmp_path, {**CLEAN, file: text})))
    assert len(found) == 1 and found[0].startswith(f"{importer}:") and found[0].endswith(borrowed), found
