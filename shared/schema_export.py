"""Writes the protocol's JSON Schema for the iOS team: ``python -m shared.schema_export [PATH]``."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from shared.protocol import json_schema

DEFAULT_PATH = Path(__file__).resolve().parent.parent / "schema" / "voiceide-event.schema.json"


def render() -> str:
    return json.dumps(json_schema(), indent=2, sort_keys=True) + "\n"


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    path = Path(args[0]) if args else DEFAULT_PATH
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render(), encoding="utf-8")
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
