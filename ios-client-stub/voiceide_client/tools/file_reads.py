"""Files read only as far as a tool's answer needs: a big file (a log of gigabytes) is never read
whole, by the terminal client's tools or the companion's."""

from __future__ import annotations

from pathlib import Path

READ_CHUNK = 64 * 1024


def count_lines(path: Path, limit_bytes: int) -> tuple[int, bool]:
    """The lines in the first ``limit_bytes`` of the file, and whether it goes on past them."""
    lines, read, last = 0, 0, b""
    with path.open("rb") as source:
        while read < limit_bytes and (chunk := source.read(min(READ_CHUNK, limit_bytes - read))):
            lines += chunk.count(b"\n")
            read += len(chunk)
            last = chunk[-1:]
        more = bool(source.read(1))
    if last not in (b"", b"\n"):
        lines += 1  # a last line without a line ending
    return lines, more


def read_head(path: Path, chars: int) -> tuple[bytes, bool]:
    """The first bytes of the file that can hold ``chars`` characters (at most 4 bytes each), and
    whether the file is longer."""
    with path.open("rb") as source:
        data = source.read(chars * 4)
        more = bool(source.read(1))
    return data, more
