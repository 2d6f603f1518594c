"""``voiceide-conductor``: ``local --bedrock`` refuses to start without AWS credentials; the commands
parse, ``--model-pace`` included."""

from __future__ import annotations

from pathlib import Path

import pytest

from conductor_local import cli
from conductor_local.bedrock.offline_brain import ModelPace
from conductor_local.doctor import command as doctor
from tests.local.test_doctor import no_credentials_env, run_cli


def test_local_bedrock_without_credentials_fails_at_start_with_one_line(tmp_path: Path) -> None:
    result = run_cli(["local", "--bedrock", "--port", "0"], no_credentials_env(tmp_path))
    assert result.returncode == cli.EXIT_NO_CREDENTIALS == 2
    assert result.stdout == ""  # nothing started: no "listening on" line
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    assert result.stderr.startswith("voiceide-conductor: --bedrock needs AWS credentials: no AWS credentials found")
    assert "AWS_PROFILE=<profile>" in result.stderr and "AWS_ACCESS_KEY_ID" in result.stderr


def test_credentials_from_the_environment_are_enough(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name, value in no_credentials_env(tmp_path).items():
        monkeypatch.setenv(name, value)
    with pytest.raises(doctor.CannotRun, match="no AWS credentials found"):
        doctor.credentialed_session()
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAEXAMPLE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret")
    assert doctor.credentialed_session().get_credentials().access_key == "AKIAEXAMPLE"


def test_doctor_takes_a_stage_and_a_region() -> None:
    args = cli.build_parser().parse_args(["doctor", "--stage", "prod", "--region", "us-west-2"])
    assert (args.command, args.stage, args.region) == ("doctor", "prod", "us-west-2")
    args = cli.build_parser().parse_args(["doctor"])
    assert (args.stage, args.region) == (None, None)


def test_local_takes_a_model_pace_from_the_flag_or_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(cli.MODEL_PACE_ENV, raising=False)
    assert ModelPace.parse(cli.build_parser().parse_args(["local"]).model_pace) is None  # instant by default
    args = cli.build_parser().parse_args(["local", "--model-pace", "paced"])
    assert ModelPace.parse(args.model_pace) == ModelPace()
    monkeypatch.setenv(cli.MODEL_PACE_ENV, "300:50")
    assert cli.build_parser().parse_args(["local"]).model_pace == "300:50"


def test_a_bad_model_pace_stops_before_anything_starts(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["local", "--model-pace", "fast", "--port", "0"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("voiceide-conductor: --model-pace: model pace 'fast'")
