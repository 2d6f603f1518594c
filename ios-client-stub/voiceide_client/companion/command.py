"""One command of ``.voiceide.toml`` run for real: its own process group, a time limit, progress
while it runs, and what a person needs of its output when it is done.

The command is started without a shell (``argv`` as the project file split it), in the workspace,
with stdin closed and stderr joined to stdout. It runs in a new session (its own process group),
so a time limit that passes or a cancellation (``toolCancel``, the companion closing) stops the
command and everything it started: SIGTERM to the group, then SIGKILL after a short grace.

While it runs, ``progress`` is told every ``progress_every`` seconds how it is going: the fraction
when the output shows one (``[72/120] Compiling …``, ``[ 45%]``) and its latest line. When it is
over, the outcome keeps the last ``MAX_TAIL_CHARS`` characters of output and the first lines that
look like problems (``error``, ``fatal``, ``FAIL``), terminal escape sequences and control
characters removed (``rendering.terminal_text``).
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import os
import re
import shlex
import signal
import time
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from shared.wire.protocol import MAX_PROGRESS_MESSAGE
from voiceide_client.rendering.terminal_text import printable

MAX_TAIL_CHARS = 16_000
"""Output kept for the result: the model is shown the first 16,000 characters of a result."""
MAX_TAIL_LINES = 400
MAX_PROBLEMS = 20
MAX_PROBLEM_CHARS = 300
DEFAULT_PROGRESS_EVERY_S = 5.0
KILL_GRACE_S = 2.0
READ_CHUNK = 64 * 1024

ProgressReport = Callable[[float | None, str], Awaitable[None]]
"""Told (fraction or None, message) while a command runs."""

_PROBLEM = re.compile(r"\b(?:error|fatal)\b|\bFAIL(?:ED|URE)?\b", re.IGNORECASE)
_STEPS = re.compile(r"^\s*\[(\d+)/(\d+)\]")
_PERCENT = re.compile(r"\[\s*(\d{1,3})%\]")


class CommandNotFound(OSError):
    """The command's program could not be started (not installed, not executable)."""


@dataclass
class CommandOutcome:
    argv: tuple[str, ...]
    exit_code: int | None
    timed_out: bool
    seconds: float
    timeout_seconds: float
    tail: str
    lines: int
    problems: list[str] = field(default_factory=list)

    @property
    def command(self) -> str:
        return shlex.join(self.argv)

    @property
    def succeeded(self) -> bool:
        return not self.timed_out and self.exit_code == 0

    def result(self) -> dict[str, Any]:
        """The result as the tool returns it: the summary first, the output's tail last."""
        return {
            "status": "succeeded" if self.succeeded else ("timedOut" if self.timed_out else "failed"),
            "command": self.command,
            "exitCode": self.exit_code,
            "seconds": round(self.seconds, 1),
            "problems": self.problems,
            "outputLines": self.lines,
            "output": self.tail,
        }

    def failure(self) -> str:
        """The error a failed or timed-out run answers with: what happened, the problems, the tail."""
        if self.timed_out:
            head = f"`{self.command}` was stopped after its time limit of {self.timeout_seconds:g} s"
        else:
            head = f"`{self.command}` failed with exit code {self.exit_code} after {self.seconds:.1f} s"
        parts = [head]
        if self.problems:
            parts.append("problems:\n" + "\n".join(self.problems))
        if self.tail:
            parts.append("last output:\n" + self.tail)
        return "\n".join(parts)


class _Output:
    """The output as it arrives: decoded, split into lines, its tail and its problem lines kept."""

    def __init__(self) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._pending = ""
        self.tail: deque[str] = deque(maxlen=MAX_TAIL_LINES)
        self.lines = 0
        self.problems: list[str] = []
        self.last_line = ""
        self.fraction: float | None = None

    def feed(self, data: bytes, *, final: bool = False) -> None:
        text = self._pending + self._decoder.decode(data, final=final)
        *lines, self._pending = re.split(r"\r\n|\n|\r", text)
        if final and self._pending:
            lines.append(self._pending)
            self._pending = ""
        for line in lines:
            self._line(printable(line))  # colours, cursor moves, titles and control characters removed

    def _line(self, line: str) -> None:
        self.lines += 1
        self.tail.append(line)
        if line.strip():
            self.last_line = line.strip()
            self.fraction = _fraction(line) or self.fraction
        if len(self.problems) < MAX_PROBLEMS and _PROBLEM.search(line):
            self.problems.append(line.strip()[:MAX_PROBLEM_CHARS])

    def tail_text(self) -> str:
        kept: list[str] = []
        size = 0
        for line in reversed(self.tail):
            size += len(line) + 1
            if size > MAX_TAIL_CHARS:
                break
            kept.append(line)
        return "\n".join(reversed(kept))


