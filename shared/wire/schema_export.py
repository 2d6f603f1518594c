"""Writes the protocol's JSON Schema for the iOS team: ``python -m shared.wire.schema_export [PATH]``."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from shared.wire.protocol import json_schema

DEFAULT_PATH = Path(__file__).resolve().parents[2] / "schema" / "voiceide-event.schema.json"


def render() -> str:
    return json.dumps(json_schema(), indent=2, sort_keys=True) + "\n"


def write_document(text: str, default_path: Path, argv: list[str] | None = None) -> int:
    """Write a generated document to the path on the command line, or to its default place."""
    args = sys.argv[1:] if argv is None else argv
    path = Path(args[0]) if args else default_path
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    print(f"wrote {path}")
    return 0


def main(argv: list[str] | None = None) -> int:
    return write_document(render(), DEFAULT_PATH, argv)


if __name__ == "__main__":
    raise SystemExit(main())
