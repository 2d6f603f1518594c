"""History writes as the core decides them; the store applies them atomically with the state."""

from __future__ import annotations

from dataclasses import dataclass

from shared.core.messages import Block, Message, Role


@dataclass(frozen=True)
class AppendMessage:
    seq: int
    role: Role
    content: list[Block]


@dataclass(frozen=True)
class ExtendMessage:
    """Adds blocks to an already stored message (two user utterances with no reply between)."""

    seq: int
    content: list[Block]


@dataclass(frozen=True)
class ReplaceMessage:
    """Rewrites an already stored message (the answer the user cut off while it was spoken)."""

    seq: int
    content: list[Block]


HistoryOp = AppendMessage | ExtendMessage | ReplaceMessage


class HistoryWriter:
    """Adds messages so that roles always alternate: a same-role message merges into the last."""

    def __init__(self, history_len: int, last_role: Role | None) -> None:
        self.history_len = history_len
        self.last_role: Role | None = last_role
        self._appended: list[AppendMessage] = []
        self._extension: list[Block] = []
        self._replacement: list[Block] | None = None

    def add(self, role: Role, content: list[Block]) -> None:
        if not content:
            return
        if role == self.last_role and self._appended:
            last = self._appended[-1]
            self._appended[-1] = AppendMessage(last.seq, last.role, [*last.content, *content])
        elif role == self.last_role and self.history_len:
            self._extension.extend(content)
        else:
            self._appended.append(AppendMessage(self.history_len, role, list(content)))
            self.history_len += 1
            self.last_role = role

    def replace_last(self, content: list[Block]) -> None:
        """Rewrite the last stored message (before anything is added in this decision)."""
        assert not self._appended and not self._extension and self.history_len and content
        self._replacement = list(content)

    def ops(self) -> list[HistoryOp]:
        ops: list[HistoryOp] = []
        if self._replacement is not None:
            ops.append(ReplaceMessage(self.history_len - 1, self._replacement))
        if self._extension:
            ops.append(ExtendMessage(self.history_len - len(self._appended) - 1, list(self._extension)))
        ops.extend(self._appended)
        return ops


def history_after(messages: list[Message], first_seq: int, ops: list[HistoryOp]) -> list[Message] | None:
    """The stored messages from ``first_seq`` on as they are once ``ops`` are applied (the window
    ``$default`` read beside the state, brought up to its own commit); None if the ops do not
    continue exactly these messages."""
    after: list[Message] = [{"role": message["role"], "content": list(message["content"])} for message in messages]
    for op in ops:
        index = op.seq - first_seq
        if isinstance(op, AppendMessage):
            if index != len(after):
                return None
            after.append({"role": op.role, "content": list(op.content)})
        elif isinstance(op, ReplaceMessage) and 0 <= index < len(after):
            after[index]["content"] = list(op.content)
        elif 0 <= index < len(after):
            after[index]["content"].extend(op.content)
        else:
            return None
    return after
