"""Every test keeps the terminal client's device id (and anything else a client keeps in the
person's config folder) in a folder of its own, never in the person's ``~/.config``; programs a
test starts inherit it.

The reliability suites' figures (``tests.reliability.figures``) are printed at the end of the
run; with parallel workers (pytest-xdist) each worker hands its own to the controller, which adds
them up."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings

from tests.reliability.figures import FIGURES, count

CONFIG_ENV = "XDG_CONFIG_HOME"


@pytest.fixture(autouse=True)
def config_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path_factory.mktemp("config")
    monkeypatch.setenv(CONFIG_ENV, str(home))
    return home


# No wall-clock bound on a generated example (hypothesis's default deadline is 200 ms): a test
# asserts behaviour, never time, and a busy 2-core machine takes longer now and then.
settings.register_profile("conductor", deadline=None)
settings.load_profile("conductor")

FIGURES_KEY = "reliability_figures"


def pytest_sessionfinish(session: pytest.Session) -> None:
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:  # a parallel worker: its figures travel to the controller
        workeroutput[FIGURES_KEY] = dict(FIGURES)


class _WorkerFigures:
    """The controller's side with pytest-xdist (registered only when it runs, as its hook is xdist's)."""

    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        """A parallel worker finished: its figures join the run's."""
        for name, value in getattr(node, "workeroutput", {}).get(FIGURES_KEY, {}).items():
            count(name, value)


def pytest_configure(config: pytest.Config) -> None:
    if config.pluginmanager.hasplugin("xdist"):
        config.pluginmanager.register(_WorkerFigures(), "reliability-figures")


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    if getattr(config, "workeroutput", None) is not None or not FIGURES:
        return
    terminalreporter.section("reliability figures")
    for name in sorted(FIGURES):
        terminalreporter.write_line(f"{name}: {FIGURES[name]}")
