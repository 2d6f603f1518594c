"""Text-to-speech for the client: espeak-ng, a printed line, or silence; every playback can be stopped.

``Speaker.speak`` returns ``True`` when the text was played to the end and ``False`` when
``stop()`` cut it short or dropped it before it started (a barge-in). Texts are played one at a
time, in the order ``speak`` was called: a conductor that speaks sentence by sentence sends the
next sentence while the previous one still plays. ``hold()`` (a barge-in) drops every text asked
for until ``resume()`` (the user's next request). It never blocks the event loop: espeak-ng runs
as an asyncio subprocess that ``stop()`` kills.

A ``Playback`` passed to ``speak`` follows how far the text got, word by word, so a barge-in can
tell the conductor what the user actually heard.
"""

from __future__ import annotations

import asyncio
import itertools
import re
import shutil
import sys
import time
from abc import ABC, abstractmethod
from pathlib import Path
from typing import TextIO

ESPEAK = "espeak-ng"
ESPEAK_WORDS_PER_MINUTE = 175  # espeak-ng's default speed (-s)
_WORD = re.compile(r"\S+")


class Playback:
    """How much of one text has been heard: its first ``words`` words."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.words = 0
        self.finished = False

    @property
    def total_words(self) -> int:
        return len(_WORD.findall(self.text))

    @property
    def heard(self) -> str:
        """The text up to the end of its last word heard ("" when none), as written."""
        if self.finished:
            return self.text.strip()
        if self.words <= 0:
            return ""
        ends = [match.end() for match in _WORD.finditer(self.text)]
        return self.text[: ends[min(self.words, len(ends)) - 1]].strip() if ends else ""


class SpeakerError(RuntimeError):
    """Playback failed (not interrupted): the tool answers with an error result."""


class Speaker(ABC):
    """Base class: subclasses implement ``_play``; ``speak``/``stop`` handle interruption."""

    def __init__(self) -> None:
        self._playing: set[asyncio.Task[None]] = set()
        self._last: asyncio.Future[None] | None = None  # done when the latest text asked for is over
        self._generation = 0  # bumped by stop(): texts asked for before it are dropped
        self._held = False
        self._current: Playback | None = None  # the text playing now
        self.spoken: list[str] = []
        self.interrupted: list[str] = []  # cut short while playing
        self.dropped: list[str] = []  # never started: stopped while queued, or asked for while held

    @property
    def is_playing(self) -> bool:
        return bool(self._playing)

    @property
    def held(self) -> bool:
        return self._held

    async def speak(self, text: str, playback: Playback | None = None) -> bool:
        """Play ``text`` after every text asked for before it; ``False`` when stopped or dropped.
        ``playback`` (if given) follows the words heard."""
        if self._held:
            self.dropped.append(text)
            return False
        generation = self._generation
        previous, done = self._last, asyncio.get_running_loop().create_future()
        self._last = done
        try:
            if previous is not None and not previous.done():
                await asyncio.shield(previous)
            if generation != self._generation or self._held:
                self.dropped.append(text)
                return False
            return await self._play_now(text, playback or Playback(text))
        finally:
            _done_after(done, previous)

    async def _play_now(self, text: str, playback: Playback) -> bool:
        play = asyncio.create_task(self._play(text))
        self._playing.add(play)
        self._current = playback
        try:
            await play
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if current is not None and current.cancelling():
                raise  # the caller itself is being cancelled, not a barge-in
            self.interrupted.append(text)
            return False
        finally:
            self._playing.discard(play)
            self._current = None
        playback.finished = True
        playback.words = playback.total_words
        self.spoken.append(text)
        return True

    def _heard_words(self, count: int) -> None:
        """For subclasses, while a text plays: its first ``count`` words have been heard."""
        if self._current is not None:
            self._current.words = max(self._current.words, min(count, self._current.total_words))

    def stop(self) -> None:
        """Cut the playback in progress short and drop the texts waiting for their turn."""
        self._generation += 1
        for play in list(self._playing):
            play.cancel()

    def hold(self) -> None:
        """Drop every text asked for from now on until ``resume()``."""
        self._held = True

    def resume(self) -> None:
        self._held = False

    @abstractmethod
    async def _play(self, text: str) -> None:
        """Play ``text`` to the end; cancellation means the user barged in."""


def _done_after(done: asyncio.Future[None], previous: asyncio.Future[None] | None) -> None:
    """Let the next text play once this one is over and, if this call was cancelled while it
    waited, once the one before it is over too (the order holds either way)."""
    if previous is None or previous.done():
        done.set_result(None)
        return

    def release(_: asyncio.Future[None]) -> None:
        if not done.done():
            done.set_result(None)

    previous.add_done_callback(release)


class SilentSpeaker(Speaker):
    """Plays nothing and finishes at once; the library's default."""

    async def _play(self, text: str) -> None:
        await asyncio.sleep(0)