def _fraction(line: str) -> float | None:
    steps = _STEPS.match(line)
    if steps is not None and int(steps.group(2)) > 0 and int(steps.group(1)) <= int(steps.group(2)):
        return int(steps.group(1)) / int(steps.group(2))
    percent = _PERCENT.search(line)
    if percent is not None and int(percent.group(1)) <= 100:
        return int(percent.group(1)) / 100
    return None


async def run_command(
    argv: Sequence[str],
    cwd: Path,
    *,
    timeout: float,
    progress: ProgressReport | None = None,
    progress_every: float = DEFAULT_PROGRESS_EVERY_S,
    kill_grace: float = KILL_GRACE_S,
) -> CommandOutcome:
    """Run ``argv`` in ``cwd`` within ``timeout`` seconds; CommandNotFound when it cannot start.

    Cancelling the caller stops the command's process group before the cancellation goes on."""
    started = time.monotonic()
    try:
        process = await asyncio.create_subprocess_exec(
            *argv,
            cwd=cwd,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            start_new_session=True,
        )
    except OSError as exc:
        raise CommandNotFound(f"`{shlex.join(argv)}` could not be started: {exc.strerror or exc}") from None
    output = _Output()
    reader = asyncio.create_task(_read(process, output), name=f"output of {argv[0]}")
    ticker = (
        asyncio.create_task(_tick(output, started, progress, progress_every), name=f"progress of {argv[0]}")
        if progress is not None
        else None
    )
    timed_out = False
    try:
        async with asyncio.timeout(timeout):
            await process.wait()
    except TimeoutError:
        timed_out = True
        await stop_group(process, kill_grace)
    except BaseException:
        await stop_group(process, kill_grace)
        raise
    finally:
        if ticker is not None:
            ticker.cancel()
            await asyncio.gather(ticker, return_exceptions=True)
        await _finish_reading(reader)
    return CommandOutcome(
        argv=tuple(argv),
        exit_code=None if timed_out else process.returncode,
        timed_out=timed_out,
        seconds=time.monotonic() - started,
        timeout_seconds=timeout,
        tail=output.tail_text(),
        lines=output.lines,
        problems=output.problems,
    )


async def _read(process: asyncio.subprocess.Process, output: _Output) -> None:
    assert process.stdout is not None
    while data := await process.stdout.read(READ_CHUNK):
        output.feed(data)
    output.feed(b"", final=True)


async def _finish_reading(reader: asyncio.Task[None]) -> None:
    """The pipe closes when the group is gone; a grandchild that escaped the group and holds it
    open must not hold the result."""
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(1.0):
            await asyncio.shield(reader)
    if not reader.done():
        reader.cancel()
    await asyncio.gather(reader, return_exceptions=True)


async def _tick(output: _Output, started: float, progress: ProgressReport, every: float) -> None:
    while True:
        await asyncio.sleep(every)
        elapsed = time.monotonic() - started
        message = f"{elapsed:.0f} s" + (f": {output.last_line}" if output.last_line else "")
        try:
            await progress(output.fraction, message[:MAX_PROGRESS_MESSAGE])
        except asyncio.CancelledError:
            raise
        except Exception:  # progress is a courtesy: a closed connection must not stop the run
            continue


async def stop_group(process: asyncio.subprocess.Process, grace: float) -> None:
    """SIGTERM to the process's group, SIGKILL if it is still there after ``grace`` seconds."""
    if process.returncode is not None:
        _signal_group(process.pid, signal.SIGKILL)  # the leader is gone; its group may not be
        return
    _signal_group(process.pid, signal.SIGTERM)
    try:
        async with asyncio.timeout(grace):
            await asyncio.shield(process.wait())
    except TimeoutError:
        _signal_group(process.pid, signal.SIGKILL)
        await process.wait()
    _signal_group(process.pid, signal.SIGKILL)


def _signal_group(pid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)
