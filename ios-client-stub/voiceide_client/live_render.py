"""The transcript on a terminal: the growing answer is redrawn in place with rich's ``Live``.

A partial answer can wrap over several rows (or more than the screen holds); ``Live`` knows how
many rows it drew and clears them all before drawing the next partial, so nothing is left
behind. The live region is transient: when the final arrives it is erased and the final is
printed once, as an ordinary line. Every other line is printed above the live region.
"""

from __future__ import annotations

from typing import TextIO

from rich.console import Console
from rich.live import Live
from rich.text import Text

from .render import TranscriptRenderer

STYLES = {
    "you": "bold cyan",
    "assistant": "bold",
    "partial": "dim",
    "state": "dim",
    "tool": "magenta",
    "ui": "cyan",
    "tool-error": "red",
    "error": "bold red",
    "notice": "yellow",
    "barge-in": "yellow",
}


class LiveTranscriptRenderer(TranscriptRenderer):
    """Styled lines on a rich ``Console``, with the partial answer in a ``Live`` region."""

    live = True

    def __init__(self, console: Console) -> None:
        super().__init__(console.file, err=console.file)
        self.console = console
        self._live: Live | None = None

    @classmethod
    def for_terminal(cls, out: TextIO) -> LiveTranscriptRenderer:
        # markup/emoji/highlight off: transcripts contain "[state]" and JSON, printed as they are
        return cls(Console(file=out, markup=False, emoji=False, highlight=False))

    def notice(self, text: str) -> None:
        self._emit(text, "notice")

    def close(self) -> None:
        self._end_live()

    def _partial(self, text: str) -> None:
        renderable = Text(text, style=STYLES["partial"])
        if self._live is None:
            self._live = Live(
                renderable,
                console=self.console,
                auto_refresh=False,
                transient=True,
                redirect_stdout=False,
                redirect_stderr=False,
            )
            self._live.start(refresh=True)
        else:
            self._live.update(renderable, refresh=True)

    def _final(self, text: str) -> None:
        self._end_live()
        self._emit(text, "assistant")

    def _emit(self, text: str, kind: str) -> None:
        self.console.print(Text(text, style=STYLES.get(kind, "")))

    def _end_live(self) -> None:
        live, self._live = self._live, None
        if live is not None:
            live.stop()  # transient: the partial's rows are cleared
