"""What the user heard of the answer being spoken, for ``heardText``.

The conductor keeps, for an interrupted answer, exactly what the app says was heard: the
barge-in's ``heardText``, or that of the result of the turn's last ``tts.speak``. Both are the
heard part of the answer the conductor is speaking now: the ``tts.speak`` texts of the current
speech segment (sentence by sentence, several calls make one segment), each as far as it was
played. A segment starts with the user's request and again after each of the model's tool calls
(the text said before them is kept with them, apart from the answer that follows).
"""

from __future__ import annotations

from .speaker import Playback


class HeardSpeech:
    """The playbacks of the current segment, in the order their calls arrived (the order played)."""

    def __init__(self) -> None:
        self._segment: list[Playback] = []

    def new_segment(self) -> None:
        self._segment = []

    def playback(self, text: str) -> Playback:
        """A ``tts.speak`` of the current segment, to follow as it plays."""
        playback = Playback(text)
        self._segment.append(playback)
        return playback

    @property
    def text(self) -> str:
        """The heard words of the segment so far ("" when nothing was heard)."""
        return " ".join(heard for heard in (playback.heard for playback in self._segment) if heard)
