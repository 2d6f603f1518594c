"""Docker-free packaging: the dependency layer and the project code asset."""

from __future__ import annotations

import itertools
import json
import os
import platform
import shutil
import stat
import subprocess
import sys
import tomllib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from email.parser import Parser
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest
from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from infra import bundling
from infra.app import SYNTH_ONLY_RULE

ROOT = bundling.PROJECT_ROOT
RUNTIME_DEPENDENCIES = {
    "boto3",
    "aws-lambda-powertools",
    "pydantic",
    "pyjwt",
    "jsonschema",
    "rapidfuzz",
    "jellyfish",
    "mcp",
}
EM_AARCH64 = 183
PYC_TAG = f"cpython-{bundling.PYTHON_VERSION.replace('.', '')}"
UNCHECKED_HASH_FLAGS = 0b01  # PEP 552: hash-based, check_source unset


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


def test_pip_command_installs_the_lock_as_linux_aarch64_cpython_wheels_checked_against_its_hashes(
    tmp_path: Path,
) -> None:
    command = bundling.pip_install_command(bundling.LOCK, tmp_path, "3.13")
    assert command[:4] == [sys.executable, "-m", "pip", "install"]
    pairs = list(itertools.pairwise(command))
    assert ("--platform", "manylinux2014_aarch64") in pairs
    assert ("--implementation", "cp") in pairs
    assert ("--python-version", "3.13") in pairs
    assert ("--target", str(tmp_path)) in pairs
    assert ("-r", str(bundling.LOCK)) in pairs
    assert bundling.LOCK.name == "requirements.lock" and bundling.LOCK.is_file()
    assert "--only-binary=:all:" in command
    assert "--require-hashes" in command
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
        "lambdas/requirements.lock",
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


LOCKED_SIX = "six==1.17.0 --hash=sha256:4721f391ed90541fddacab5acf947aa0d3dc7d27b2e1e8eda2be8970586c3274\n"


