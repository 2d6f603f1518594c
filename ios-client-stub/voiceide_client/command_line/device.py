"""Which device ``voiceide-client`` is, in ``sessionStart.device``.

* **id**: ``term-`` and 32 hex digits, made once and kept in ``$XDG_CONFIG_HOME/voiceide/device-id``
  (``~/.config/voiceide/device-id`` by default): the same terminal client on this machine is the
  same device across launches, so a client started again takes its own place on the session. When
  that file can be neither read nor written, the id is derived from the host and the user instead
  (still the same across launches).
* **name**: ``Terminal — <host>``, or ``--name``.
* **roles**: ``voice``, ``display`` and ``tools`` by default: alone, the client hears, shows and runs
  the model's tools on its folder, as the one-device app always did. ``--roles voice,display``
  leaves the tools to another device of the session (the desktop companion).
"""

from __future__ import annotations

import getpass
import hashlib
import os
import re
import socket
import uuid
from pathlib import Path

from shared.wire.protocol import DEVICE_ROLES, Device

CONFIG_ENV = "XDG_CONFIG_HOME"
ID_FILE = Path("voiceide") / "device-id"
ID_PREFIX = "term-"
ID_PATTERN = re.compile(r"^[A-Za-z0-9._:-]{1,64}$")
MAX_NAME = 64
DEFAULT_ROLES: tuple[str, ...] = DEVICE_ROLES


def id_file() -> Path:
    """Where the client keeps its device id (``$XDG_CONFIG_HOME`` honoured)."""
    base = os.environ.get(CONFIG_ENV)
    return (Path(base) if base else Path.home() / ".config") / ID_FILE


def _read_id(path: Path) -> str | None:
    try:
        value = path.read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError):
        return None
    return value if ID_PATTERN.match(value) else None


def device_id(path: Path | None = None) -> str:
    """The id kept in ``path`` (``id_file()``), made and written there the first time."""
    path = path or id_file()
    kept = _read_id(path)
    if kept is not None:
        return kept
    made = ID_PREFIX + uuid.uuid4().hex
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        draft = path.with_name(f".{path.name}.{os.getpid()}")
        draft.write_text(made + "\n", encoding="ascii")
        try:
            os.link(draft, path)  # atomic, and never over an id another client wrote meanwhile
        except FileExistsError:
            pass
        except OSError:
            os.replace(draft, path)
        finally:
            draft.unlink(missing_ok=True)
    except OSError:
        return _derived_id()
    return _read_id(path) or _derived_id()


def _derived_id() -> str:
    """An id that stays the same without a file: this host's name and this user's."""
    try:
        user = getpass.getuser()
    except (OSError, KeyError):
        user = str(os.getuid()) if hasattr(os, "getuid") else ""
    digest = hashlib.sha256(f"{socket.gethostname()}\0{user}".encode()).hexdigest()
    return ID_PREFIX + digest[:32]


def device_name(host: str | None = None) -> str:
    host = (host if host is not None else socket.gethostname()).split(".")[0] or "this computer"
    return f"Terminal — {host}"[:MAX_NAME]


def parse_roles(value: str) -> tuple[str, ...]:
    """``voice,display`` as roles; ValueError (one line) for an unknown or repeated role or none."""
    roles = [role.strip() for role in value.split(",") if role.strip()]
    if not roles:
        raise ValueError(f"give one or more of {', '.join(DEVICE_ROLES)}, separated by commas")
    for role in roles:
        if role not in DEVICE_ROLES:
            raise ValueError(f"{role!r} is not a role: use {', '.join(DEVICE_ROLES)}")
    if len(set(roles)) != len(roles):
        raise ValueError("each role at most once")
    return tuple(role for role in DEVICE_ROLES if role in roles)


def check_name(value: str) -> str:
    """A device name a person reads: 1 to 64 characters, no control characters."""
    name = value.strip()
    if not name:
        raise ValueError("the name is empty")
    if len(name) > MAX_NAME:
        raise ValueError(f"at most {MAX_NAME} characters (this one has {len(name)})")
    if any(not character.isprintable() for character in name):
        raise ValueError("no control characters")
    return name


def terminal_device(
    *, roles: tuple[str, ...] = DEFAULT_ROLES, name: str | None = None, id_path: Path | None = None
) -> Device:
    return Device.model_validate({"id": device_id(id_path), "name": name or device_name(), "roles": roles})
