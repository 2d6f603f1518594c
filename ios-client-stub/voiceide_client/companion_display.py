"""The companion's display: the conversation as the client's transcript renderers print it, with
each tool result as one short line (a file read is not printed whole; a result sent in parts is
one line, not one per part), the cancelled calls, and the devices on the session."""

from __future__ import annotations

from collections.abc import Sequence

from shared.wire.protocol import DeviceSeen, ErrorPayload, Event, ToolResult, make_event

from .render import Card, TranscriptRenderer, excerpt

RESULT_EXCERPT = 160


class CompanionDisplay:
    """A ``Renderer`` over a ``TranscriptRenderer`` (plain lines, or live on a terminal)."""

    def __init__(self, inner: TranscriptRenderer) -> None:
        self.inner = inner

    def received(self, event: Event) -> None:
        self.inner.received(event)

    def sent(self, event: Event) -> None:
        payload = event.payload
        if not isinstance(payload, ToolResult):
            self.inner.sent(event)
            return
        if payload.part not in (None, 0):
            return  # the call's line was printed with its first part
        text = payload.result if payload.result is not None else payload.error
        short = excerpt(text or "", RESULT_EXCERPT)
        if payload.parts is not None:
            short += f" (sent in {payload.parts} parts)"
        field = "result" if payload.result is not None else "error"
        summary = ToolResult.model_validate({"callId": payload.call_id, field: short})
        self.inner.sent(make_event(summary, event_id=event.id))

    def client_error(self, error: ErrorPayload) -> None:
        self.inner.client_error(error)

    def state(self, state: str) -> None:
        self.inner.state(state)

    def cards(self, cards: list[Card]) -> None:
        self.inner.cards(cards)

    def warning(self, text: str) -> None:
        self.inner.warning(text)

    # ---- what the companion adds ---------------------------------------------------------------

    def line(self, text: str) -> None:
        self.inner.line(text)

    def notice(self, text: str) -> None:
        self.inner.notice(text)

    def cancelled(self, name: str, reason: str) -> None:
        self.inner.line(f"[cancelled] {name}" + (f": {reason}" if reason else ""))

    def devices(self, devices: Sequence[DeviceSeen], *, joined: str | None = None, left: str | None = None) -> None:
        if joined is not None:
            self.inner.line(f"[device] joined: {_named(devices, joined)}")
        if left is not None:
            self.inner.line(f"[device] left: {left}")
        self.inner.line("[devices] " + "; ".join(device_label(device) for device in devices))


def device_label(device: DeviceSeen) -> str:
    roles = ", ".join(device.roles)
    return f"{device.name or device.id} ({roles})" + (" — this one" if device.self_ else "")


def _named(devices: Sequence[DeviceSeen], device_id: str) -> str:
    return next((device.name for device in devices if device.id == device_id and device.name), device_id)