def test_fingerprints_follow_the_bundle_format_and_the_bytecode_version(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lock = tmp_path / "requirements.lock"
    lock.write_text(LOCKED_SIX)
    project = bundling.project_fingerprint()
    dependencies = bundling.dependencies_fingerprint(lock, "3.13", skip=False)
    assert bundling.project_fingerprint(python_version="3.14") != project
    monkeypatch.setattr(bundling, "BUNDLE_FORMAT", "previous")
    assert bundling.project_fingerprint() != project
    assert bundling.dependencies_fingerprint(lock, "3.13", skip=False) != dependencies


def test_dependency_fingerprint_tracks_the_lock_how_pip_installs_it_and_the_skip_flag(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The layer asset is the lock's: the same hash always carries the same files, and a new
    hash for the same version (a re-published wheel) is a new layer; the ranges play no part."""
    lock = tmp_path / "requirements.lock"
    lock.write_text(LOCKED_SIX)
    real = bundling.dependencies_fingerprint(lock, "3.13", skip=False)
    assert bundling.dependencies_fingerprint(lock, "3.13", skip=True) != real
    assert bundling.dependencies_fingerprint(lock, "3.12", skip=False) != real
    lock.write_text(LOCKED_SIX.replace("4721f391", "00000000"))
    assert bundling.dependencies_fingerprint(lock, "3.13", skip=False) != real
    lock.write_text(LOCKED_SIX)
    assert bundling.dependencies_fingerprint(lock, "3.13", skip=False) == real
    options = bundling.pip_options("3.13")
    assert not {"-r", str(lock), "--target"} & set(options)  # where things go is no part of what is built
    monkeypatch.setattr(bundling, "pip_options", lambda *_: [option for option in options if option != "--no-compile"])
    assert bundling.dependencies_fingerprint(lock, "3.13", skip=False) != real


def test_the_layer_fingerprint_is_the_lock_s(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    ranges = tmp_path / "requirements.txt"
    ranges.write_text("pydantic>=2.8,<3\n")
    before = bundling.dependencies_fingerprint(bundling.LOCK, bundling.PYTHON_VERSION, skip=False)
    monkeypatch.setattr(bundling, "REQUIREMENTS", ranges)
    assert bundling.dependencies_fingerprint(bundling.LOCK, bundling.PYTHON_VERSION, skip=False) == before


def test_a_failing_pip_raises_instead_of_falling_back_to_docker(tmp_path: Path) -> None:
    lock = tmp_path / "requirements.lock"
    lock.write_text("this is not a requirement ===\n")
    bundler = bundling.DependencyBundler(lock, "3.13")
    with pytest.raises(bundling.BundlingError, match="pip could not build the Lambda dependency layer"):
        bundler.try_bundle(str(tmp_path / "out"))


@pytest.mark.parametrize(
    ("lock_text", "refusal"),
    [
        ("six>=1.16\n", "pinned with =="),  # a range
        ("six==1.17.0\n", "Hashes are required in --require-hashes mode"),  # a pin without a hash
    ],
)
def test_pip_refuses_a_lock_entry_without_exact_version_and_hash(tmp_path: Path, lock_text: str, refusal: str) -> None:
    lock = tmp_path / "requirements.lock"
    lock.write_text(lock_text)
    with pytest.raises(bundling.BundlingError, match=refusal):
        bundling.DependencyBundler(lock, "3.13").try_bundle(str(tmp_path / "out"))
    assert not list((tmp_path / "out" / "python").iterdir())


@pytest.mark.infra
@pytest.mark.parametrize(
    ("lock_text", "refusal"),
    [
        (LOCKED_SIX.replace("4721f391", "00000000"), "DO NOT MATCH THE HASHES"),  # a file not the locked one
        # a dependency the lock does not name (python-dateutil needs six)
        (
            "python-dateutil==2.9.0.post0 "
            "--hash=sha256:a8b2bc7bffae282281c8140a97d3aa9c14da0b136dfe83f850eea9a5f7470427\n",
            "--require-hashes mode",
        ),
    ],
)
def test_pip_installs_nothing_the_lock_does_not_vouch_for(tmp_path: Path, lock_text: str, refusal: str) -> None:
    lock = tmp_path / "requirements.lock"
    lock.write_text(lock_text)
    with pytest.raises(bundling.BundlingError, match=refusal):
        bundling.DependencyBundler(lock, "3.13").try_bundle(str(tmp_path / "out"))


def test_a_missing_lock_fails_with_the_command_that_makes_it(tmp_path: Path) -> None:
    with pytest.raises(bundling.BundlingError, match=r"requirements\.lock is missing: run `make lock`"):
        bundling.dependency_code(lock=tmp_path / "requirements.lock")


@pytest.mark.infra
def test_a_failing_local_bundle_fails_the_synth(tmp_path: Path) -> None:
    from aws_cdk import App, Stack
    from aws_cdk import aws_lambda as lambda_

    lock = tmp_path / "requirements.lock"
    lock.write_text("this is not a requirement ===\n")
    app = App(outdir=str(tmp_path / "out"))
    stack = Stack(app, "Bundle")
    with pytest.raises(RuntimeError, match="pip could not build the Lambda dependency layer"):
        lambda_.LayerVersion(stack, "Layer", code=bundling.dependency_code(lock=lock))


def _asset_dir(outdir: Path, code: dict[str, object]) -> Path:
    key = str(code["S3Key"])
    return outdir / f"asset.{key.removesuffix('.zip')}"


def _relative_files(root: Path) -> set[str]:
    return {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()}


@dataclass(frozen=True)
class AppBundle:
    site: Path  # the layer's python/ directory
    code: Path  # the function code asset
    handlers: list[str]
    template: dict[str, Any]


@pytest.fixture(scope="module")
def app_bundle(tmp_path_factory: pytest.TempPathFactory) -> AppBundle:
    """``python app.py`` with CDK_OUTDIR builds the real layer (pip) and the code asset, once."""
    outdir = tmp_path_factory.mktemp("cdk-bundle")
    env = {k: v for k, v in os.environ.items() if k != "CDK_DEFAULT_ACCOUNT"}
    env.update(CDK_OUTDIR=str(outdir), CDK_CONTEXT_JSON=json.dumps({"stage": "dev"}))
    result = subprocess.run(
        [sys.executable, "app.py"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=540, check=False
    )
    assert result.returncode == 0, result.stderr[-4000:]
    template = json.loads((outdir / "VoiceIDEConductor-dev.template.json").read_text())
    resources = template["Resources"]
    layer = next(r for r in resources.values() if r["Type"] == "AWS::Lambda::LayerVersion")
    functions = [r["Properties"] for r in resources.values() if r["Type"] == "AWS::Lambda::Function"]
    layer_dir = _asset_dir(outdir, layer["Properties"]["Content"])
    assert {p.name for p in layer_dir.iterdir()} == {"python"}
    code_dirs = {_asset_dir(outdir, fn["Code"]) for fn in functions}
    assert len(code_dirs) == 1
    return AppBundle(layer_dir / "python", code_dirs.pop(), sorted({fn["Handler"] for fn in functions}), template)


@pytest.fixture(scope="module")
def runtime_python() -> bundling.RuntimePython:
    return bundling.find_runtime_python()


@pytest.mark.infra
@pytest.mark.timeout(600)
def test_app_py_bundles_for_lambda_without_docker(app_bundle: AppBundle) -> None:
    site = app_bundle.site
    shared_objects = list((site / "pydantic_core").glob("_pydantic_core.cpython-313-aarch64-linux-gnu.so"))
    assert len(shared_objects) == 1
    header = shared_objects[0].read_bytes()[:20]
    assert header[:4] == b"\x7fELF"
    assert int.from_bytes(header[18:20], "little") == EM_AARCH64
    for package in ("aws_lambda_powertools", "pydantic", "boto3", "botocore"):
        assert (site / package / "__init__.py").is_file(), package
    assert not {"tests", "infra", "lambdas", "shared"} & {p.name for p in site.iterdir()}

    sources = {f for f in _relative_files(app_bundle.code) if "__pycache__" not in f.split("/")}
    assert {path.split("/", 1)[0] for path in sources} == {"lambdas", "shared"}
    assert not [f for f in sources if "tests" in f.split("/") or "infra" in f.split("/")]
    assert {
        "shared/adapters/auth_tokens.py",
        "lambdas/authorizer.py",
        "lambdas/__init__.py",
        "shared/__init__.py",
    } <= sources
    assert sources == {p.relative_to(ROOT).as_posix() for p in bundling.iter_package_files()}
    for handler in app_bundle.handlers:
        module = handler.rsplit(".", 1)[0]
        assert f"{module.replace('.', '/')}.py" in sources, handler


def _installed(site: Path) -> dict[str, tuple[str, list[Requirement]]]:
    """name -> (version, Requires-Dist) of every distribution installed in ``site``."""
    found = {}
    for dist_info in site.glob("*.dist-info"):
        metadata = Parser().parsestr((dist_info / "METADATA").read_text(encoding="utf-8"), headersonly=True)
        requires = [Requirement(line) for line in metadata.get_all("Requires-Dist") or []]
        found[canonicalize_name(metadata["Name"])] = (metadata["Version"], requires)
    return found


def _lambda_environment() -> dict[str, str]:
    """PEP 508 marker values of Lambda's python3.13 on arm64."""
    env = default_environment()
    env.update(
        implementation_name="cpython",
        platform_python_implementation="CPython",
        python_version=bundling.PYTHON_VERSION,
        python_full_version=f"{bundling.PYTHON_VERSION}.0",
        implementation_version=f"{bundling.PYTHON_VERSION}.0",
        sys_platform="linux",
        platform_system="Linux",
        platform_machine="aarch64",
        os_name="posix",
    )
    return env


def _closure(roots: Iterable[Requirement], installed: dict[str, tuple[str, list[Requirement]]]) -> set[str]:
    """Every distribution ``roots`` need on Lambda's platform, from the installed packages' own
    metadata (extras included: a root asking for ``pkg[extra]`` pulls in what that extra needs)."""
    environment = _lambda_environment()
    extras_of: dict[str, set[str]] = {}
    pending = list(roots)
    while pending:
        requirement = pending.pop()
        name = canonicalize_name(requirement.name)
        if name in extras_of and set(requirement.extras) <= extras_of[name]:
            continue
        extras_of.setdefault(name, set()).update(requirement.extras)
        assert name in installed, f"{requirement} is needed but not in the layer"
        version, requires = installed[name]
        assert requirement.specifier.contains(version, prereleases=True), f"{name}=={version} breaks {requirement}"
        for dependency in requires:
            extras = {"", *extras_of[name]}
            if dependency.marker is None or any(
                dependency.marker.evaluate({**environment, "extra": e}) for e in extras
            ):
                pending.append(dependency)
    return set(extras_of)


@pytest.mark.infra
@pytest.mark.timeout(600)
def test_the_layer_holds_exactly_the_lock_and_the_lock_only_what_the_lambdas_pull_in(app_bundle: AppBundle) -> None:
    from tests.infra.test_supply_chain import lambda_ranges, read_lock

    locked = read_lock()
    installed = _installed(app_bundle.site)
    assert {name: version for name, (version, _) in installed.items()} == {
        name: package.version for name, package in locked.items()
    }
    assert _closure(lambda_ranges().values(), installed) == set(locked)
    # A real layer: no synth-only refusal in its template.
    assert SYNTH_ONLY_RULE not in app_bundle.template.get("Rules", {})
    assert not (app_bundle.site / bundling.SKIPPED_MARKER).exists()


def _bytecode_of(root: Path) -> Iterator[tuple[Path, Path]]:
    """(source, the bytecode the runtime's interpreter looks for) for every module below ``root``."""
    for source in sorted(root.rglob("*.py")):
        yield source, source.parent / "__pycache__" / f"{source.stem}.{PYC_TAG}.pyc"


@pytest.mark.infra
@pytest.mark.timeout(600)
def test_every_module_of_the_bundle_has_unchecked_bytecode_of_the_runtime(
    app_bundle: AppBundle, runtime_python: bundling.RuntimePython
) -> None:
    probe = "import importlib.util, sys; sys.stdout.write(importlib.util.MAGIC_NUMBER.hex())"
    magic = bytes.fromhex(
        subprocess.run([str(runtime_python.path), "-I", "-c", probe], capture_output=True, text=True, check=True).stdout
    )
    for root in (app_bundle.site, app_bundle.code):
        expected = dict(_bytecode_of(root))
        assert len(expected) > (500 if root == app_bundle.site else 20)
        for source, pyc in expected.items():
            assert pyc.is_file(), f"no bytecode for {source.relative_to(root)}"
            header = pyc.read_bytes()[:16]
            assert header[:4] == magic, f"{pyc.relative_to(root)} was not compiled by Python {bundling.PYTHON_VERSION}"
            assert int.from_bytes(header[4:8], "little") == UNCHECKED_HASH_FLAGS, pyc.relative_to(root)
        # nothing else: no bytecode of the build machine's Python, no stale files
        assert set(root.rglob("*.pyc")) == set(expected.values())
        assert not list(root.rglob("*.pyo"))


_SPY = """
import importlib.machinery, json, sys
compiled = []
to_code = importlib.machinery.SourceFileLoader.source_to_code
def spy(self, data, path, *args, **kwargs):
    compiled.append(path)
    return to_code(self, data, path, *args, **kwargs)
importlib.machinery.SourceFileLoader.source_to_code = spy
sys.path[:0] = sys.argv[1:3]
for name in sys.argv[3:]:
    __import__(name)
loaded = sorted(getattr(m, "__file__", None) or "" for m in list(sys.modules.values()))
print(json.dumps({"compiled": compiled, "loaded": loaded, "dont_write_bytecode": sys.flags.dont_write_bytecode}))
"""


def _read_only_copy(source: Path, destination: Path) -> Path:
    shutil.copytree(source, destination)
    for path in [*destination.rglob("*"), destination]:
        path.chmod(path.stat().st_mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))
    return destination


@pytest.mark.infra
@pytest.mark.timeout(600)
@pytest.mark.skipif(sys.platform != "linux", reason="the dependency layer is built from manylinux wheels")
def test_the_handlers_import_from_the_bundled_bytecode(
    app_bundle: AppBundle, runtime_python: bundling.RuntimePython, tmp_path: Path
) -> None:
    """As on Lambda (read-only, nothing written): importing every handler compiles no module of
    the bundle. The layer is built for this machine's architecture by the same bundler, so its
    compiled extension (pydantic_core) loads here."""
    machine = platform.machine()
    host_layer = tmp_path / "host-layer"
    bundler = bundling.DependencyBundler(
        python=runtime_python, platforms=(f"manylinux2014_{machine}", f"manylinux_2_28_{machine}")
    )
    bundler.try_bundle(str(host_layer))
    task = _read_only_copy(app_bundle.code, tmp_path / "task")
    layer = _read_only_copy(host_layer / "python", tmp_path / "opt" / "python")
    modules = [handler.rsplit(".", 1)[0] for handler in app_bundle.handlers]
    env = {"PATH": os.environ.get("PATH", ""), "AWS_REGION": "us-east-1", "AWS_DEFAULT_REGION": "us-east-1"}
    result = subprocess.run(
        [str(runtime_python.path), "-I", "-B", "-c", _SPY, str(task), str(layer), *modules],
        capture_output=True, text=True, env=env, timeout=120, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-4000:]
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["dont_write_bytecode"]
    bundle_roots = (str(task), str(layer))
    from_bundle = [path for path in report["loaded"] if path.startswith(bundle_roots)]
    assert len(from_bundle) > 200  # botocore, pydantic, powertools, the project's own modules
    for package in ("botocore", "pydantic", "aws_lambda_powertools", "shared", "lambdas"):
        assert any(f"/{package}/" in path for path in from_bundle), package
    assert [path for path in report["compiled"] if path.startswith(bundle_roots)] == []


def test_compileall_writes_unchecked_hash_bytecode_with_the_lambda_path(runtime_python: bundling.RuntimePython) -> None:
    command = bundling.compile_command(runtime_python, Path("/build/asset"), bundling.TASK_PATH)
    pairs = list(itertools.pairwise(command))
    assert command[0] == str(runtime_python.path)
    assert ("--invalidation-mode", "unchecked-hash") in pairs
    assert ("-d", "/var/task") in pairs
    assert command[-1] == "/build/asset"


def _fake_python(directory: Path, name: str, output: str, exit_code: int = 0) -> Path:
    script = directory / name
    script.write_text(f"#!/bin/sh\nprintf '%s\\n' '{output}'\nexit {exit_code}\n")
    script.chmod(0o755)
    return script


def test_the_runtime_python_is_found_by_running_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A name on PATH that fails (a pyenv shim of a version not selected) is passed over."""
    shim_dir, real_dir = tmp_path / "shims", tmp_path / "real"
    shim_dir.mkdir(), real_dir.mkdir()
    _fake_python(shim_dir, "python3.99", "pyenv: python3.99: command not found", exit_code=127)
    pyenv = tmp_path / "pyenv"
    installed = pyenv / "versions" / "3.99.2" / "bin"
    installed.mkdir(parents=True)
    _fake_python(installed, "python3.99", "cpython 3.99 deadbeef")
    monkeypatch.setenv("PATH", str(shim_dir))
    monkeypatch.setenv("PYENV_ROOT", str(pyenv))
    monkeypatch.setenv("UV_PYTHON_INSTALL_DIR", str(tmp_path / "no-uv"))
    monkeypatch.delenv(bundling.PYTHON_ENV_VAR, raising=False)
    found = bundling.find_runtime_python("3.99")
    assert found.path == installed / "python3.99"
    assert found.magic == bytes.fromhex("deadbeef")


def test_without_the_runtime_python_the_synth_fails_with_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setenv("PYENV_ROOT", str(tmp_path / "no-pyenv"))
    monkeypatch.setenv("UV_PYTHON_INSTALL_DIR", str(tmp_path / "no-uv"))
    monkeypatch.delenv(bundling.PYTHON_ENV_VAR, raising=False)
    monkeypatch.setattr(bundling, "PYTHON_VERSION", "3.99")
    with pytest.raises(bundling.BundlingError) as failure:
        bundling.project_code()
    message = str(failure.value)
    assert "\n" not in message
    assert "no Python 3.99 interpreter found" in message and "uv python install 3.99" in message
    with pytest.raises(bundling.BundlingError, match=r"no Python 3\.99"):
        bundling.dependency_code()


def test_an_explicit_interpreter_of_another_version_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(bundling.PYTHON_ENV_VAR, sys.executable)
    with pytest.raises(bundling.BundlingError, match=f"{bundling.PYTHON_ENV_VAR}=.* is not a working CPython 3\\.99"):
        bundling.find_runtime_python("3.99")


@pytest.mark.infra
def test_app_py_rejects_an_unknown_stage(tmp_path: Path) -> None:
    env = dict(os.environ, CDK_OUTDIR=str(tmp_path), CDK_CONTEXT_JSON=json.dumps({"stage": "qa"}))
    result = subprocess.run([sys.executable, "app.py"], cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    assert result.returncode == 1
    assert "Unknown stage 'qa'. Known stages: dev, prod." in result.stderr
