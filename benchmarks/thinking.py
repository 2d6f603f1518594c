"""What thinking costs the first word: the same turns on the paced model with the stage's defaults
(thinking off, effort low) and with thinking left on.

The local Bedrock endpoint makes a thinking model (Claude Haiku 5.5 here, the dev stage's model)
write its reasoning before the answer at the paced model's rate (``conductor_local.bedrock.models``:
150 reasoning tokens at effort low, 600 at medium, Haiku 5.5's default), so the figures show the
silence thinking adds before the first partial and the first ``tts.speak``.
"""

from __future__ import annotations

from typing import TextIO

from benchmarks.figures import Result
from benchmarks.report import cell

FLOWS: tuple[tuple[str, dict[str, str]], ...] = (
    ("stage default (thinking off, effort low)", {"BEDROCK_THINKING": "off", "BEDROCK_EFFORT": "low"}),
    ("thinking on, effort low", {"BEDROCK_THINKING": "adaptive", "BEDROCK_EFFORT": "low"}),
    ("thinking left on (the model's default: medium)", {"BEDROCK_THINKING": "adaptive", "BEDROCK_EFFORT": "medium"}),
)
MODEL_ID = "us.anthropic.claude-haiku-5-5"


def report_thinking(results: dict[str, dict[str, Result]], out: TextIO) -> None:
    """One table per scenario: p50 / p99 of the first partial and the first tts.speak, per flow."""
    print(f"\n== first speech with and without thinking ({MODEL_ID}, paced model; ms, p50 / p99) ==", file=out)
    for scenario in next(iter(results.values()), {}):
        print(f"  {scenario}", file=out)
        print(f"    {'flow':<50}{'first partial':>22}{'first tts.speak':>22}", file=out)
        for flow, by_scenario in results.items():
            result = by_scenario[scenario]
            partial = " / ".join(cell(result.p(lambda t: t.first_partial_ms, q), ".0f") for q in (50, 99))
            speak = " / ".join(cell(result.p(lambda t: t.first_speak_ms, q), ".0f") for q in (50, 99))
            print(f"    {flow:<50}{partial:>22}{speak:>22}", file=out)
