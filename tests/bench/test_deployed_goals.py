"""The as-deployed goal table: its rows, met / NO against made-up figures, the conductor's share
read from the time-sliced budgets, and every row printed."""

from __future__ import annotations

import io
import socket
import threading
from dataclasses import dataclass, field

import pytest

from benchmarks import aws_latencies as aws
from benchmarks import deployed_goals as goals
from benchmarks.as_deployed import FLOWS
from benchmarks.deployed_latency import FIRST, Waits, phone_link

UP, DOWN = "phone network (up)", "phone network and API Gateway egress (down)"


@dataclass
class Run:
    stage: str
    flow: str
    first_speak_ms: list[float] = field(default_factory=list)
    budgets: list[dict[str, float]] = field(default_factory=list)


def _runs(first_speak: dict[tuple[str, str], list[float]], dev_off_budgets: list[dict[str, float]]) -> list[Run]:
    return [
        Run(stage, flow, ms, dev_off_budgets if (stage, flow) == ("dev", "speculation off") else [])
        for (stage, flow), ms in first_speak.items()
    ]


MEETS = {
    ("prod", "speculation on"): [600.0, 650.0, 690.0],
    ("prod", "speculation off"): [1100.0, 1150.0, 1300.0],
    ("dev", "speculation on"): [250.0, 280.0, 900.0],
    ("dev", "speculation off"): [650.0, 700.0, 2000.0],
}
MISSES = {
    ("prod", "speculation on"): [1000.0, 1140.0, 1200.0],
    ("prod", "speculation off"): [1700.0, 1741.0, 1800.0],
    ("dev", "speculation on"): [300.0, 366.0, 400.0],
    ("dev", "speculation off"): [900.0, 965.0, 1000.0],
}
LEAN = [{FIRST: 500.0, UP: 40.0, DOWN: 150.0, "rest": 60.0, "DynamoDB GetItem": 20.0}]
HEAVY = [{FIRST: 500.0, UP: 40.0, DOWN: 150.0, "rest": 200.0, "Lambda cold start": 140.0}]


def _by_figure(rows: list[goals.GoalRow]) -> dict[str, goals.GoalRow]:
    return {row.figure: row for row in rows}


def _figure(key: str) -> str:
    return next(goal.figure for goal in goals.GOALS if goal.key == key)


def test_the_goals_name_the_flows_the_as_deployed_run_has() -> None:
    assert {flow.name: flow.speculation for flow in FLOWS} == {
        name: speculation for speculation, name in goals.SPECULATION_FLOWS.items()
    }


def test_one_row_per_goal_with_today_and_the_goal_as_the_release_before_set_them() -> None:
    rows = _by_figure(goals.goal_rows({}))
    assert len(rows) == len(goals.GOALS) == 10
    prod_on = rows[_figure(goals.first_speak_key("prod", True))]
    assert (prod_on.today, prod_on.goal) == ("1,094", "<= 700")
    dev_off = rows[_figure(goals.first_speak_key("dev", False))]
    assert (dev_off.today, dev_off.goal) == ("1,046", "<= 700")
    share = rows[_figure(goals.SHARE_KEY)]
    assert (share.today, share.goal) == ("316", "<= 150")


def test_figures_that_meet_their_goals_say_yes() -> None:
    measured = goals.measured_figures(
        _runs(MEETS, LEAN), {"lambdas.message": 240.0, "lambdas.turn": 250.0, "lambdas.connect": 900.0}
    )
    assert measured[goals.first_speak_key("prod", True)] == pytest.approx(650.0)
    assert measured[goals.first_speak_key("dev", False)] == pytest.approx(700.0)  # the p50, not the mean
    assert measured[goals.SHARE_KEY] == pytest.approx(80.0)  # rest + DynamoDB; not the model, not the phone
    rows = goals.goal_rows(measured)
    assert [row.met for row in rows if row.now and not row.now.startswith("see")] == ["yes"] * 7


def test_figures_that_miss_their_goals_say_no() -> None:
    measured = goals.measured_figures(_runs(MISSES, HEAVY), {"lambdas.message": 350.0, "lambdas.turn": 251.0})
    rows = _by_figure(goals.goal_rows(measured))
    assert rows[_figure(goals.first_speak_key("prod", False))].now == "1,741"
    assert rows[_figure(goals.SHARE_KEY)].now == "340"
    measured_rows = [row for row in rows.values() if not row.now.startswith("see")]
    assert len(measured_rows) == 7
    assert all(row.met == "NO" for row in measured_rows)


def test_a_figure_the_run_lacks_is_not_invented() -> None:
    only_prod = {key: ms for key, ms in MEETS.items() if key[0] == "prod"}
    rows = _by_figure(goals.goal_rows(goals.measured_figures(_runs(only_prod, []), {})))
    for key in (goals.first_speak_key("dev", True), goals.SHARE_KEY, goals.import_key("lambdas.turn")):
        assert (rows[_figure(key)].now, rows[_figure(key)].met) == ("-", "-")
    assert rows[_figure(goals.first_speak_key("prod", True))].met == "yes"


def test_the_figures_other_targets_measure_name_them() -> None:
    rows = goals.goal_rows({"first speak after the phrase": 10.0, "dynamodb cost": 0.0, "lost launches": 0.0})
    elsewhere = {row.now: row for row in rows if row.now.startswith("see")}
    assert sorted(row.now for row in rows if row.now.startswith("see")) == [
        "see make bench",
        "see make bench",
        "see make load",
    ]
    assert all(row.met == "" for row in elsewhere.values())
    assert _by_figure(rows)["first tts.speak after the first speakable phrase, p99 (ms)"].today == "62.5"


def test_the_report_prints_every_row() -> None:
    out = io.StringIO()
    goals.report_goals(goals.measured_figures(_runs(MISSES, HEAVY), {"lambdas.message": 350.0}), out)
    printed = out.getvalue()
    for goal in goals.GOALS:
        assert goal.figure in printed
        assert goal.goal_text in printed
    assert printed.count(" NO") == 6  # lambdas.turn's import was not measured
    assert "see make load" in printed


def test_the_best_import_of_each_handler_is_kept() -> None:
    draws = {"lambdas.message": iter([300.0, 260.0, 280.0]), "lambdas.turn": iter([240.0, 500.0, 245.0])}
    calls: list[str] = []

    def measure(module: str) -> float:
        calls.append(module)
        return next(draws[module])

    assert goals.best_imports(measure=measure) == {"lambdas.message": 260.0, "lambdas.turn": 240.0}
    assert calls == ["lambdas.message", "lambdas.turn"] * 3


def test_the_phone_links_waits_are_the_phones_network() -> None:
    """The share leaves out what the phone link records: its kinds are what the goals call the phone's."""
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]

    def echo() -> None:
        conn, _ = server.accept()
        with conn:
            conn.sendall(conn.recv(1024))

    threading.Thread(target=echo, daemon=True).start()
    waits = Waits()
    fast = aws.Latency("test network", 1, 2, "assumed: a test")
    with (
        phone_link(port, fast, aws.Sampler(1), waits) as link,
        socket.create_connection(("127.0.0.1", link.port)) as app,
    ):
        app.settimeout(10)
        app.sendall(b"ping")
        assert app.recv(1024) == b"ping"
    server.close()
    kinds = {wait.kind for wait in waits.waits}
    assert len(kinds) == 2
    assert not any(goals.is_conductors(kind) for kind in kinds)
    assert goals.is_conductors("rest") and goals.is_conductors("DynamoDB PutItem")
    assert not goals.is_conductors(FIRST)
