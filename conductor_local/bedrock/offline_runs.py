"""How the offline brain says what long calls did, as a person would: a build's or a test run's
result, the conductor's ``conductor.status`` of the calls still running and its
``conductor.cancel``.

The results are the ones the apps send: the companion's command outcome (``{"status":
"succeeded"|"failed"|"timedOut", "command", "exitCode", "seconds", "problems", "outputLines",
"output"}``, or, failed, its error text with ``problems:`` and ``last output:``), the console's demo
build and tests (``{"status", "warnings", "seconds"}``, ``{"passed", "failed", "failures": [{"test",
…}]}``) and the client stub's simulated ones. The output itself is never said: at most its first
problem line, cut short. ``conductor.status`` answers ``{"running": [{"name", "runningFor": "12 s",
"progress": "25 %", "message"}]}``; its progress messages lose what a person would not say (the
companion's ``12 s: `` and a ``[5/20]`` step, which stands in for a missing percentage).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from conductor_local.bedrock.offline_words import parsed, sentence, short, tool_words, words

PROBLEM_CHARS = 120
MAX_STATUS_ENTRIES = 3
MAX_FAILED_TESTS = 2
SUCCEEDED = frozenset({"succeeded", "success", "passed", "ok", "done"})

_PROBLEM = re.compile(r"\b(?:error|fatal)\b|\bFAIL(?:ED|URE)?\b", re.IGNORECASE)
_EXIT_CODE = re.compile(r"failed with exit code (-?\d+)")
_TIME_LIMIT = re.compile(r"stopped after its time limit of ([\d.]+) s")
_ELAPSED = re.compile(r"^\d+(?:\.\d+)? s(?::\s*|$)")
_STEP = re.compile(r"^\[\s*(\d+)\s*/\s*(\d+)\s*\]\s*")
_PERCENT_TAG = re.compile(r"^\[\s*(\d{1,3})\s*%\]\s*")
_PERCENT = re.compile(r"^\s*(\d{1,3}(?:\.\d+)?)\s*%\s*$")
_SECONDS = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*s\s*$")


def run_label(name: str) -> str:
    """What a person calls a call of ``name``: ``build.run`` → "the build", ``tests.run`` → "the
    tests", any other tool → its name as words ("lint check")."""
    head, _, verb = name.rpartition(".")
    if head and verb.lower() == "run":
        return f"the {tool_words(head)}"
    return tool_words(name)


def is_run(name: str) -> bool:
    return name.rpartition(".")[2].lower() == "run"


def said_run(name: str, value: Any, text: str, *, failed: bool) -> str | None:
    """A run's result (a build, tests, a background job started), or None when it is not one."""
    label = run_label(name)
    if failed:
        return said_failure(label, text) if is_run(name) else None
    if value in (None, "", {}, []) and is_run(name):
        return sentence(f"{label} is done")
    if not isinstance(value, Mapping):
        return None
    if value.get("started") is True and value.get("background") is True:
        return sentence(f"{label} is running; I'll tell you when it's done")
    if _count(value.get("passed")) is not None and _count(value.get("failed")) is not None:
        return _tests_said(value)
    status = value.get("status")
    if isinstance(status, str) and status.strip():
        return _status_said(label, value, status.strip())
    return None


def said_failure(label: str, text: str) -> str:
    """A run that failed (its error): what failed first, never the output."""
    value = parsed(text)
    if isinstance(value, Mapping):
        reason = _first_problem(value) or next(
            (
                short(value[key], PROBLEM_CHARS)
                for key in ("reason", "message", "error")
                if isinstance(value.get(key), str)
            ),
            "",
        )
        return sentence(f"{label} failed" + (f": {reason}" if reason else ""))
    lines = [line.strip() for line in str(text).splitlines() if line.strip()]
    if not lines:
        return sentence(f"{label} failed")
    head = lines[0]
    problem = _problem_line(lines[1:])
    if match := _TIME_LIMIT.search(head):
        return sentence(f"{label} was stopped at its time limit of {match[1]} s" + (f": {problem}" if problem else ""))
    if match := _EXIT_CODE.search(head):
        return sentence(f"{label} failed" + (f": {problem}" if problem else f" with exit code {match[1]}"))
    return sentence(f"{label} failed: {short(head, PROBLEM_CHARS)}")


def said_status(value: Any) -> str | None:
    """``conductor.status``'s answer, one sentence a running call; None when it is not one."""
    if not isinstance(value, Mapping) or not isinstance(value.get("running"), list):
        return None
    running = [entry for entry in value["running"] if isinstance(entry, Mapping)]
    if not running:
        return "Nothing is running right now."
    said = [_running_said(entry) for entry in running[:MAX_STATUS_ENTRIES]]
    if (more := len(running) - MAX_STATUS_ENTRIES) > 0:
        said.append(f"And {more} more.")
    return " ".join(said)


def said_cancel(value: Any, text: str, *, failed: bool) -> str:
    """``conductor.cancel``'s answer."""
    if failed:
        reason = short(text, PROBLEM_CHARS)
        if reason.startswith("nothing to cancel"):
            return "There was nothing to cancel: nothing is running."
        return sentence(f"I couldn't cancel it: {reason}" if reason else "I couldn't cancel it")
    if isinstance(value, Mapping) and value.get("cancelled") is True:
        name = value.get("name")
        return sentence(f"I cancelled {run_label(name)}" if isinstance(name, str) and name else "I cancelled it")
    return "Done."


