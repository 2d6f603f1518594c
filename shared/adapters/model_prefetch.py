"""A model stream read ahead, in a thread of its own, while nobody may hear it yet.

A speculative turn's model answer is read as it streams and kept here; if the final transcript
confirms the speculation, the turn runner goes on from it (``items``): what was already written
comes out at once, the rest as the model writes it. If not, ``stop`` ends it at the model's next
delta and the figures say what was spent for nothing.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Iterator

from shared.core.model_output import MessageEnd, StreamItem, TextDelta, ToolUseRequest

CHARS_PER_TOKEN = 4.0  # a message cut short has no usage figures: its output is estimated from its text


class Prefetch:
    """Reads the stream ``open_stream`` returns, from the moment it is made."""

    def __init__(self, open_stream: Callable[[], Iterator[StreamItem]], clock: Callable[[], float] = time.monotonic):
        self._open = open_stream
        self._clock = clock
        self._items: list[StreamItem] = []
        self._changed = threading.Condition()
        self._stopped = False
        self._done = False
        self._error: BaseException | None = None
        self.requested_at = clock()
        self.first_text_at: float | None = None
        self.output_chars = 0
        self.usage: dict[str, int] = {}
        self.reservation: object = None  # what the request holds of the person's ceiling, to settle
        self._thread = threading.Thread(target=self._pump, name="prefetch", daemon=True)
        self._thread.start()

    def _pump(self) -> None:
        try:
            stream = self._open()
            try:
                for item in stream:
                    with self._changed:
                        self._keep(item)
                        self._changed.notify_all()
                        if self._stopped:
                            break
            finally:
                close = getattr(stream, "close", None)
                if close is not None:
                    close()
        except BaseException as error:  # handed to whoever reads the items
            self._error = error
        finally:
            with self._changed:
                self._done = True
                self._changed.notify_all()

    def _keep(self, item: StreamItem) -> None:
        self._items.append(item)
        if isinstance(item, TextDelta):
            self.output_chars += len(item.text)
            if self.first_text_at is None:
                self.first_text_at = self._clock()
        elif isinstance(item, ToolUseRequest):
            self.output_chars += len(str(item.input))
        elif isinstance(item, MessageEnd):
            self.usage = dict(item.usage)

    @property
    def failed_early(self) -> bool:
        """The request failed before the model wrote anything: a new request is the better start."""
        with self._changed:
            return self._done and self._error is not None and not self._items

    def stop(self) -> None:
        """Stop reading (at the model's next delta: a read in progress is not cut)."""
        with self._changed:
            self._stopped = True

    def join(self, timeout: float) -> None:
        self._thread.join(timeout)

    def output_tokens(self) -> int:
        """What the model wrote: its own count when the message ended, else estimated."""
        reported = self.usage.get("outputTokens")
        return reported if reported is not None else math.ceil(self.output_chars / CHARS_PER_TOKEN)

    def items(self) -> Iterator[StreamItem]:
        """Everything read so far, then the rest as it comes; raises what the stream raised."""
        index = 0
        try:
            while True:
                with self._changed:
                    while index >= len(self._items) and not self._done:
                        self._changed.wait()
                    pending = self._items[index:]
                    done, error = self._done, self._error
                index += len(pending)
                yield from pending
                if done:  # nothing is added once done: ``pending`` held the rest
                    if error is not None:
                        raise error
                    return
        finally:
            self.stop()
