"""What a background tool's report turn says: the user message that carries the waiting outcomes to
the model, and the card each failure shows. Pure; the turn itself is ``Decision.start_background_report``."""

from __future__ import annotations

from shared.core.speakable import Card
from shared.core.state import BackgroundReport

REPORT_MARKER = "[background report]"
"""Starts the user message that carries background outcomes to the model (never the person's words)."""
CARD_BODY_CHARS = 4000


def failure_cards(reports: list[BackgroundReport]) -> list[Card]:
    """A card for each outcome that failed, with the start of its output."""
    return [
        Card(type="list", title=f"{report.name} failed", language=None, file=None, body=report.text[:CARD_BODY_CHARS])
        for report in reports
        if report.failed
    ]


def report_text(reports: list[BackgroundReport], now: float) -> str:
    lines = [REPORT_MARKER]
    for report in reports:
        seconds = max(0.0, now - report.started_at) if now and report.started_at else 0.0
        when = f"started {seconds / 60:.0f} min ago" if seconds >= 90 else f"started {seconds:.0f} s ago"
        outcome = "did not succeed" if report.failed else "finished"
        lines.append(f"The {report.name} you started in the background ({when}) {outcome}: {report.text}")
    lines.append("Tell the user the outcome in a sentence or two, without reading the output aloud.")
    return "\n".join(lines)
