"""The companion's display: the conversation as the client's transcript renderers print it, with
each tool result as one short line (a file read is not printed whole; a result sent in parts is
one line, not one per part), the cancelled calls, and the devices on the session.

Everything it prints that came from the network, a file or a command goes through
``rendering.terminal_text.printable`` first: no escape sequence reaches the terminal.

The conductor's reads of a file for a change card (a ``toolCall`` ``editor.readFile`` whose callId
starts with ``conductor-preview-``) are one dim line, ``preview of a.swift for the change card``;
the ``taken_over`` error is left to the companion, which says it in one line of its own."""

from __future__ import annotations

import json
from collections.abc import Sequence

from shared.wire.protocol import DeviceSeen, ErrorCode, ErrorPayload, Event, ToolCall, ToolResult, make_event
from voiceide_client.rendering.terminal_text import printable, printable_data
from voiceide_client.rendering.transcript import Card, TranscriptRenderer, excerpt

RESULT_EXCERPT = 160
KEPT_PREVIEWS = 64
"""Previews remembered, so that one sent again (a reconnect) is not shown again."""
PREVIEW_PREFIX = "conductor-preview-"
"""The callId prefix of the conductor's reads for a change card (``editor.readFile``)."""


def is_preview(call: ToolCall) -> bool:
    return call.call_id.startswith(PREVIEW_PREFIX) and call.name == "editor.readFile"


class CompanionDisplay:
    """A ``Renderer`` over a ``TranscriptRenderer`` (plain lines, or live on a terminal)."""

    def __init__(self, inner: TranscriptRenderer) -> None:
        self.inner = inner
        self._previews: dict[str, str] = {}  # callId -> the file a preview reads (the latest ones)
        self._failed: set[str] = set()  # previews whose failure was shown

    def received(self, event: Event) -> None:
        payload = event.payload
        if isinstance(payload, ErrorPayload) and payload.code == ErrorCode.TAKEN_OVER:
            return  # the companion says it, once, as it stops
        if isinstance(payload, ToolCall) and is_preview(payload):
            if payload.call_id not in self._previews:
                path = _path_of(payload.arguments)
                self._previews[payload.call_id] = path
                if len(self._previews) > KEPT_PREVIEWS:
                    self._failed.discard(oldest := next(iter(self._previews)))
                    del self._previews[oldest]
                self._dim(f"preview of {path} for the change card")
            return
        self.inner.received(event.model_copy(update={"payload": printable_data(payload)}))

    def sent(self, event: Event) -> None:
        payload = event.payload
        if not isinstance(payload, ToolResult):
            self.inner.sent(event.model_copy(update={"payload": printable_data(payload)}))
            return
        if payload.part not in (None, 0):
            return  # the call's line was printed with its first part
        if payload.call_id in self._previews:
            if payload.error is not None and payload.call_id not in self._failed:
                self._failed.add(payload.call_id)
                path, why = self._previews[payload.call_id], excerpt(printable(payload.error), RESULT_EXCERPT)
                self._dim(f"preview of {path} not read: {why}")
            return
        text = payload.result if payload.result is not None else payload.error
        short = excerpt(printable(text or ""), RESULT_EXCERPT)
        if payload.parts is not None:
            short += f" (sent in {payload.parts} parts)"
        field = "result" if payload.result is not None else "error"
        summary = ToolResult.model_validate({"callId": printable(payload.call_id), field: short})
        self.inner.sent(make_event(summary, event_id=event.id))

    def client_error(self, error: ErrorPayload) -> None:
        self.inner.client_error(printable_data(error))

    def state(self, state: str) -> None:
        self.inner.state(printable(state))

    def cards(self, cards: list[Card]) -> None:
        self.inner.cards(printable_data(cards))

    def warning(self, text: str) -> None:
        self.inner.warning(printable(text))

    # ---- what the companion adds ---------------------------------------------------------------

    def line(self, text: str) -> None:
        self.inner.line(printable(text))

    def notice(self, text: str) -> None:
        self.inner.notice(printable(text))

    def cancelled(self, name: str, reason: str) -> None:
        self.line(f"[cancelled] {name}" + (f": {reason}" if reason else ""))

    def devices(self, devices: Sequence[DeviceSeen], *, joined: str | None = None, left: str | None = None) -> None:
        """The devices on the session; who joined or left too, unless the transcript renderer says
        that itself (it follows the session's devices: ``command_line.session_devices``)."""
        if getattr(self.inner, "devices", None) is None:
            if joined is not None:
                self.line(f"[device] joined: {_named(devices, joined)}")
            if left is not None:
                self.line(f"[device] left: {left}")
        self.line("[devices] " + "; ".join(device_label(device) for device in devices))

    def _dim(self, text: str) -> None:
        """A line that matters little: dim on a live terminal, a plain line elsewhere."""
        text = printable(text)
        console = getattr(self.inner, "console", None)  # LiveTranscriptRenderer's rich console
        if console is None:
            self.inner.line(text)
            return
        from rich.text import Text  # loaded already: the live display is rich's

        console.print(Text(text, style="dim"))


def device_label(device: DeviceSeen) -> str:
    roles = ", ".join(device.roles)
    return f"{device.name or device.id} ({roles})" + (" — this one" if device.self_ else "")


def _named(devices: Sequence[DeviceSeen], device_id: str) -> str:
    return next((device.name for device in devices if device.id == device_id and device.name), device_id)


def _path_of(arguments: str) -> str:
    try:
        path = json.loads(arguments).get("path")
    except (ValueError, AttributeError):
        path = None
    return path if isinstance(path, str) and path else "a file"
