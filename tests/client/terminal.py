"""A small VT100 screen: what a terminal shows after a stream of text and control sequences.

It implements what a transcript display relies on: printable characters with automatic (deferred)
wrapping at the right margin, CR, LF, cursor up/down/column, erase in line, and ignores SGR
styles and cursor visibility. Enough to see whether redrawing a partial answer leaves rows behind.
"""

from __future__ import annotations

import re

CSI = re.compile(r"\x1b\[(\??)([0-9;]*)([A-Za-z])")


class Screen:
    def __init__(self, width: int) -> None:
        self.width = width
        self.rows: list[list[str]] = [[]]
        self.row = 0
        self.col = 0
        self._pending_wrap = False

    def feed(self, data: str) -> None:
        position = 0
        while position < len(data):
            match = CSI.match(data, position)
            if match is not None:
                self._csi(match.group(1), match.group(2), match.group(3))
                position = match.end()
                continue
            self._char(data[position])
            position += 1

    @property
    def lines(self) -> list[str]:
        """The screen's rows as text, trailing blank rows left out."""
        lines = ["".join(row).rstrip() for row in self.rows]
        while lines and not lines[-1]:
            lines.pop()
        return lines

    def _char(self, char: str) -> None:
        if char == "\n":
            self._down()
            self.col = 0  # a terminal's output processing turns LF into CR LF
        elif char == "\r":
            self.col, self._pending_wrap = 0, False
        elif char == "\x1b":
            raise AssertionError("an escape sequence the screen does not know")
        elif char.isprintable():
            if self._pending_wrap:
                self._down()
                self.col = 0
            row = self.rows[self.row]
            row.extend(" " * (self.col + 1 - len(row)))
            row[self.col] = char
            if self.col == self.width - 1:
                self._pending_wrap = True
            else:
                self.col += 1

    def _down(self) -> None:
        self._pending_wrap = False
        self.row += 1
        while len(self.rows) <= self.row:
            self.rows.append([])

    def _csi(self, private: str, params: str, command: str) -> None:
        if private:  # e.g. ?25l / ?25h: cursor visibility
            return
        number = int(params) if params.isdigit() else None
        self._pending_wrap = False
        if command == "A":
            self.row = max(0, self.row - (number or 1))
        elif command == "B":
            self._down()
        elif command == "G":
            self.col = (number or 1) - 1
        elif command == "K":
            row = self.rows[self.row]
            if number == 2:
                row.clear()
            elif not number:
                del row[self.col :]
        elif command == "m":
            return
        else:
            raise AssertionError(f"the screen does not know CSI {params}{command}")
