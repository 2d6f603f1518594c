"""Docker-free packaging of the Lambda code.

Two assets, each built once per synth and shared by every function:

* the dependency layer: ``pip install --require-hashes`` of lambdas/requirements.lock (exact
  versions with their hashes, resolved for the Lambda's platform by ``make lock``) restricted to
  prebuilt CPython wheels for Linux/aarch64 (``--platform manylinux2014_aarch64
  --only-binary=:all:``), so compiled packages such as ``pydantic_core`` are the Lambda's binaries
  whatever the host is, and the same lock always gives the same files;
* the function code: the project's own ``shared/`` and ``lambdas/`` packages, without caches,
  tests or infrastructure code.

Both ship their ``.py`` sources with bytecode compiled by an interpreter of the Lambda runtime's
Python version (found by :func:`find_runtime_python`): Lambda's file system is read-only, so
bytecode missing from the bundle is compiled again on every cold start.

Both implement :class:`aws_cdk.ILocalBundling`. They never hand over to Docker: a failure raises
:class:`BundlingError`, which fails the synth.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jsii
from aws_cdk import AssetHashType, BundlingOptions, ILocalBundling
from aws_cdk import aws_lambda as lambda_

PROJECT_ROOT = Path(__file__).resolve().parent.parent
#: the runtime dependencies as ranges (kept in step with pyproject.toml); ``make lock`` resolves them
REQUIREMENTS = PROJECT_ROOT / "lambdas" / "requirements.txt"
#: what the layer is built from: every package pinned with ``==`` and the hashes of its files
LOCK = PROJECT_ROOT / "lambdas" / "requirements.lock"
PROJECT_PACKAGES: tuple[str, ...] = ("shared", "lambdas")

RUNTIME = lambda_.Runtime.PYTHON_3_13
PYTHON_VERSION = "3.13"
ARCHITECTURE = lambda_.Architecture.ARM_64
# Lambda's python3.13 runs on Amazon Linux 2023 (glibc 2.34): manylinux2014 (glibc 2.17) wheels
# run there, and so do manylinux_2_28 ones for packages that no longer publish 2014 wheels.
PIP_PLATFORMS: tuple[str, ...] = ("manylinux2014_aarch64", "manylinux_2_28_aarch64")

EXCLUDED_DIRS = frozenset({"__pycache__", "tests", "test", "infra", ".pytest_cache", ".mypy_cache"})
EXCLUDED_SUFFIXES = frozenset({".pyc", ".pyo"})
# lambdas/ holds the layer's inputs too: they belong to the layer, not to the function code.
DEPENDENCY_FILES = frozenset({REQUIREMENTS.name, LOCK.name})
# Bump when the layout the bundlers produce changes, so cached assets are rebuilt.
# 2: sources ship with unchecked-hash bytecode of the runtime's Python version.
BUNDLE_FORMAT = "2"

# Where Lambda mounts each asset: the bytecode records these paths for tracebacks.
LAYER_PATH = "/opt/python"
TASK_PATH = "/var/task"
#: an explicit interpreter of the runtime's version, tried before any other
PYTHON_ENV_VAR = "CONDUCTOR_BUNDLE_PYTHON"


#: the only file of a layer built without its dependencies (``-c skip_bundle_deps=true``)
SKIPPED_MARKER = "SKIPPED_DEPENDENCIES.txt"


class BundlingError(RuntimeError):
    """Local bundling failed; there is deliberately no Docker fallback."""


@dataclass(frozen=True)
class RuntimePython:
    """An interpreter of the Lambda runtime's Python version, and its bytecode magic number."""

    path: Path
    version: str
    magic: bytes


_PROBE = (
    "import importlib.util, sys; "
    "print(sys.implementation.name, '%d.%d' % sys.version_info[:2], importlib.util.MAGIC_NUMBER.hex())"
)


