#!/usr/bin/env python3
"""CDK entry point: ``npx aws-cdk@2 synth -c stage=<name>`` (default stage: dev)."""

from __future__ import annotations

import sys

from infra.app import build_app
from infra.bundling import BundlingError
from infra.config import StageConfigError


def main() -> int:
    try:
        app, _ = build_app()
        app.synth()
    except (StageConfigError, BundlingError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
