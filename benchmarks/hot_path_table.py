"""The hot path's figures against their goals, before this release's changes and now.

``BEFORE``: ``make bench --quick`` on the release before them (the paced model, the stages'
defaults): the blocking DynamoDB round trips then counted from the transcript, for the tool round
too (6.0); the tool round's from its result are this release's own row. Printed at the end of
``make bench`` with what this run measured.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TextIO

from benchmarks.barge_in import BargeIn
from benchmarks.figures import Result, percentile
from benchmarks.first_phrase import Mode, measure
from conductor_local.bedrock.offline_brain import ModelPace
from shared.core.speech import Pacing
from shared.wire.protocol import SENTENCE_SPEECH, WHOLE_SENTENCES

PLAIN, RAMBLE, TOOL = "plain short answer", "plain 100-delta answer", "one tool round"


@dataclass(frozen=True)
class Row:
    name: str
    before: str
    goal: float
    unit: str = ""


ROWS = (
    Row("blocking round trips before the first partial, plain turn", "2.0", 1),
    Row("blocking round trips before the first partial, after a tool result", "6.0*", 2),
    Row("DynamoDB requests for a tool round", "13", 7),
    Row("DynamoDB requests for a 100-delta answer", "17", 12),
    Row("write units for a 100-delta answer", "64", 30),
    Row("write units for a plain short answer", "30", 15),
    Row("write units for a tool round", "50", 25),
    Row("barge-in -> model stream closed, p50", "~500", 150, " ms"),
    Row("barge-in -> model stream closed, p99", "~950", 300, " ms"),
    Row("cold import of lambdas.message (with bytecode)", "~400", 250, " ms"),
    Row("cold import of lambdas.turn (with bytecode)", "~400", 250, " ms"),
    Row("first tts.speak after the first speakable phrase, p99", "~115**", 50, " ms"),
)


def _mean(result: Result | None, pick: Callable[..., float | None]) -> float | None:
    return None if result is None else result.mean(pick)


def measured(
    results: dict[tuple[str, str, bool], Result],
    barge_ins: dict[str, list[BargeIn]],
    imports: dict[str, tuple[float, float]] | None,
    pace: ModelPace,
) -> list[float | None]:
    def paced(name: str) -> Result | None:
        return results.get((name, "paced", False))

    after = [b.model_after_ms for b in barge_ins.get("new, sentenceSpeech", [])]
    phrases: Mode = measure("phrase-first", (SENTENCE_SPEECH,), pace, Pacing())
    whole: Mode = measure("whole", (SENTENCE_SPEECH, WHOLE_SENTENCES), pace, Pacing())
    del whole  # the sentence-only flow is printed in its own row above
    return [
        _mean(paced(PLAIN), lambda t: t.blocking),
        _mean(paced(TOOL), lambda t: t.blocking_after_result),
        _mean(paced(TOOL), lambda t: len(t.dynamo)),
        _mean(paced(RAMBLE), lambda t: len(t.dynamo)),
        _mean(paced(RAMBLE), lambda t: sum(r.wru for r in t.dynamo)),
        _mean(paced(PLAIN), lambda t: sum(r.wru for r in t.dynamo)),
        _mean(paced(TOOL), lambda t: sum(r.wru for r in t.dynamo)),
        percentile(after, 50) if after else None,
        percentile(after, 99) if after else None,
        imports["lambdas.message"][0] if imports and "lambdas.message" in imports else None,
        imports["lambdas.turn"][0] if imports and "lambdas.turn" in imports else None,
        percentile(phrases.lag_ms, 99) if phrases.lag_ms else None,
    ]


def report_table(values: list[float | None], out: TextIO) -> None:
    print("\n== the hot path: before this release -> now (paced model), against the goals ==", file=out)
    print(f"  {'figure':<72}{'before':>9}{'now':>9}{'goal':>9}   met", file=out)
    for row, value in zip(ROWS, values, strict=True):
        now = "-" if value is None else f"{value:.1f}"
        met = "-" if value is None else ("yes" if value <= row.goal else "NO")
        print(f"  {row.name + row.unit:<72}{row.before:>9}{now:>9}{row.goal:>9g}   {met}", file=out)
    print("  * counted from the transcript then; from the tool result the app sent now (its own row)", file=out)
    print("  ** then: the first whole sentence; now: from the first speakable phrase to its tts.speak", file=out)