def probe_python(candidate: str | Path, version: str) -> RuntimePython | None:
    """``candidate`` if it runs and is CPython ``version`` (a pyenv shim of a version not selected
    exits with an error, so a name on PATH proves nothing until it has run)."""
    try:
        result = subprocess.run(
            [str(candidate), "-I", "-c", _PROBE], capture_output=True, text=True, timeout=60, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return None
    fields = result.stdout.split()
    if result.returncode != 0 or len(fields) != 3 or fields[:2] != ["cpython", version]:
        return None
    return RuntimePython(path=Path(candidate), version=version, magic=bytes.fromhex(fields[2]))


def _installed_pythons(version: str) -> Iterator[Path]:
    """Interpreters pyenv and uv install, newest patch release first."""
    pyenv_root = Path(os.environ.get("PYENV_ROOT") or Path.home() / ".pyenv")
    uv_root = Path(os.environ.get("UV_PYTHON_INSTALL_DIR") or Path.home() / ".local" / "share" / "uv" / "python")
    for pattern, root in (
        (f"{version}.*/bin/python{version}", pyenv_root / "versions"),
        (f"cpython-{version}.*/bin/python{version}", uv_root),
    ):
        found = [path for path in root.glob(pattern) if path.is_file()]
        yield from sorted(found, key=lambda path: _patch_level(path.parts[-3]), reverse=True)


def _patch_level(directory: str) -> tuple[int, ...]:
    release = directory.removeprefix("cpython-").split("-", 1)[0]
    return tuple(int(part) if part.isdigit() else -1 for part in release.split("."))


def _candidates(version: str) -> Iterable[str | Path]:
    if sys.version_info[:2] == tuple(int(part) for part in version.split(".")):
        yield sys.executable
    on_path = shutil.which(f"python{version}")
    if on_path:
        yield on_path
    yield from _installed_pythons(version)
    uv = shutil.which("uv")
    if uv:
        try:
            found = subprocess.run(
                [uv, "python", "find", "--no-project", version], capture_output=True, text=True, timeout=60, check=False
            )
        except (OSError, subprocess.SubprocessError):
            return
        if found.returncode == 0 and found.stdout.strip():
            yield found.stdout.strip()


def find_runtime_python(version: str = PYTHON_VERSION) -> RuntimePython:
    """An interpreter of ``version`` to compile the bundle's bytecode with; raises if none is found.

    ``$CONDUCTOR_BUNDLE_PYTHON`` wins when set; then this interpreter, ``python<version>`` on
    PATH, pyenv's and uv's installs.
    """
    explicit = os.environ.get(PYTHON_ENV_VAR)
    if explicit:
        chosen = probe_python(explicit, version)
        if chosen is None:
            raise BundlingError(f"{PYTHON_ENV_VAR}={explicit} is not a working CPython {version} interpreter")
        return chosen
    for candidate in _candidates(version):
        chosen = probe_python(candidate, version)
        if chosen is not None:
            return chosen
    raise BundlingError(
        f"no Python {version} interpreter found to precompile the Lambda bundle for the python{version} runtime: "
        f"install one (`uv python install {version}` or `pyenv install {version}`) "
        f"or set {PYTHON_ENV_VAR} to its path"
    )


def compile_command(python: RuntimePython, directory: Path, runtime_path: str) -> list[str]:
    """compileall over ``directory`` with the runtime's interpreter, as Lambda will load it.

    ``unchecked-hash``: the interpreter loads the ``.pyc`` without comparing it with its source.
    The default (timestamp) mode compares the source's mtime and size recorded in the ``.pyc``
    with the file's; zips and asset staging do not keep mtimes reliably (and Lambda's are not
    ours to trust), and a mismatch would silently compile again on every cold start, on a
    read-only file system where the result cannot even be cached. The sources never change
    after bundling, so checking them would only cost time. ``-I`` keeps PYTHONPYCACHEPREFIX and
    friends from sending the bytecode elsewhere; ``-d`` records the path the file has on Lambda.
    """
    return [
        str(python.path),
        "-I",
        "-m",
        "compileall",
        "-q",
        "-j",
        "0",
        "--invalidation-mode",
        "unchecked-hash",
        "-d",
        runtime_path,
        str(directory),
    ]


def precompile(python: RuntimePython, directory: Path, runtime_path: str) -> None:
    """Write ``__pycache__/*.cpython-<ver>.pyc`` next to every ``.py`` below ``directory``."""
    command = compile_command(python, directory, runtime_path)
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise BundlingError(
            f"Python {python.version} could not compile the Lambda bundle (exit {result.returncode}).\n"
            f"command: {' '.join(command)}\n{(result.stdout + result.stderr).strip()[-4000:]}"
        )


def pip_options(python_version: str = PYTHON_VERSION, platforms: Sequence[str] = PIP_PLATFORMS) -> list[str]:
    """What pip is told besides the lock and the target: CPython wheels of ``python_version`` for
    ``platforms`` only, each file checked against the lock's hashes, no bytecode (compiled later
    by the runtime's interpreter)."""
    options: list[str] = []
    for platform in platforms:
        options += ["--platform", platform]
    return [
        *options,
        "--implementation",
        "cp",
        "--python-version",
        python_version,
        "--only-binary=:all:",
        "--require-hashes",
        "--no-compile",
        "--disable-pip-version-check",
        "--no-input",
        "--quiet",
    ]


def pip_install_command(
    lock: Path,
    target: Path,
    python_version: str = PYTHON_VERSION,
    platforms: Sequence[str] = PIP_PLATFORMS,
) -> list[str]:
    """The pip command that installs the wheels ``lock`` pins, checked against its hashes, for
    ``platforms`` (the Lambda's Linux/aarch64 ones unless told otherwise) into ``target``.

    In hash-checking mode pip refuses a requirement not pinned with ``==`` and a hash, a file whose
    hash is not listed, and a dependency the lock does not name: the layer holds exactly the lock.
    """
    return [
        sys.executable,
        "-m",
        "pip",
        "install",
        *pip_options(python_version, platforms),
        "--target",
        str(target),
        "-r",
        str(lock),
    ]


def iter_package_files(root: Path = PROJECT_ROOT, packages: Sequence[str] = PROJECT_PACKAGES) -> Iterator[Path]:
    """Files of the project's own packages that belong in the bundle, in a stable order."""
    for package in packages:
        base = root / package
        if not (base / "__init__.py").is_file():
            raise BundlingError(f"{base} is not a Python package (no __init__.py)")
        for path in sorted(base.rglob("*")):
            relative = path.relative_to(root)
            if any(part in EXCLUDED_DIRS or part.startswith(".") for part in relative.parts):
                continue
            if path.is_file() and path.suffix not in EXCLUDED_SUFFIXES and path.name not in DEPENDENCY_FILES:
                yield path


def copy_project_packages(output_dir: Path, root: Path = PROJECT_ROOT) -> list[Path]:
    """Copy the project's packages below ``output_dir``; returns the copied destinations."""
    copied = []
    for source in iter_package_files(root):
        destination = output_dir / source.relative_to(root)
        destination.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, destination)
        copied.append(destination)
    return copied