def progress_message(message: Any) -> tuple[str, int | None]:
    """A progress message as said (``12 s: [5/20] Compiling unit5.py`` → "compiling unit5.py")
    and the percentage its step tag gives, if it has one."""
    if not isinstance(message, str):
        return "", None
    text = _ELAPSED.sub("", message.strip(), count=1)
    percent = None
    if step := _STEP.match(text):
        done, total = int(step[1]), int(step[2])
        percent = round(100 * done / total) if total > 0 and done <= total else None
        text = text[step.end() :]
    elif tag := _PERCENT_TAG.match(text):
        percent = min(int(tag[1]), 100)
        text = text[tag.end() :]
    text = short(text, PROBLEM_CHARS).rstrip(".")
    if len(text) > 1 and text[0].isupper() and text[1].islower():
        text = text[0].lower() + text[1:]
    return text, percent


def _running_said(entry: Mapping[str, Any]) -> str:
    name = entry.get("name")
    label = run_label(name) if isinstance(name, str) and name else "a call"
    message, step = progress_message(entry.get("message"))
    progress = entry.get("progress")
    match = _PERCENT.match(progress) if isinstance(progress, str) else None
    percent = round(float(match[1])) if match else step
    plural = label.endswith("tests")
    if percent is not None:
        return sentence(f"{label} {'are' if plural else 'is'} {percent} % done" + (f": {message}" if message else ""))
    running = f"{'have' if plural else 'has'} been running{_duration(entry.get('runningFor'))}"
    if message:
        return sentence(f"{label} {running}: {message}")
    return sentence(f"{label} {running}; the app hasn't said how far it got")


def _duration(value: Any) -> str:
    """``"12 s"`` → " for 12 seconds" (minutes from 90 s on); "" when it is not a duration."""
    match = _SECONDS.match(value) if isinstance(value, str) else None
    if not match:
        return ""
    seconds = round(float(match[1]))
    if seconds >= 90:
        minutes = round(seconds / 60)
        return f" for {minutes} minutes"
    return f" for {seconds} second{'s' * (seconds != 1)}"


def _status_said(label: str, value: Mapping[str, Any], status: str) -> str:
    said = words(status)
    if said in SUCCEEDED:
        return sentence(f"{label} {'passed' if label == 'the tests' else 'succeeded'}{_counts(value)}")
    if said == "failed":
        problem = _first_problem(value)
        code = value.get("exitCode")
        exit_code = f" with exit code {code}" if isinstance(code, int) and not isinstance(code, bool) else ""
        return sentence(f"{label} failed" + (f": {problem}" if problem else exit_code))
    if said == "timed out":
        return sentence(f"{label} ran out of time")
    return sentence(f"{label} {said}{_counts(value)}")


def _tests_said(value: Mapping[str, Any]) -> str:
    passed, failed = _count(value.get("passed")) or 0, _count(value.get("failed")) or 0
    if not failed:
        if not passed:
            return "No tests ran."
        return "The test passed." if passed == 1 else f"All {passed} tests passed."
    failures = value.get("failures") if isinstance(value.get("failures"), list) else []
    names = [
        short(failure["test"], PROBLEM_CHARS)
        for failure in failures
        if isinstance(failure, Mapping) and isinstance(failure.get("test"), str)
    ][:MAX_FAILED_TESTS]
    total = passed + failed
    head = f"{failed} of {total} tests failed" if total > 1 else "The test failed"
    return sentence(head + (f": {', '.join(names)}" if names else ""))


def _counts(value: Mapping[str, Any]) -> str:
    """`` with 1 warning`` / `` with no warnings and 2 errors`` (counts or lists of them)."""
    counted = []
    for key in ("warnings", "errors", "failures"):
        item = value.get(key)
        count = len(item) if isinstance(item, list) else _count(item)
        if count is not None:
            counted.append(f"{count or 'no'} {key if count != 1 else key[:-1]}")
    return " with " + " and ".join(counted) if counted else ""


def _count(item: Any) -> int | None:
    return item if isinstance(item, int) and not isinstance(item, bool) and item >= 0 else None


def _first_problem(value: Mapping[str, Any]) -> str:
    problems = value.get("problems")
    if isinstance(problems, list):
        first = next((item for item in problems if isinstance(item, str) and item.strip()), None)
        if first is not None:
            return short(first, PROBLEM_CHARS)
    output = value.get("output")
    return _problem_line(output.splitlines()) if isinstance(output, str) else ""


def _problem_line(lines: list[str]) -> str:
    """The first problem of a failure's text: the line after ``problems:``, else the first line
    that looks like one (``error``, ``fatal``, ``FAIL``)."""
    stripped = [line.strip() for line in lines if line.strip()]
    if "problems:" in stripped:
        after = stripped[stripped.index("problems:") + 1 :]
        if after and after[0] != "last output:":
            return short(after[0], PROBLEM_CHARS)
    found = next((line for line in stripped if _PROBLEM.search(line)), "")
    return short(found, PROBLEM_CHARS)
