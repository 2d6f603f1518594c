"""The other devices of the session as the transcript shows them: who joined or left, and how far
the calls they run have got.

The conductor forwards each ``toolProgress`` of the device running a call to the other devices,
with the tool's ``name`` (not the device's): the line names the device when the session has exactly
one other device that runs tools, as ``[build.run on MacBook] 25 % Compiling 41 of 120 files``.
A progress is printed only when it changed (its fraction or its message).
"""

from __future__ import annotations

from collections.abc import Sequence

from shared.wire.protocol import TOOLS, DevicesChanged, DeviceSeen, SessionReady, ToolProgress

MAX_CALLS = 256
"""Calls whose latest progress is remembered (the oldest forgotten first)."""


class SessionDevices:
    """What the transcript says about the session's other devices, from the events it receives."""

    def __init__(self) -> None:
        self.own_id: str | None = None
        self._devices: tuple[DeviceSeen, ...] = ()
        self._names: dict[str, str] = {}  # every device seen, by id: a device that left keeps its name
        self._shown: dict[str, tuple[float | None, str]] = {}  # callId -> the progress last printed

    def ready(self, ready: SessionReady) -> None:
        """This connection's ``sessionReady``: the devices present (when there are several)."""
        if ready.devices is not None:
            self._seen(ready.devices)
            self.own_id = next((device.id for device in ready.devices if device.self_), self.own_id)

    def changed(self, change: DevicesChanged) -> list[str]:
        """The lines for a device that joined or left."""
        self._seen(change.devices)
        lines = []
        if change.joined is not None:
            joined = next((device for device in change.devices if device.id == change.joined), None)
            roles = f" ({', '.join(joined.roles)})" if joined is not None and joined.roles else ""
            lines.append(f"[device] joined: {self._name(change.joined)}{roles}")
        if change.left is not None:
            lines.append(f"[device] left: {self._name(change.left)}")
        return lines

    def progress(self, progress: ToolProgress) -> str | None:
        """The line for another device's progress, or None when it says nothing new."""
        shown = (progress.fraction, progress.message)
        if self._shown.get(progress.call_id) == shown:
            return None
        self._shown.pop(progress.call_id, None)
        self._shown[progress.call_id] = shown
        if len(self._shown) > MAX_CALLS:
            del self._shown[next(iter(self._shown))]
        where = progress.name or "progress"
        runner = self._tools_device()
        if runner is not None:
            where += f" on {runner}"
        parts = [f"[{where}]"]
        if progress.fraction is not None:
            parts.append(f"{round(progress.fraction * 100)} %")
        parts.append(progress.message or ("" if progress.fraction is not None else "running"))
        return " ".join(part for part in parts if part)

    def _seen(self, devices: Sequence[DeviceSeen]) -> None:
        self._devices = tuple(devices)
        for device in devices:
            self._names[device.id] = device.name or device.id

    def _name(self, device_id: str) -> str:
        return self._names.get(device_id, device_id)

    def _tools_device(self) -> str | None:
        """The name of the one other device that runs tools, if there is exactly one."""
        others = [device for device in self._devices if TOOLS in device.roles and device.id != self.own_id]
        return (others[0].name or others[0].id) if len(others) == 1 else None
