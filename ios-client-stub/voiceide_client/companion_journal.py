"""The companion's record of the calls that change something or run long, kept on disk, so that a
call is never run twice, even by a companion started again.

Within one run, the client answers a call sent again (same ``callId``) from the run it already has
(``tool_runs``). The conductor also sends a device's unanswered calls to the device when it comes
back, which may be a new companion process after a crash or a restart: an edit applied twice would
replace the wrong lines, a build started twice would run twice. So before such a call runs, the
journal records that it started, and when it is done, its result:

* a call found finished is answered with the recorded result, not run again;
* a call found started but never finished (the companion stopped while it ran) is answered with an
  error saying so, and not run again: whether an edit was applied is for the person to look at.

One small JSON file a call, in the companion's state folder (never in the workspace), named by a
hash of the ``callId``; files older than ``KEEP_S`` are removed when the journal opens.
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

from shared.wire.protocol import ToolCall, ToolResult

KEEP_S = 2 * 24 * 3600.0
"""Longer than any call may wait (a kept event lives a day; a deadline at most an hour)."""


@dataclass(frozen=True)
class Interrupted:
    """The call started in an earlier run of the companion and never finished."""

    name: str
    started_at: float


class CallJournal:
    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        self._prune()

    def _file(self, call_id: str) -> Path:
        return self.folder / (hashlib.sha256(call_id.encode("utf-8")).hexdigest()[:40] + ".json")

    def lookup(self, call_id: str) -> ToolResult | Interrupted | None:
        """The recorded result, ``Interrupted`` for a call that never finished, or None: a new call."""
        try:
            record = json.loads(self._file(call_id).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        if not isinstance(record, dict) or record.get("callId") != call_id:
            return None
        if not record.get("finished"):
            return Interrupted(str(record.get("name", "")), float(record.get("startedAt", 0.0)))
        return ToolResult(call_id=call_id, result=record.get("result"), error=record.get("error"))

    def started(self, call: ToolCall) -> None:
        self._write(call.call_id, {"callId": call.call_id, "name": call.name, "startedAt": time.time()})

    def finished(self, call: ToolCall, result: ToolResult) -> None:
        self._write(
            call.call_id,
            {
                "callId": call.call_id,
                "name": call.name,
                "finished": True,
                "finishedAt": time.time(),
                "result": result.result,
                "error": result.error,
            },
        )

    def _write(self, call_id: str, record: dict[str, object]) -> None:
        handle, temporary = tempfile.mkstemp(dir=self.folder, suffix=".tmp")
        try:
            with os.fdopen(handle, "w", encoding="utf-8") as out:
                json.dump(record, out, ensure_ascii=False)
            os.replace(temporary, self._file(call_id))
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise

    def _prune(self) -> None:
        old = time.time() - KEEP_S
        for path in self.folder.glob("*.json"):
            with contextlib.suppress(OSError):
                if path.stat().st_mtime < old:
                    path.unlink()
