"""Which device the companion is, in ``sessionStart.device``, and where it keeps its state.

* **id**: ``desk-`` and 16 hex digits of a SHA-256 of the machine's id and the workspace's real
  path. The same folder on the same machine is the same device across restarts (a companion
  started again takes its own place on the session, and the calls sent to it are still its own);
  another folder, or another machine, is another device. Nothing is written into the workspace to
  remember it. The machine's id is ``/etc/machine-id`` (or D-Bus's) where there is one, else the
  network card's address, else the host's name.
* **name**: what a person recognises, ``<host> — <folder>`` (``MacBook — ~/src/app``), at most 64
  characters (a long folder keeps its end).
* **roles**: ``tools``, and ``display`` when the conversation is shown on a terminal.
* **state**: the companion's journal of calls (``journal``) lives in
  ``$XDG_STATE_HOME/voiceide/companion/<id>`` (``~/.local/state/…`` by default).
"""

from __future__ import annotations

import hashlib
import os
import socket
import uuid
from pathlib import Path

from shared.wire.protocol import DISPLAY, TOOLS, Device

MACHINE_ID_FILES = (Path("/etc/machine-id"), Path("/var/lib/dbus/machine-id"))
MAX_NAME = 64
ID_PREFIX = "desk-"


def machine_key() -> str:
    """Something that names this machine and stays the same across reboots."""
    for path in MACHINE_ID_FILES:
        try:
            value = path.read_text(encoding="ascii").strip()
        except (OSError, UnicodeDecodeError):
            continue
        if value:
            return value
    node = uuid.getnode()
    if not node >> 40 & 1:  # a real address (a random one has the multicast bit set)
        return f"node:{node:012x}"
    return f"host:{socket.gethostname()}"


def device_id(root: Path, machine: str | None = None) -> str:
    key = f"{machine if machine is not None else machine_key()}\0{root.resolve()}"
    return ID_PREFIX + hashlib.sha256(key.encode("utf-8")).hexdigest()[:16]


def folder_label(root: Path, home: Path | None = None) -> str:
    """``~/src/app`` for a folder under the home folder, else its full path."""
    root = root.resolve()
    home = (home or Path.home()).resolve()
    if root == home:
        return "~"
    if home in root.parents:
        return "~/" + root.relative_to(home).as_posix()
    return root.as_posix()


def device_name(root: Path, *, host: str | None = None, home: Path | None = None) -> str:
    host = (host if host is not None else socket.gethostname()).split(".")[0] or "desktop"
    folder = folder_label(root, home)
    name = f"{host} — {folder}"
    if len(name) <= MAX_NAME:
        return name
    room = MAX_NAME - len(host) - len(" — …")
    if room < 8:
        return name[: MAX_NAME - 1] + "…"
    return f"{host} — …{folder[-room:]}"


def companion_device(root: Path, *, display: bool, name: str | None = None, machine: str | None = None) -> Device:
    roles = (TOOLS, DISPLAY) if display else (TOOLS,)
    return Device(id=device_id(root, machine), name=name or device_name(root), roles=roles)


def state_folder(device: Device, base: Path | None = None) -> Path:
    """Where the companion keeps its journal for ``device`` (created on first use)."""
    if base is None:
        xdg = os.environ.get("XDG_STATE_HOME")
        base = (Path(xdg) if xdg else Path.home() / ".local" / "state") / "voiceide" / "companion"
    return base / device.id