def project_fingerprint(root: Path = PROJECT_ROOT, python_version: str = PYTHON_VERSION) -> str:
    """Hash of the bundled project files (paths and contents) and the bytecode's Python version."""
    digest = hashlib.sha256(f"{BUNDLE_FORMAT}\0{python_version}\0".encode())
    for path in iter_package_files(root):
        digest.update(path.relative_to(root).as_posix().encode())
        digest.update(b"\0")
        digest.update(path.read_bytes())
        digest.update(b"\0")
    return digest.hexdigest()


def dependencies_fingerprint(lock: Path, python_version: str, skip: bool) -> str:
    """Hash of everything the dependency layer is built from: the lock (exact versions and file
    hashes, so equal fingerprints mean equal packages), how pip installs it and the bytecode's
    Python version."""
    digest = hashlib.sha256()
    for part in (BUNDLE_FORMAT, python_version, *pip_options(python_version), "skip" if skip else "pip"):
        digest.update(part.encode())
        digest.update(b"\0")
    digest.update(lock.read_bytes())
    return digest.hexdigest()


def lock_digest(lock: Path = LOCK) -> str:
    """sha256 of the lock file, as ``sha256sum`` prints it."""
    return hashlib.sha256(lock.read_bytes()).hexdigest()


def _prune_caches(directory: Path) -> None:
    for cache in sorted(directory.rglob("__pycache__"), reverse=True):
        shutil.rmtree(cache, ignore_errors=True)


