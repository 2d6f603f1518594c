"""docs/capacity.md says what the capacity report says: every table and every marked figure of its
prose is the report's, on the committed figures (so it does not depend on the machine)."""

from __future__ import annotations

import io

import pytest

from benchmarks.capacity_doc import DOC, DocError, generated, render
from benchmarks.capacity_model import stages_of_cdk_json
from benchmarks.capacity_report import FIGURES_FILE, figures_for, load_figures, report
from infra.quota_readings import load_context


@pytest.fixture(scope="module")
def written() -> tuple[dict[str, str], dict[str, str]]:
    return generated(load_figures(FIGURES_FILE), load_context())


def test_the_doc_is_what_the_report_says(written: tuple[dict[str, str], dict[str, str]]) -> None:
    blocks, values = written
    text = DOC.read_text(encoding="utf-8")
    assert render(text, blocks, values) == text, "docs/capacity.md is stale: run python benchmarks/capacity_doc.py"


def test_the_doc_marks_the_headline_figures_and_the_three_columns(
    written: tuple[dict[str, str], dict[str, str]],
) -> None:
    text = DOC.read_text(encoding="utf-8")
    for key in (
        "prod.defaults.people",
        "prod.stated.people",
        "prod.tpm_per_speaker",
        "prod.cost",
        "dev.defaults.people",
        "prod.memory.cost_hour",
        "prod.memory.cost_session",
        "prod.memory.first_quota",
        "prod.memory.stated.people",
    ):
        assert f"<!-- v:{key} -->" in text
    for block in ("speaker", "dev", "prod", "costs", "prod-quotas", "memory"):
        assert f"<!-- capacity:{block} -->" in text
    blocks, _ = written
    for title in ("AWS defaults", "doctor's reading", "stated, unconfirmed", "first AWS quota to bind"):
        assert title in blocks["prod"]
    assert "L-E3D6644C" in blocks["memory"] and "AgentCore Memory" in blocks["costs"]


def test_a_stale_figure_in_the_prose_or_a_table_is_rewritten() -> None:
    text = (
        "prod holds <!-- v:prod.people -->60<!-- /v --> people.\n\n"
        "<!-- capacity:costs -->\n| old | table |\n<!-- /capacity:costs -->\n"
    )
    fresh = render(text, {"costs": "| new | table |"}, {"prod.people": "44"})
    assert "<!-- v:prod.people -->44<!-- /v -->" in fresh and "60" not in fresh
    assert "| new | table |" in fresh and "| old | table |" not in fresh
    assert render(fresh, {"costs": "| new | table |"}, {"prod.people": "44"}) == fresh  # idempotent
    with pytest.raises(DocError, match=r"prod\.people"):
        render(text, {"costs": ""}, {})


def test_the_report_on_the_same_figures_is_the_same() -> None:
    measured = load_figures(FIGURES_FILE)
    first, second = io.StringIO(), io.StringIO()
    report(measured, load_context(), first)
    report(load_figures(FIGURES_FILE), load_context(), second)
    assert first.getvalue() == second.getvalue()


def test_the_committed_figures_were_measured_with_each_stages_model_and_speculation() -> None:
    measured = load_figures(FIGURES_FILE)
    for stage in stages_of_cdk_json():
        figures = figures_for(stage, measured)
        assert (figures.model, figures.speculation) == (stage.model, stage.speculation), (
            f"{stage.name}: re-measure (make capacity CAPACITY_ARGS='--save benchmarks/capacity_figures.json')"
        )