class PrintSpeaker(Speaker):
    """Prints ``🔊 <text>`` where no speech engine is installed. With ``words_per_minute`` the
    text then takes as long as saying it would, one word after another (what a barge-in cuts
    short); without, it is over at once."""

    def __init__(self, out: TextIO | None = None, *, words_per_minute: float | None = None) -> None:
        super().__init__()
        self._out = out
        self.words_per_minute = words_per_minute

    async def _play(self, text: str) -> None:
        out = self._out or sys.stdout
        out.write(f"🔊 {text}\n")
        out.flush()
        if not self.words_per_minute:
            await asyncio.sleep(0)
            return
        for count in range(1, len(_WORD.findall(text)) + 1):
            await asyncio.sleep(60.0 / self.words_per_minute)
            self._heard_words(count)


class HeldSpeaker(Speaker):
    """Playback lasts until ``release()`` or ``stop()``: lets tests and demos barge in mid-speech.
    ``say_words(n)`` marks the first ``n`` words of the text playing as heard."""

    def __init__(self) -> None:
        super().__init__()
        self.started = asyncio.Event()
        self._release = asyncio.Event()

    def release(self) -> None:
        self._release.set()

    def say_words(self, count: int) -> None:
        self._heard_words(count)

    async def _play(self, text: str) -> None:
        self.started.set()
        await self._release.wait()


class EspeakSpeaker(Speaker):
    """``espeak-ng`` to the audio device, or to numbered WAV files in ``out_dir`` (``-w``)."""

    def __init__(self, executable: str = ESPEAK, out_dir: Path | None = None) -> None:
        super().__init__()
        self.executable = executable
        self.out_dir = out_dir
        self.files: list[Path] = []
        self._numbers = itertools.count(1)

    def _command(self, text: str) -> list[str]:
        if self.out_dir is None:
            return [self.executable, "--", text]
        self.out_dir.mkdir(parents=True, exist_ok=True)
        target = self.out_dir / f"utterance-{next(self._numbers):04d}.wav"
        self.files.append(target)
        return [self.executable, "-w", str(target), "--", text]

    async def _play(self, text: str) -> None:
        try:
            proc = await asyncio.create_subprocess_exec(
                *self._command(text),
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.DEVNULL,
                stderr=asyncio.subprocess.PIPE,
            )
        except OSError as exc:
            raise SpeakerError(f"{self.executable} could not start: {exc}") from exc
        started = time.monotonic()
        try:
            _, stderr = await proc.communicate()
        except asyncio.CancelledError:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
            # espeak-ng does not say how far it got: the words its speed allows in the time it played
            self._heard_words(int((time.monotonic() - started) * ESPEAK_WORDS_PER_MINUTE / 60))
            raise
        if proc.returncode != 0:
            detail = stderr.decode(errors="replace").strip()[:200]
            raise SpeakerError(f"{self.executable} exited with {proc.returncode}: {detail}")


def make_speaker(
    *,
    speak_to: Path | None = None,
    quiet: bool = False,
    out: TextIO | None = None,
    words_per_minute: float | None = None,
) -> Speaker:
    """The CLI's speaker: espeak-ng when on PATH, else a printed line played at
    ``words_per_minute`` (nothing when quiet)."""
    executable = shutil.which(ESPEAK)
    if executable is not None:
        return EspeakSpeaker(executable, out_dir=speak_to)
    if speak_to is not None:
        print(f"{ESPEAK} is not installed: printing speech instead of writing WAV files", file=sys.stderr)
    return SilentSpeaker() if quiet else PrintSpeaker(out, words_per_minute=words_per_minute)
