"""Docker-free packaging: the dependency layer and the project code asset."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
import tomllib
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from infra import bundling

ROOT = bundling.PROJECT_ROOT
RUNTIME_DEPENDENCIES = {"boto3", "aws-lambda-powertools", "pydantic"}
EM_AARCH64 = 183


def _requirements(lines: list[str]) -> dict[str, Requirement]:
    parsed = [Requirement(line) for line in lines]
    return {req.name.lower(): req for req in parsed}


def _bounds(req: Requirement, operators: tuple[str, ...]) -> set[str]:
    return {spec.version for spec in req.specifier if spec.operator in operators}


def test_lambda_requirements_agree_with_pyproject() -> None:
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    declared = _requirements(pyproject["project"]["dependencies"])
    lines = [
        line.split("#", 1)[0].strip()
        for line in bundling.REQUIREMENTS.read_text(encoding="utf-8").splitlines()
        if line.split("#", 1)[0].strip()
    ]
    bundled = _requirements(lines)
    assert set(bundled) == RUNTIME_DEPENDENCIES
    for name, req in bundled.items():
        project = declared[name]
        assert _bounds(req, (">=",)) == _bounds(project, (">=",)), f"{name}: lower bounds differ"
        assert _bounds(project, ("<", "<=")) <= _bounds(req, ("<", "<=")), f"{name}: upper bound missing"
        installed = metadata.version(name)
        assert req.specifier.contains(installed), f"{name} {installed} (tested locally) is outside {req.specifier}"


def test_pip_command_selects_linux_aarch64_cpython_wheels(tmp_path: Path) -> None:
    command = bundling.pip_install_command(bundling.REQUIREMENTS, tmp_path, "3.13")
    assert command[:4] == [sys.executable, "-m", "pip", "install"]
    pairs = list(itertools.pairwise(command))
    assert ("--platform", "manylinux2014_aarch64") in pairs
    assert ("--implementation", "cp") in pairs
    assert ("--python-version", "3.13") in pairs
    assert ("--target", str(tmp_path)) in pairs
    assert ("-r", str(bundling.REQUIREMENTS)) in pairs
    assert "--only-binary=:all:" in command
    assert bundling.RUNTIME.name.removeprefix("python") == bundling.PYTHON_VERSION


def test_project_files_leave_out_caches_tests_and_infra(tmp_path: Path) -> None:
    for path in [
        "shared/__init__.py",
        "shared/data.json",
        "shared/__pycache__/x.cpython-311.pyc",
        "shared/tests/test_x.py",
        "lambdas/__init__.py",
        "lambdas/connect.py",
        "lambdas/requirements.txt",
        "lambdas/stale.pyc",
        "lambdas/.hidden/secret.py",
        "infra/stack.py",
        "tests/test_y.py",
    ]:
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text("x")
    files = {p.relative_to(tmp_path).as_posix() for p in bundling.iter_package_files(tmp_path)}
    assert files == {"shared/__init__.py", "shared/data.json", "lambdas/__init__.py", "lambdas/connect.py"}
    before = bundling.project_fingerprint(tmp_path)
    (tmp_path / "tests/test_y.py").write_text("changed")
    (tmp_path / "shared/__pycache__/x.cpython-311.pyc").write_text("changed")
    assert bundling.project_fingerprint(tmp_path) == before
    (tmp_path / "lambdas/connect.py").write_text("y")
    assert bundling.project_fingerprint(tmp_path) != before


def test_dependency_fingerprint_tracks_requirements_and_skip_flag(tmp_path: Path) -> None:
    requirements = tmp_path / "requirements.txt"
    requirements.write_text("pydantic>=2.7,<3\n")
    real = bundling.dependencies_fingerprint(requirements, "3.13", skip=False)
    assert bundling.dependencies_fingerprint(requirements, "3.13", skip=True) != real
    assert bundling.dependencies_fingerprint(requirements, "3.12", skip=False) != real
    requirements.write_text("pydantic>=2.8,<3\n")
    assert bundling.dependencies_fingerprint(requirements, "3.13", skip=False) != real


def test_a_failing_pip_raises_instead_of_falling_back_to_docker(tmp_path: Path) -> None:
    requirements = tmp_path / "requirements.txt"
    requirements.write_text("this is not a requirement ===\n")
    bundler = bundling.DependencyBundler(requirements, "3.13")
    with pytest.raises(bundling.BundlingError, match="pip could not build the Lambda dependency layer"):
        bundler.try_bundle(str(tmp_path / "out"))


@pytest.mark.infra
def test_a_failing_local_bundle_fails_the_synth(tmp_path: Path) -> None:
    from aws_cdk import App, Stack
    from aws_cdk import aws_lambda as lambda_

    requirements = tmp_path / "requirements.txt"
    requirements.write_text("this is not a requirement ===\n")
    app = App(outdir=str(tmp_path / "out"))
    stack = Stack(app, "Bundle")
    with pytest.raises(RuntimeError, match="pip could not build the Lambda dependency layer"):
        lambda_.LayerVersion(stack, "Layer", code=bundling.dependency_code(requirements=requirements))


def _asset_dir(outdir: Path, code: dict[str, object]) -> Path:
    key = str(code["S3Key"])
    return outdir / f"asset.{key.removesuffix('.zip')}"


def _relative_files(root: Path) -> set[str]:
    return {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()}


@pytest.mark.infra
@pytest.mark.timeout(600)
def test_app_py_bundles_for_lambda_without_docker(tmp_path: Path) -> None:
    """``python app.py`` with CDK_OUTDIR builds the real layer (pip) and the code asset."""
    env = {k: v for k, v in os.environ.items() if k != "CDK_DEFAULT_ACCOUNT"}
    env.update(CDK_OUTDIR=str(tmp_path), CDK_CONTEXT_JSON=json.dumps({"stage": "dev"}))
    result = subprocess.run(
        [sys.executable, "app.py"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=540, check=False
    )
    assert result.returncode == 0, result.stderr[-4000:]
    template = json.loads((tmp_path / "VoiceIDEConductor-dev.template.json").read_text())
    resources = template["Resources"]
    layer = next(r for r in resources.values() if r["Type"] == "AWS::Lambda::LayerVersion")
    functions = [r["Properties"] for r in resources.values() if r["Type"] == "AWS::Lambda::Function"]

    layer_dir = _asset_dir(tmp_path, layer["Properties"]["Content"])
    assert {p.name for p in layer_dir.iterdir()} == {"python"}
    site = layer_dir / "python"
    shared_objects = list((site / "pydantic_core").glob("_pydantic_core.cpython-313-aarch64-linux-gnu.so"))
    assert len(shared_objects) == 1
    header = shared_objects[0].read_bytes()[:20]
    assert header[:4] == b"\x7fELF"
    assert int.from_bytes(header[18:20], "little") == EM_AARCH64
    for package in ("aws_lambda_powertools", "pydantic", "boto3", "botocore"):
        assert (site / package / "__init__.py").is_file(), package
    assert not {"tests", "infra", "lambdas", "shared"} & {p.name for p in site.iterdir()}
    assert not list(site.rglob("__pycache__"))

    code_dirs = {_asset_dir(tmp_path, fn["Code"]) for fn in functions}
    assert len(code_dirs) == 1
    code_dir = code_dirs.pop()
    files = _relative_files(code_dir)
    assert {path.split("/", 1)[0] for path in files} == {"lambdas", "shared"}
    assert not [f for f in files if "tests" in f.split("/") or "infra" in f.split("/")]
    assert not [f for f in files if f.endswith((".pyc", ".pyo")) or "__pycache__" in f]
    assert {"shared/auth_tokens.py", "lambdas/authorizer.py", "lambdas/__init__.py", "shared/__init__.py"} <= files
    assert files == {p.relative_to(ROOT).as_posix() for p in bundling.iter_package_files()}
    for fn in functions:
        module = fn["Handler"].rsplit(".", 1)[0]
        assert f"{module.replace('.', '/')}.py" in files, fn["Handler"]


@pytest.mark.infra
def test_app_py_rejects_an_unknown_stage(tmp_path: Path) -> None:
    env = dict(os.environ, CDK_OUTDIR=str(tmp_path), CDK_CONTEXT_JSON=json.dumps({"stage": "qa"}))
    result = subprocess.run([sys.executable, "app.py"], cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    assert result.returncode == 1
    assert "Unknown stage 'qa'. Known stages: dev, prod." in result.stderr
