"""How soon the first words are heard: the first ``tts.speak`` of a segment with whole sentences
only (``wholeSentences``) and with a first phrase (the default for ``sentenceSpeech``).

    python benchmarks/first_phrase.py

Pure core, no stack: each answer of a corpus of coding-assistant answers is streamed through
``SegmentText`` as the paced offline model streams it (``ModelPace``: deltas of ~3 tokens of whole
words at 80 tokens/s), and each delta is handled as the turn runner's message stream handles it
(a flush when a partial is due or the first speech is ready; the speech of a flush is what
``speakable_until`` offers when ``speak_due``). Times are from the model's first token. Printed:
p50 / p99 of the first ``tts.speak``, the first spoken chunk's words, how often a phrase went
first, how long after its phrase had fully arrived it went out, the silence (if any) between the
phrase and the rest of its sentence (the phrase played at ``WORDS_PER_S``), the speaks per answer
and the core's time per delta.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Collection
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TextIO

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.figures import percentile
from conductor_local.bedrock.offline_brain import CHARS_PER_TOKEN, ModelPace, word_pieces
from shared.core.speakable import split_answer
from shared.core.speech import PHRASE_MIN_WORDS, Pacing, SegmentText
from shared.wire.protocol import SENTENCE_SPEECH, WHOLE_SENTENCES

WORDS_PER_S = 2.7  # a synthesized voice at its default rate, about 160 words a minute
SENTENCES_ONLY = (SENTENCE_SPEECH, WHOLE_SENTENCES)
PHRASE_FIRST = (SENTENCE_SPEECH,)
ROW = "first tts.speak after the model's first token"

CORPUS: tuple[str, ...] = (
    "If the build fails on the simulator, check that the deployment target matches the one in your "
    "scheme. Xcode sometimes keeps an older value after you change it in the project settings.",
    "The crash happens because the closure captures self strongly; the view controller is never "
    "released. Use a weak reference in the capture list and unwrap it at the top of the closure.",
    "Sure. I'll open the file and look at the failing test first.",
    "Yes, that works. The async version is a little cleaner, though.",
    "When you call fetchUser from the main actor, the network request still runs in the background, "
    "so the interface stays responsive. The await only suspends the task, not the thread.",
    "There are 1,204 warnings in the project, most of them deprecations from the old networking "
    "layer. Fixing the ones in the login flow first would remove about a third of them.",
    "Version 2.3.1 of the package introduced the change, and the release notes mention it only "
    "briefly. Pinning to 2.3.0 keeps the old behaviour until you migrate.",
    "The test failed - the mock was never reset between runs, so the second case saw the first "
    "case's data. Add a tearDown that clears it.",
    "Here's the fix: move the call to loadData into viewDidLoad instead of the initializer, because "
    "the outlets aren't connected yet when init runs.",
    "You can model this with a struct, a class, or an enum. A struct is the simplest choice here, "
    "since the value never changes identity.",
    "It supports Swift, Kotlin, and Go out of the box. Other languages need a plugin.",
    "Run `swift test --filter ParserTests` to run only the parser tests. It takes about ten seconds.",
    "Open Sources/App/Networking/Client.swift and look at the retry logic near the top. The delay "
    "doubles each time but is never capped.",
    "The short answer is yes — you just need to add the entitlement and rebuild. The longer answer "
    "involves provisioning profiles.",
    "Here are the steps:\n\n1. Clean the build folder.\n2. Delete derived data.\n3. Rebuild the "
    "project.\n\nThat usually fixes stale module errors.",
    "In Swift, optionals are enums with two cases, some and none. The question mark syntax is sugar for that enum.",
    "I ran the tests and three of them failed, all in the date formatting suite. They assume the "
    "device is set to a US locale.",
    "To fix the memory leak, break the retain cycle between the coordinator and its child. The "
    "child should hold its parent weakly.",
    "Done.",
    "No, that function isn't thread safe. Two callers can read the cache while a third writes to it.",
    "The function `parse(_:)` returns nil when the input is empty, which is why `testEmptyInput` "
    "fails. Return an empty array instead.",
    "Looking at the stack trace, the crash comes from force unwrapping the user's avatar URL when "
    "the profile has no picture. A guard with a default image would avoid it.",
    "Your pull request looks good overall, but two things stand out. The new helper duplicates an "
    "existing one, and the tests don't cover the error path.",
    "Because the array is sorted, a binary search finds the element in logarithmic time, which is "
    "much faster than the linear scan you have now for large inputs.",
    "First, open the project settings, then select the app target and go to Signing and "
    "Capabilities. Turn on push notifications there.",
    "See https://developer.apple.com/documentation/swiftui for the full list of modifiers. The one "
    "you want is called task.",
    "The complexity is $O(n \\log n)$ because of the sort. Everything after it is linear.",
    "Add this to the view:\n\n```swift\n.task {\n    await model.load()\n}\n```\n\nIt runs when the "
    "view appears and is cancelled when it disappears.",
    "That error usually means the certificate has expired: open Keychain Access, delete the old "
    "one, and download a new one from the developer portal.",
    "Honestly, I'd keep it simple for now. A dictionary keyed by the user identifier is enough "
    "until you have thousands of entries.",
    "Whenever the text field changes, the view model validates the email address and updates the "
    "button's enabled state, which triggers a redraw of the form.",
    "The migration will take a few minutes on large databases, so run it during a quiet period and "
    "keep a backup of the store file.",
    "e.g., you could cache the decoded images in memory, then fall back to the disk cache when the app is relaunched.",
)


@dataclass(frozen=True)
class Speech:
    at_ms: float  # from the model's first token
    text: str  # what tts.speak says
    raw_end: int  # where in the answer it ends


@dataclass(frozen=True)
class Played:
    """One answer streamed in one mode: its speeches and the core's time per delta."""

    speeches: list[Speech]
    phrase_ready_ms: float | None  # when the first phrase and the space after it had arrived (a phrase only)
    core_us: list[float]


