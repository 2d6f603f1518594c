"""How well spoken phrases are heard as the identifiers of a code base (``shared.core.identifiers``).

    python benchmarks/eval_identifiers.py [--misses] [--rounds N]

The corpus (``benchmarks/identifier_corpus/``): the names of real open-source packages
(``names_<package>.json``, written by ``extract_names.py``) and phrases as a recognizer writes them
(``phrases.json``: the transcript, the name it means or null, the code base, and its set: ``tuning``,
the phrases the matcher's rules were settled on; ``held_out``, written after them and never tuned on;
``commands``, bare voice commands that mean no name). A phrase with a name is right when the index of
its code base answers that name first (or a name said the same way: ``RichCast`` for ``rich_cast``);
a phrase without one is wrong when any candidate comes back. Timing: every transcript against the
largest index (5,000 names). Prints figures and whether each goal is met; nothing is asserted, the
exit status is 0.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from shared.core.identifiers import KnownName, NameIndex, spoken_form

CORPUS = Path(__file__).resolve().parent / "identifier_corpus"
ACCURACY_GOAL = 0.85  # top-1 on phrases that mean a name
WRONG_GOAL = 0.01  # candidates on phrases that mean none
P95_GOAL_MS = 5.0  # per transcript against 5,000 names


@dataclass(frozen=True)
class Phrase:
    transcript: str
    name: str | None  # the name meant, or None when the phrase means none
    code_base: str
    split: str  # "tuning" or "held_out"


def code_bases() -> dict[str, tuple[str, list[KnownName]]]:
    """Per package: (version, names in relevance order)."""
    found = {}
    for path in sorted(CORPUS.glob("names_*.json")):
        document = json.loads(path.read_text(encoding="utf-8"))
        names = [KnownName(entry["name"], entry["path"]) for entry in document["names"]]
        found[document["package"]] = (document["version"], names)
    return found


def phrases() -> list[Phrase]:
    document = json.loads((CORPUS / "phrases.json").read_text(encoding="utf-8"))
    return [Phrase(row["transcript"], row["name"], row["code_base"], row["set"]) for row in document["phrases"]]


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


def verdict(met: bool) -> str:
    return "MET" if met else "NOT MET"


@dataclass
class Tally:
    """Outcomes over a set of phrases."""

    named: int = 0
    right: int = 0
    alike: int = 0  # right by a name said the same as the one meant (RichCast for rich_cast)
    plain: int = 0
    wrong: int = 0  # phrases meaning none that got a candidate from their code base's index
    wrong_anywhere: int = 0  # ... from any code base's index

    @property
    def accuracy(self) -> float:
        return self.right / self.named if self.named else 0.0

    @property
    def wrong_rate(self) -> float:
        return self.wrong / self.plain if self.plain else 0.0


def judge(case: Phrase, indexes: dict[str, NameIndex], tally: Tally, misses: list[str]) -> None:
    """Match one phrase and count its outcome (and describe it in ``misses`` when it is heard wrong)."""
    found = indexes[case.code_base].match(case.transcript)
    where = f"  [{case.code_base}, {case.split}] {case.transcript!r}"
    if case.name is not None:
        tally.named += 1
        if found and found[0].name == case.name:
            tally.right += 1
        elif found and spoken_form(found[0].name) == spoken_form(case.name):
            tally.right += 1  # speech cannot tell them apart
            tally.alike += 1
        else:
            heard = f"{found[0].name} ({found[0].score:.2f})" if found else "nothing"
            misses.append(f"{where}: wanted {case.name}, got {heard}")
        return
    tally.plain += 1
    if found:
        tally.wrong += 1
        misses.append(f"{where}: wanted nothing, got {found[0].name}")
    elsewhere = [(package, found) for package, index in indexes.items() if (found := index.match(case.transcript))]
    tally.wrong_anywhere += bool(elsewhere)
    misses.extend(
        f"{where}: wanted nothing, got {found[0].name} from {package}"
        for package, found in elsewhere
        if package != case.code_base
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--misses", action="store_true", help="list every phrase heard wrong")
    parser.add_argument("--rounds", type=int, default=5, help="timing rounds over every transcript")
    args = parser.parse_args(argv)

    bases = code_bases()
    cases = phrases()
    indexes: dict[str, NameIndex] = {}
    build_ms: dict[str, float] = {}
    for package, (_, names) in bases.items():
        began = time.perf_counter()
        indexes[package] = NameIndex.build(names)
        build_ms[package] = (time.perf_counter() - began) * 1000

    tallies = {"all": Tally(), **{case.split: Tally() for case in cases}}
    misses: list[str] = []
    for case in cases:
        judge(case, indexes, tallies["all"], misses)
        judge(case, indexes, tallies[case.split], [])

    largest = max(indexes, key=lambda package: len(indexes[package]))
    index = indexes[largest]
    for case in cases:  # warm up
        index.match(case.transcript)
    timings: list[float] = []
    for _ in range(max(1, args.rounds)):
        for case in cases:
            began = time.perf_counter()
            index.match(case.transcript)
            timings.append((time.perf_counter() - began) * 1000)

    total = tallies["all"]
    p50, p95 = statistics.median(timings), percentile(timings, 95)
    print("Identifiers heard right (shared.core.identifiers)\n")
    print(
        "code bases: "
        + ", ".join(f"{package} {version} ({len(names)} names)" for package, (version, names) in bases.items())
    )
    print(f"cases: {len(cases)} ({total.named} mean a name, {total.plain} mean none)\n")
    rows = [
        ("top-1 accuracy, phrases with a name", f"{total.accuracy:.1%} ({total.right}/{total.named})",
         f">= {ACCURACY_GOAL:.0%}", verdict(total.accuracy >= ACCURACY_GOAL)),
        ("wrong candidates, phrases with none", f"{total.wrong_rate:.1%} ({total.wrong}/{total.plain})",
         f"<= {WRONG_GOAL:.0%}", verdict(total.wrong_rate <= WRONG_GOAL)),
        (f"index build, {largest} ({len(index)} names)", f"{build_ms[largest]:.0f} ms", "-", "-"),
        (f"match p50 per transcript, {len(index)} names", f"{p50:.2f} ms", "-", "-"),
        (f"match p95 per transcript, {len(index)} names", f"{p95:.2f} ms", f"<= {P95_GOAL_MS:g} ms",
         verdict(p95 <= P95_GOAL_MS)),
    ]  # fmt: skip
    header = ("figure", "measured", "goal", "")
    widths = [max(len(row[column]) for row in [header, *rows]) for column in range(4)]
    for row in [header, *rows]:
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip())
    print("\nby set (tuning: the rules were settled on it; held_out: written after them, never tuned on;")
    print('commands: bare voice commands, "run tests", "close tab"):')
    for split, tally in tallies.items():
        if split == "all":
            continue
        accuracy = f"top-1 {tally.accuracy:.1%} ({tally.right}/{tally.named}), " if tally.named else ""
        print(f"  {split}: {accuracy}wrong candidates {tally.wrong_rate:.1%} ({tally.wrong}/{tally.plain})")
    print(f"right by a name said the same as the one meant (RichCast for rich_cast): {total.alike}")
    print(f"phrases with none that any code base's index answers: {total.wrong_anywhere}/{total.plain}")
    print("index build per code base: " + ", ".join(f"{package} {ms:.0f} ms" for package, ms in build_ms.items()))
    if args.misses and misses:
        print("\nheard wrong:")
        print("\n".join(misses))
    return 0


if __name__ == "__main__":
    sys.exit(main())
