"""The companion's record of the calls that change something or run long, kept on disk, so that a
call is never run twice, even by a companion started again.

Within one run, the client answers a call sent again (same ``callId``) from the run it already has
(``conversation.tool_runs``). The conductor also sends a device's unanswered calls to the device when it comes
back, which may be a new companion process after a crash or a restart: an edit applied twice would
replace the wrong lines, a build started twice would run twice. So before such a call runs, the
journal records that it started, and when it is done, its result:

* a call found finished is answered with the recorded result, not run again;
* a call found started but never finished (the companion stopped while it ran) is answered with an
  error saying so, and not run again: whether an edit was applied is for the person to look at.

A record is the call's: its session, its ``callId``, its tool and its arguments (a digest of their
canonical JSON) name it, and all four must match for it to answer a call. A call of another session,
or an id used again for another tool or other arguments, is a new call.

The conductor does not send a background call (a build, a test run) again: it waits for its result
until its deadline. ``unfinished`` lists them, for the companion started again to answer them at
once (``Companion``).

One small JSON file a call, in the companion's state folder (never in the workspace), named by a
hash of what names the call; files older than ``KEEP_S`` are removed when the journal opens.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from shared.wire.protocol import ToolCall, ToolResult

KEEP_S = 2 * 24 * 3600.0
"""Longer than any call may wait (a kept event lives a day; a deadline at most an hour)."""
MAX_WAIT_S = 3600.0
"""The longest a conductor waits for a call's result (a declared deadline is at most an hour)."""


@dataclass(frozen=True)
class Interrupted:
    """The call started in an earlier run of the companion and never finished."""

    name: str
    started_at: float


@dataclass(frozen=True)
class Unfinished:
    """A call of this session that an earlier run started and never answered, still awaited."""

    call: ToolCall
    started_at: float
    file: Path


def arguments_digest(arguments: str) -> str:
    """A digest of the arguments' canonical JSON (keys sorted, no spaces); of the text as it is when
    it is not JSON."""
    try:
        canonical = json.dumps(json.loads(arguments), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    except ValueError:
        canonical = arguments
    return hashlib.sha256(canonical.encode("utf-8", errors="surrogatepass")).hexdigest()


class CallJournal:
    """The journal of one device's calls on ``session_id``."""

    def __init__(self, folder: Path, session_id: str) -> None:
        self.folder = folder
        self.session_id = session_id.lower()
        self.folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        self._prune()

    def _identity(self, call: ToolCall) -> dict[str, str]:
        return {
            "sessionId": self.session_id,
            "callId": call.call_id,
            "name": call.name,
            "argumentsDigest": arguments_digest(call.arguments),
        }

    def _file(self, identity: dict[str, str]) -> Path:
        key = "\0".join((identity["sessionId"], identity["callId"], identity["name"], identity["argumentsDigest"]))
        return self.folder / (hashlib.sha256(key.encode("utf-8", errors="surrogatepass")).hexdigest()[:40] + ".json")

    def lookup(self, call: ToolCall) -> ToolResult | Interrupted | None:
        """The recorded result, ``Interrupted`` for a call that never finished, or None: a new call."""
        identity = self._identity(call)
        record = _read(self._file(identity))
        if record is None or any(record.get(key) != value for key, value in identity.items()):
            return None
        if not record.get("finished"):
            return Interrupted(call.name, float(record.get("startedAt", 0.0)))
        return ToolResult(call_id=call.call_id, result=record.get("result"), error=record.get("error"))

    def started(self, call: ToolCall, *, wait_s: float | None = None) -> None:
        """The call starts; ``wait_s``: how long the conductor waits for its result (its deadline)."""
        now = time.time()
        identity = self._identity(call)
        record: dict[str, Any] = {**identity, "startedAt": now, "awaitedUntil": now + (wait_s or MAX_WAIT_S)}
        self._write(self._file(identity), record)

    def finished(self, call: ToolCall, result: ToolResult) -> None:
        identity = self._identity(call)
        record = {**identity, "finished": True, "finishedAt": time.time(), "result": result.result}
        self._write(self._file(identity), {**record, "error": result.error})

    def unfinished(self, names: frozenset[str] | set[str], *, now: float | None = None) -> list[Unfinished]:
        """This session's calls of ``names`` that an earlier run started and never finished and that
        the conductor still waits for (their deadline has not passed), oldest first. The tool's
        arguments are not kept: the call comes back with its name and an empty ``arguments``."""
        now = time.time() if now is None else now
        found: list[Unfinished] = []
        for path in self.folder.glob("*.json"):
            record = _read(path)
            if record is None or record.get("finished") or record.get("sessionId") != self.session_id:
                continue
            name, call_id = record.get("name"), record.get("callId")
            if name not in names or not isinstance(call_id, str) or not call_id:
                continue
            if float(record.get("awaitedUntil", 0.0)) <= now:
                continue
            call = ToolCall(call_id=call_id, name=str(name), arguments="")
            found.append(Unfinished(call, float(record.get("startedAt", 0.0)), path))
        return sorted(found, key=lambda entry: entry.started_at)

    def answered(self, entry: Unfinished, result: ToolResult) -> None:
        """An unfinished call was answered (``result``) by this run: recorded as finished."""
        record = _read(entry.file)
        if record is not None and not record.get("finished"):
            done = {**record, "finished": True, "finishedAt": time.time(), "result": result.result}
            self._write(entry.file, {**done, "error": result.error})

    def _write(self, target: Path, record: dict[str, object]) -> None:
        handle, temporary = tempfile.mkstemp(dir=self.folder, suffix=".tmp")
        try:
            with os.fdopen(handle, "w", encoding="utf-8") as out:
                json.dump(record, out, ensure_ascii=False)
            os.replace(temporary, target)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise

    def _prune(self) -> None:
        old = time.time() - KEEP_S
        for path in self.folder.glob("*.json"):
            with contextlib.suppress(OSError):
                if path.stat().st_mtime < old:
                    path.unlink()


def _read(path: Path) -> dict[str, Any] | None:
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) else None