def deltas(text: str, pace: ModelPace) -> list[tuple[float, str]]:
    """The answer as the paced model streams it: (ms after the first token, delta)."""
    out: list[tuple[float, str]] = []
    at = 0.0
    for index, piece in enumerate(word_pieces(text, pace.tokens_per_delta * CHARS_PER_TOKEN)):
        if index:
            at += pace.delta_seconds(len(piece)) * 1000
        out.append((at, piece))
    return out


def play(text: str, capabilities: Collection[str], pace: ModelPace, pacing: Pacing) -> Played:
    """The answer through the message stream's decisions, as its flush makes them."""
    segment = SegmentText(pacing)
    speeches: list[Speech] = []
    core_us: list[float] = []
    last_partial = ""
    arrived: list[tuple[float, int]] = []  # (ms, characters so far)
    phrase = False
    for at_ms, delta in deltas(text, pace):
        began = time.perf_counter()
        segment.add(delta)
        arrived.append((at_ms, len(segment.text)))
        first_ready = segment.spoken == 0 and segment.speakable_until(capabilities) > 0
        if segment.partial_due(at_ms / 1000) or first_ready:
            now = at_ms / 1000
            until = segment.speakable_until(capabilities) if segment.speak_due(now) else segment.spoken
            partial = segment.partial
            shows = bool(partial) and partial != last_partial
            if until > segment.spoken:
                piece = segment.text[segment.spoken : until].strip()
                speeches.append(Speech(at_ms, split_answer(piece).speech, until))
                segment.spoke(until, now)
                phrase = phrase or segment.after_phrase
            if shows:
                last_partial = partial
            segment.shown_now(now, posted=shows)
        core_us.append((time.perf_counter() - began) * 1e6)
    end_ms = arrived[-1][0] if arrived else 0.0
    if rest := segment.text[segment.spoken :].strip():
        speeches.append(Speech(end_ms, split_answer(rest).speech, len(segment.text)))
    phrase_ready = next(ms for ms, length in arrived if length >= speeches[0].raw_end) if phrase else None
    return Played(speeches, phrase_ready, core_us)


def words(text: str) -> int:
    return len(text.split())


