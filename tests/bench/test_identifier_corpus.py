"""The identifier eval's corpus is well formed: names of real code bases with their version, and
enough phrases, each meaning a name of its code base or none; and the eval runs on it."""

from __future__ import annotations

import ast
import json
from collections import Counter

import pytest

from benchmarks.eval_identifiers import CORPUS, code_bases, main, phrases
from benchmarks.identifier_corpus.extract_names import MAX_NAMES, file_names

SETS = {"tuning", "held_out", "commands"}


def test_each_code_base_lists_at_most_5000_distinct_names_with_relative_paths_and_a_version() -> None:
    bases = code_bases()
    assert len(bases) >= 3
    for package, (version, names) in bases.items():
        assert version and version[0].isdigit(), package
        assert 0 < len(names) <= MAX_NAMES == 5000
        assert len({known.name for known in names}) == len(names)
        for known in names:
            assert known.path is not None and known.path.startswith(f"{package}/") and known.path.endswith(".py")
    assert max(len(names) for _, names in bases.values()) == 5000  # the timing runs against 5,000 names


def test_the_phrases_are_enough_and_each_means_a_name_of_its_code_base_or_none() -> None:
    bases = code_bases()
    names = {package: {known.name for known in known_names} for package, (_, known_names) in bases.items()}
    cases = phrases()
    assert len(cases) >= 300
    assert sum(case.name is None for case in cases) >= 60
    assert len({case.code_base for case in cases if case.name is not None}) >= 3
    for case in cases:
        assert case.transcript.strip() and case.code_base in names and case.split in SETS, case
        assert case.name is None or case.name in names[case.code_base], case
    assert not [text for text, count in Counter(case.transcript for case in cases).items() if count > 1]


def test_the_phrases_file_has_one_phrase_a_line() -> None:
    lines = (CORPUS / "phrases.json").read_text(encoding="utf-8").splitlines()
    document = json.loads("\n".join(lines))
    assert len(lines) == len(document["phrases"]) + 2


def test_names_are_taken_from_source_without_importing_it() -> None:
    source = """
LIMIT = 3
Alias = dict[str, int]
logger: object = None
class Reader:
    def read_all(self): ...
    async def close(self): ...
def load_file(path): ...
if True:
    hidden = 1
"""
    assert file_names(ast.parse(source)) == (["LIMIT", "Alias", "logger", "Reader", "load_file"], ["read_all", "close"])


def test_the_eval_prints_its_figures_and_goals(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--rounds", "1"]) == 0
    printed = capsys.readouterr().out
    for figure in ("top-1 accuracy", "wrong candidates", "index build", "match p50", "match p95"):
        assert figure in printed
    assert "MET" in printed
