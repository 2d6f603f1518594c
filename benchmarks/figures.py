"""What the benchmark measured: one turn's figures, a scenario's turns, percentiles."""

from __future__ import annotations

import math
import statistics
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from benchmarks.costs import TurnUsage
from benchmarks.meters import DynamoRequest, ModelStream, Post


@dataclass
class TurnFigures:
    completed: bool
    final_complete: bool
    first_partial_ms: float | None
    overhead_ms: float | None
    first_speak_ms: float | None
    turn_s: float
    dynamo: list[DynamoRequest]
    blocking: int | None
    posts: list[Post]
    streams: list[ModelStream]
    lambda_calls: list[tuple[str, float, float]]
    client_frames: int
    # From the tool result the app sent (a tool round) to the answer's first partial after it.
    blocking_after_result: int | None = None


@dataclass
class Scenario:
    name: str
    text: str
    turns: int
    tools: bool = False


@dataclass
class Result:
    turns: list[TurnFigures] = field(default_factory=list)

    def values(self, pick: Callable[[TurnFigures], float | None]) -> list[float]:
        return [v for v in map(pick, self.turns) if v is not None]

    def p(self, pick: Callable[[TurnFigures], float | None], q: float) -> float | None:
        values = self.values(pick)
        return percentile(values, q) if values else None

    def mean(self, pick: Callable[[TurnFigures], float | None]) -> float | None:
        values = self.values(pick)
        return statistics.fmean(values) if values else None

    def operations(self) -> Counter[str]:
        return Counter(r.operation for t in self.turns for r in t.dynamo)

    def usage(self) -> TurnUsage:
        usage = TurnUsage(turns=len(self.turns))
        for turn in self.turns:
            usage.message_bytes += [p.size for p in turn.posts] + [0] * turn.client_frames
            usage.connection_s += turn.turn_s
            for function, _, seconds in turn.lambda_calls:
                usage.lambda_invocations[function] = usage.lambda_invocations.get(function, 0) + 1
                billed = math.ceil(seconds * 1000) / 1000
                usage.lambda_seconds[function] = usage.lambda_seconds.get(function, 0.0) + billed
            usage.wru += sum(r.wru + r.index_wru for r in turn.dynamo)  # the index's writes are billed alike
            usage.rru += sum(r.rru for r in turn.dynamo)
            for stream in turn.streams:
                reported = stream.usage
                usage.input_tokens += reported.get("inputTokens", 0)
                usage.cache_read_tokens += reported.get("cacheReadInputTokens", 0)
                usage.cache_write_tokens += reported.get("cacheWriteInputTokens", 0)
                usage.output_tokens += math.ceil(stream.output_chars / 4)
                usage.cacheable_tokens += stream.prefix_tokens
        return usage


def percentile(values: list[float], q: float) -> float:
    """The q-th percentile (0..100), linear between closest ranks."""
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q / 100
    low = int(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)