@dataclass(frozen=True)
class Mode:
    name: str
    runs: list[Played]

    @property
    def first_ms(self) -> list[float]:
        return [run.speeches[0].at_ms for run in self.runs if run.speeches]

    @property
    def first_words(self) -> list[float]:
        return [float(words(run.speeches[0].text)) for run in self.runs if run.speeches]

    @property
    def fired(self) -> list[Played]:
        return [run for run in self.runs if run.phrase_ready_ms is not None]

    @property
    def lag_ms(self) -> list[float]:
        """From the phrase (and the space after it) having arrived to its tts.speak."""
        return [run.speeches[0].at_ms - (run.phrase_ready_ms or 0.0) for run in self.fired]

    @property
    def gaps_ms(self) -> list[float]:
        """Silence between the phrase, played, and the next tts.speak."""
        gaps = []
        for run in self.fired:
            first, *rest = run.speeches
            if rest:
                played_until = first.at_ms + words(first.text) / WORDS_PER_S * 1000
                gaps.append(max(0.0, rest[0].at_ms - played_until))
        return gaps

    @property
    def speaks(self) -> float:
        return sum(len(run.speeches) for run in self.runs) / len(self.runs)

    @property
    def core_us(self) -> list[float]:
        return [us for run in self.runs for us in run.core_us]


def measure(name: str, capabilities: Collection[str], pace: ModelPace, pacing: Pacing) -> Mode:
    return Mode(name, [play(text, capabilities, pace, pacing) for text in CORPUS])


def _p(values: list[float], q: float, spec: str = ".0f") -> str:
    return format(percentile(values, q), spec) if values else "-"


def report(out: TextIO = sys.stdout, pace: ModelPace | None = None, *, sweep: bool = True) -> None:
    """The row sentence-only vs phrase-first (with ``sweep``, the phrase's minimum words around
    the default too)."""
    pace = pace or ModelPace()
    pacing = Pacing()
    total = len(CORPUS)
    print(
        f"\n== {ROW} (pure core: {total} answers at {pace.tokens_per_s:g} tokens/s, "
        f"~{pace.tokens_per_delta} tokens per delta; ms p50 / p99) ==",
        file=out,
    )
    print(
        f"    {'flow':<34}{'first speak':>14}{'gain':>7}{'words':>7}{'phrase':>9}{'after phrase':>15}"
        f"{'gap':>6}{'speaks':>8}{'core/delta us':>15}",
        file=out,
    )
    whole = measure("sentence-only (wholeSentences)", SENTENCES_ONLY, pace, pacing)
    modes = [whole]
    for min_words in sorted({PHRASE_MIN_WORDS, *((2, 3, 4, 5) if sweep else ())}):
        label = f"phrase-first, >= {min_words} words" + (" (default)" if min_words == PHRASE_MIN_WORDS else "")
        modes.append(measure(label, PHRASE_FIRST, pace, replace(pacing, phrase_min_words=min_words)))
    for mode in modes:
        gains = [
            before.speeches[0].at_ms - after.speeches[0].at_ms
            for before, after in zip(whole.runs, mode.runs, strict=True)
            if after.phrase_ready_ms is not None
        ]
        print(
            f"    {mode.name:<34}{_p(mode.first_ms, 50):>6} / {_p(mode.first_ms, 99):>5}{_p(gains, 50):>7}"
            f"{_p(mode.first_words, 50):>7}{len(mode.fired):>5}/{total:<3}"
            f"{_p(mode.lag_ms, 50):>7} / {_p(mode.lag_ms, 99):>5}{_p(mode.gaps_ms, 99):>6}"
            f"{mode.speaks:>8.2f}{_p(mode.core_us, 50, '.1f'):>7} / {_p(mode.core_us, 99, '.0f'):>5}",
            file=out,
        )
    print(
        "    gain: p50 ms sooner where a phrase went first; words: the first tts.speak's (p50); phrase: answers "
        "whose first tts.speak was a phrase;\n    after phrase: ms from the phrase and the space after it "
        "arriving to its tts.speak (a comma waits for two more whole words);\n    gap: silence (p99 ms) "
        f"between the phrase, played at {WORDS_PER_S:g} words/s, and the next tts.speak; speaks: per answer, "
        "each a commit",
        file=out,
    )


def main() -> int:
    began = time.perf_counter()
    report()
    print(f"\ntotal {time.perf_counter() - began:.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