@jsii.implements(ILocalBundling)
class DependencyBundler:
    """Installs lambdas/requirements.lock into ``<output>/python`` (the layer layout), with bytecode."""

    def __init__(
        self,
        lock: Path = LOCK,
        python_version: str = PYTHON_VERSION,
        skip_install: bool = False,
        *,
        python: RuntimePython | None = None,
        platforms: Sequence[str] = PIP_PLATFORMS,
    ) -> None:
        self.lock = lock
        self.python_version = python_version
        self.skip_install = skip_install
        self.platforms = tuple(platforms)
        # Found now, so a machine without the runtime's Python fails before pip downloads anything.
        self.python = None if skip_install else python or find_runtime_python(python_version)

    def try_bundle(self, output_dir: str, *_args: Any, **_kwargs: Any) -> bool:
        target = Path(output_dir) / "python"
        target.mkdir(parents=True, exist_ok=True)
        if self.skip_install:
            # Synth-only builds (tests): an empty layer; the app refuses to let it be deployed.
            (target / SKIPPED_MARKER).write_text(
                "Built with -c skip_bundle_deps=true: dependencies were not installed.\n", encoding="utf-8"
            )
            return True
        command = pip_install_command(self.lock, target, self.python_version, self.platforms)
        result = subprocess.run(command, capture_output=True, text=True, check=False)
        if result.returncode != 0:
            raise BundlingError(
                f"pip could not build the Lambda dependency layer (exit {result.returncode}).\n"
                f"command: {' '.join(command)}\n{result.stderr.strip() or result.stdout.strip()}"
            )
        _prune_caches(target)
        assert self.python is not None
        precompile(self.python, target, LAYER_PATH)
        return True


@jsii.implements(ILocalBundling)
class ProjectBundler:
    """Copies the project's ``shared/`` and ``lambdas/`` packages into the output directory, with bytecode."""

    def __init__(self, root: Path = PROJECT_ROOT, *, python: RuntimePython | None = None) -> None:
        self.root = root
        self.python = python or find_runtime_python(PYTHON_VERSION)

    def try_bundle(self, output_dir: str, *_args: Any, **_kwargs: Any) -> bool:
        try:
            copied = copy_project_packages(Path(output_dir), self.root)
        except OSError as exc:
            raise BundlingError(f"could not copy the project packages: {exc}") from exc
        if not copied:
            raise BundlingError(f"no files found in {', '.join(PROJECT_PACKAGES)} under {self.root}")
        precompile(self.python, Path(output_dir), TASK_PATH)
        return True


def _bundling(local: ILocalBundling) -> BundlingOptions:
    # ``image`` is mandatory in BundlingOptions; the local bundlers always succeed or raise, so
    # the image is never pulled or run.
    return BundlingOptions(image=RUNTIME.bundling_image, local=local, command=["false"])


def dependency_code(skip_install: bool = False, lock: Path = LOCK) -> lambda_.AssetCode:
    """Asset code of the dependency layer."""
    if not lock.is_file():
        raise BundlingError(f"{lock} is missing: run `make lock` to resolve the Lambda dependencies")
    return lambda_.Code.from_asset(
        str(lock.parent),
        asset_hash_type=AssetHashType.CUSTOM,
        asset_hash=dependencies_fingerprint(lock, PYTHON_VERSION, skip_install),
        bundling=_bundling(DependencyBundler(lock, PYTHON_VERSION, skip_install)),
    )


def project_code(root: Path = PROJECT_ROOT) -> lambda_.AssetCode:
    """Asset code of the functions: the project's own packages."""
    return lambda_.Code.from_asset(
        str(root / "lambdas"),
        asset_hash_type=AssetHashType.CUSTOM,
        asset_hash=project_fingerprint(root),
        bundling=_bundling(ProjectBundler(root)),
    )
