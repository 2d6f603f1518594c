"""Every test keeps the terminal client's device id (and anything else a client keeps in the
person's config folder) in a folder of its own, never in the person's ``~/.config``; programs a
test starts inherit it."""

from __future__ import annotations

from pathlib import Path

import pytest

CONFIG_ENV = "XDG_CONFIG_HOME"


@pytest.fixture(autouse=True)
def config_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path_factory.mktemp("config")
    monkeypatch.setenv(CONFIG_ENV, str(home))
    return home
