"""The transcript on a terminal: the growing answer is redrawn in place with rich's ``Live``.

A partial answer can wrap over several rows (or more than the screen holds); ``Live`` knows how
many rows it drew and clears them all before drawing the next partial, so nothing is left
behind. The live region is transient: when the final arrives it is erased and the final is
printed once, as an ordinary line. Every other line is printed above the live region.
Cards the conductor puts on screen are drawn as panels, code and diffs highlighted.
"""

from __future__ import annotations

from typing import TextIO

from rich.console import Console, RenderableType
from rich.live import Live
from rich.panel import Panel
from rich.syntax import Syntax
from rich.text import Text

from .terminal_text import printable
from .transcript import Card, TranscriptRenderer

STYLES = {
    "you": "bold cyan",
    "assistant": "bold",
    "partial": "dim",
    "state": "dim",
    "state-speaking": "green",
    "state-executing": "magenta",
    "tool": "magenta",
    "ui": "cyan",
    "tool-error": "red",
    "error": "bold red",
    "notice": "yellow",
    "barge-in": "yellow",
    "progress": "magenta",
    "device": "cyan",
    "names": "dim cyan",
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

    def cards(self, cards: list[Card]) -> None:
        for card in cards:
            self.console.print(card_panel(card))

    def close(self) -> None:
        self._end_live()

    def _partial(self, text: str) -> None:
        renderable = Text(printable(text), style=STYLES["partial"])
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
        style = STYLES.get(kind, STYLES["state"] if kind.startswith("state") else "")
        self.console.print(Text(printable(text), style=style))

    def _end_live(self) -> None:
        live, self._live = self._live, None
        if live is not None:
            live.stop()  # transient: the partial's rows are cleared


def card_panel(card: Card) -> Panel:
    """A card as a rich panel: code and diffs highlighted (by their language, else as text), lists as
    written; the title (and the file, when the card names one) on the border."""
    body = printable(str(card.get("body", "")))
    kind = card.get("type")
    language = card.get("language") if isinstance(card.get("language"), str) else None
    content: RenderableType
    if kind == "diff":
        content = Syntax(body, "diff", theme="ansi_dark", word_wrap=True)
    elif kind == "code":
        content = Syntax(body, language or "text", theme="ansi_dark", word_wrap=True)
    else:
        content = Text(body)
    title = printable(str(card.get("title") or kind or "card"))
    file = card.get("file")
    subtitle = printable(file) if isinstance(file, str) and file and file not in title else None
    return Panel(content, title=Text(title, style="bold cyan"), subtitle=subtitle, title_align="left", expand=False)
