"""Which transcript display a stream gets: the live one (rich) on a terminal, plain lines elsewhere.

A module of its own so that the plain renderer never imports the live one, and rich loads only
when a terminal asks for it.
"""

from __future__ import annotations

from typing import TextIO

from .transcript import TranscriptRenderer


def transcript_renderer(out: TextIO, err: TextIO, *, quiet: bool = False) -> TranscriptRenderer:
    """A live display when ``out`` is a terminal (and not quiet), else plain lines."""
    if not quiet and out.isatty():
        from .live import LiveTranscriptRenderer  # rich loads only for a terminal

        return LiveTranscriptRenderer.for_terminal(out)
    return TranscriptRenderer(out, err=err, quiet=quiet)
