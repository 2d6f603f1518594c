"""Figures the reliability suites collect (examples run, race iterations, fault cases).

``conftest.pytest_terminal_summary`` prints them at the end of the run, so the CI log shows how
much was actually exercised, not just that the tests passed.
"""

from __future__ import annotations

import threading
from collections import Counter

_lock = threading.Lock()
FIGURES: Counter[str] = Counter()


def count(name: str, value: int = 1) -> None:
    with _lock:
        FIGURES[name] += value
