"""The local Bedrock endpoint's prompt cache: what a request with ``cachePoint`` blocks reads from
the cache and writes to it, reported in the metadata event as Bedrock reports it.

Bedrock reads a prompt in the order tools, system, messages. Each ``cachePoint`` marks a prefix
to cache; the cache is keyed by that prefix (here: a hash of every block up to it, with its role
and where each message starts). A request reads the longest cached prefix it starts with, looking
back up to 20 blocks before each of its checkpoints (so a prefix cached at last turn's checkpoint
is found from this turn's later one), and writes the prefixes of its checkpoints after that. An
entry lives 5 minutes (``ttl`` ``1h``: an hour) after it was written or last read. A checkpoint
whose prefix adds fewer than ``min_tokens`` since the previous cached one caches nothing, silently,
as on Bedrock: by default the requested model's minimum (``shared.wire.model_rules``: e.g. 4,096 tokens
for Claude Haiku 5.5, 1,024 for Sonnet 5); an int sets one for every model (0: every checkpoint
caches, so a short prompt shows the cache at work).

Tokens are estimated as the endpoint's context-window estimate does: characters / 4 of the compact
JSON. The usage then says ``cacheReadInputTokens`` (read), ``cacheWriteInputTokens`` (written),
``inputTokens`` (the rest of the request) and ``totalTokens`` (all of them plus the output).
"""

from __future__ import annotations

import hashlib
import json
import math
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from conductor_local.bedrock.script import Script, Step
from shared.wire.model_rules import rules_for

DEFAULT_TTL_SECONDS = 300.0
TTL_SECONDS = {"5m": 300.0, "1h": 3600.0}
LOOKBACK_BLOCKS = 20


@dataclass(frozen=True)
class CacheUsage:
    """What one request read from and wrote to the cache, in estimated tokens."""

    input_tokens: int  # the whole request's estimate
    read: int = 0
    written: dict[str, int] = field(default_factory=dict)  # by ttl ("5m", "1h")

    @property
    def write(self) -> int:
        return sum(self.written.values())

    @property
    def uncached(self) -> int:
        return max(0, self.input_tokens - self.read - self.write)

    def usage(self, output_tokens: int) -> dict[str, Any]:
        """The metadata event's ``usage`` for this request."""
        reported: dict[str, Any] = {
            "inputTokens": self.uncached,
            "outputTokens": output_tokens,
            "totalTokens": self.uncached + output_tokens + self.read + self.write,
            "cacheReadInputTokens": self.read,
            "cacheWriteInputTokens": self.write,
        }
        details = [{"ttl": ttl, "inputTokens": n} for ttl, n in sorted(self.written.items()) if n]
        if details:  # Bedrock sorts them 1h before 5m
            reported["cacheDetails"] = details
        return reported


@dataclass(frozen=True)
class _Checkpoint:
    blocks: int  # content blocks before it
    ttl: str


def has_cache_points(request: Mapping[str, Any]) -> bool:
    return any(True for _ in _cache_points(request))


def _cache_points(request: Mapping[str, Any]) -> Iterator[Mapping[str, Any]]:
    for _, _, block in _sequence(request):
        if isinstance(block, Mapping) and "cachePoint" in block:
            yield block


def _sequence(request: Mapping[str, Any]) -> Iterator[tuple[str, str, Any]]:
    """(section, role or marker, block) of every block in the order Bedrock reads them."""
    tool_config = request.get("toolConfig")
    tools = tool_config.get("tools") if isinstance(tool_config, Mapping) else None
    for tool in tools if isinstance(tools, list) else []:
        yield "tools", "", tool
    system = request.get("system")
    for block in system if isinstance(system, list) else []:
        yield "system", "", block
    messages = request.get("messages")
    for message in messages if isinstance(messages, list) else []:
        if not isinstance(message, Mapping):
            continue
        content = message.get("content")
        first = True
        for block in content if isinstance(content, list) else []:
            yield "messages", f"{message.get('role')}{'+' if first else ''}", block
            first = first and isinstance(block, Mapping) and "cachePoint" in block


