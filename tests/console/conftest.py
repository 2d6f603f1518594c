"""Fixtures for the voice console's browser tests: the local stack and headless Chromium.

Chromium and its WebDriver come from the distribution (``apt-get install chromium chromium-driver``,
which ``.ci/run`` does). Without them the tests are skipped on a developer's machine, with the
reason; in CI (``CI`` set) a missing browser fails them instead, so they can never be skipped there.
"""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conductor_local.stack import LocalStack
from tests.client.stack_support import event_processed

DOUBLES = (Path(__file__).with_name("doubles.js")).read_text(encoding="utf-8")
BROWSERS = ("chromium", "chromium-browser", "google-chrome")
WAIT_S = 15.0


def _find_browser() -> tuple[str, str] | None:
    browser = next((found for name in BROWSERS if (found := shutil.which(name))), None)
    driver = shutil.which("chromedriver")
    return (browser, driver) if browser and driver else None


def _in_ci() -> bool:
    return os.environ.get("CI", "").lower() not in ("", "0", "false", "no")


@pytest.fixture(scope="module")
def browser_paths() -> tuple[str, str]:
    found = _find_browser()
    if found is None:
        reason = "no Chromium with its WebDriver (apt-get install chromium chromium-driver)"
        if _in_ci():
            pytest.fail(f"CI must run the console's browser tests: {reason}")
        pytest.skip(reason)
    return found


@pytest.fixture(scope="module")
def stack() -> Iterator[LocalStack]:
    with LocalStack("127.0.0.1", 0, quiet=True) as running:
        yield running


@pytest.fixture(scope="module")
def driver(browser_paths: tuple[str, str]) -> Iterator[Any]:
    webdriver = pytest.importorskip("selenium.webdriver")
    browser, chromedriver = browser_paths
    options = webdriver.ChromeOptions()
    options.binary_location = browser
    for argument in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--window-size=1280,900",
        "--lang=en-US",
    ):
        options.add_argument(argument)
    chrome = webdriver.Chrome(options=options, service=webdriver.ChromeService(executable_path=chromedriver))
    chrome.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": DOUBLES})
    try:
        yield chrome
    finally:
        chrome.quit()


class Console:
    """The console opened on a fresh session, and what the tests ask of it."""

    def __init__(self, driver: Any, stack: LocalStack) -> None:
        self.driver = driver
        self.stack = stack
        self.session_id = str(uuid.uuid4())

    def open(self, ms_per_word: int = 40) -> Console:
        self.driver.get(f"{self.stack.console_url}?sessionId={self.session_id}")
        self.js(f"window.__fake.msPerWord = {ms_per_word}")
        self.wait("window.voiceConsole && window.voiceConsole.connected")
        start_id = self.js("return voiceConsole.record.sent.find(e => e.kind.sessionStart).id")
        self.until(lambda: event_processed(self.stack, self.session_id, start_id))
        return self

    def js(self, script: str, *args: Any) -> Any:
        return self.driver.execute_script(script, *args)

    def wait(self, expression: str, timeout: float = WAIT_S) -> Any:
        return self.until(lambda: self.js(f"return ({expression})"), timeout)

    def until(self, check: Any, timeout: float = WAIT_S) -> Any:
        from selenium.webdriver.support.ui import WebDriverWait

        return WebDriverWait(self.driver, timeout, poll_frequency=0.05).until(lambda _: check())

    def sent(self, kind: str) -> list[dict[str, Any]]:
        return self.js(
            "return voiceConsole.record.sent.filter(e => e.kind[arguments[0]]).map(e => e.kind[arguments[0]])", kind
        )

    def received(self, kind: str) -> list[dict[str, Any]]:
        return self.js(
            "return voiceConsole.record.received.filter(e => e.kind[arguments[0]]).map(e => e.kind[arguments[0]])", kind
        )

    def idle_after(self, turns: int) -> None:
        """Wait until the conductor has sent ``idle`` ``turns`` times."""
        self.wait(f"voiceConsole.turns.filter(t => t.marks.idle !== undefined).length >= {turns}")
        self.wait("voiceConsole.state === 'idle'")


@pytest.fixture
def console(driver: Any, stack: LocalStack) -> Console:
    return Console(driver, stack)
