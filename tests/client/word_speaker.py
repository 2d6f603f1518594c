"""A speaker for tests that plays word by word, each word when the test allows it."""

from __future__ import annotations

import asyncio

from voiceide_client.voice.speaker import Speaker


class WordSpeaker(Speaker):
    """Plays word by word; each word takes as long as the test wants (``allow(n)`` more words)."""

    def __init__(self) -> None:
        super().__init__()
        self.allowed = 0
        self.words = 0
        self._changed = asyncio.Condition()

    def allow(self, count: int) -> None:
        self.allowed += count
        asyncio.get_running_loop().create_task(self._notify())

    async def wait_words(self, count: int, timeout: float = 10.0) -> None:
        """Until ``count`` words have been played in all."""
        async with asyncio.timeout(timeout), self._changed:
            await self._changed.wait_for(lambda: self.words >= count)

    async def _notify(self) -> None:
        async with self._changed:
            self._changed.notify_all()

    async def _play(self, text: str) -> None:
        for count in range(1, len(text.split()) + 1):
            async with self._changed:  # a word plays only when allowed, however long that takes
                await self._changed.wait_for(lambda: self.words < self.allowed)
                self.words += 1
                self._heard_words(count)
                self._changed.notify_all()