def _compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, sort_keys=True)


class PromptCache:
    """Prefix hashes with their expiry; thread-safe (the server answers requests in threads)."""

    def __init__(self, *, min_tokens: int | None = None, clock: Callable[[], float] = time.monotonic) -> None:
        """``min_tokens`` None: each requested model's own minimum."""
        self.min_tokens = min_tokens
        self._clock = clock
        self._lock = threading.Lock()
        self._entries: dict[str, tuple[float, float]] = {}  # prefix hash -> (expiry, ttl seconds)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()

    def minimum(self, model_id: str | None) -> int:
        """The tokens a checkpoint must add for ``model_id`` to cache anything."""
        if self.min_tokens is not None:
            return self.min_tokens
        return rules_for(model_id or "").cache_min_tokens or 0

    def account(
        self, request: Mapping[str, Any], input_tokens: int, model_id: str | None = None, *, commit: bool = True
    ) -> CacheUsage:
        """Read and write the cache for ``request`` to ``model_id`` (whose estimated size is
        ``input_tokens``). ``commit=False``: what the request would read and write, the cache left
        as it is (for a caller that must know before the endpoint answers)."""
        hashes, chars, checkpoints = self._prefixes(request)
        min_tokens = self.minimum(model_id)
        if not checkpoints:
            return CacheUsage(input_tokens)

        def tokens(blocks: int) -> int:
            return math.ceil(chars[blocks] / 4)

        now = self._clock()
        with self._lock:
            entries = {key: entry for key, entry in self._entries.items() if entry[0] > now}
            if commit:
                self._entries = entries
            hit = 0
            for point in checkpoints:
                for blocks in range(point.blocks, max(0, point.blocks - LOOKBACK_BLOCKS) - 1, -1):
                    if blocks > hit and hashes[blocks] in entries:
                        hit = blocks
                        break
            if hit:
                _, ttl = entries[hashes[hit]]
                entries[hashes[hit]] = (now + ttl, ttl)
            written: dict[str, int] = {}
            cached = hit
            for point in checkpoints:
                if point.blocks <= cached or tokens(point.blocks) - tokens(cached) < max(1, min_tokens):
                    continue
                ttl = TTL_SECONDS.get(point.ttl, DEFAULT_TTL_SECONDS)
                entries[hashes[point.blocks]] = (now + ttl, ttl)
                written[point.ttl] = written.get(point.ttl, 0) + tokens(point.blocks) - tokens(cached)
                cached = point.blocks
        return CacheUsage(input_tokens, read=tokens(hit) if hit else 0, written=written)

    @staticmethod
    def _prefixes(request: Mapping[str, Any]) -> tuple[list[str], list[int], list[_Checkpoint]]:
        """The hash and size (characters) of every prefix, by its number of content blocks, and the
        checkpoints."""
        digest = hashlib.sha256()
        hashes, chars, checkpoints = [digest.hexdigest()], [0], []
        for section, role, block in _sequence(request):
            if isinstance(block, Mapping) and "cachePoint" in block:
                point = block["cachePoint"] if isinstance(block["cachePoint"], Mapping) else {}
                checkpoints.append(_Checkpoint(len(hashes) - 1, str(point.get("ttl") or "5m")))
                continue
            text = _compact(block)
            digest.update(_compact([section, role, text]).encode("utf-8"))
            hashes.append(digest.copy().hexdigest())
            chars.append(chars[-1] + len(text))
        return hashes, chars, checkpoints


def with_cache_usage(script: Script, usage: CacheUsage) -> Iterator[Step]:
    """``script`` with the usage of its metadata event reporting ``usage`` (its output kept)."""
    for step in script:
        if isinstance(step, Mapping) and isinstance(step.get("metadata"), Mapping):
            meta = dict(step["metadata"])
            reported = meta.get("usage") if isinstance(meta.get("usage"), Mapping) else {}
            output = reported.get("outputTokens", 0) if isinstance(reported, Mapping) else 0
            meta["usage"] = usage.usage(output if isinstance(output, int) else 0)
            yield {"metadata": meta}
        else:
            yield step
