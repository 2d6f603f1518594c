"""Docker-free packaging of the Lambda code.

Two assets, each built once per synth and shared by every function:

* the dependency layer: ``pip install`` of lambdas/requirements.txt restricted to prebuilt
  CPython wheels for Linux/aarch64 (``--platform manylinux2014_aarch64 --only-binary=:all:``),
  so compiled packages such as ``pydantic_core`` are the Lambda's binaries whatever the host is;
* the function code: the project's own ``shared/`` and ``lambdas/`` packages, without caches,
  tests or infrastructure code.

Both implement :class:`aws_cdk.ILocalBundling`. They never hand over to Docker: a failure raises
:class:`BundlingError`, which fails the synth.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import jsii
from aws_cdk import AssetHashType, BundlingOptions, ILocalBundling
from aws_cdk import aws_lambda as lambda_

PROJECT_ROOT = Path(__file__).resolve().parent.parent
REQUIREMENTS = PROJECT_ROOT / "lambdas" / "requirements.txt"
PROJECT_PACKAGES: tuple[str, ...] = ("shared", "lambdas")

RUNTIME = lambda_.Runtime.PYTHON_3_13
PYTHON_VERSION = "3.13"
ARCHITECTURE = lambda_.Architecture.ARM_64
# Lambda's python3.13 runs on Amazon Linux 2023 (glibc 2.34): manylinux2014 (glibc 2.17) wheels
# run there, and so do manylinux_2_28 ones for packages that no longer publish 2014 wheels.
PIP_PLATFORMS: tuple[str, ...] = ("manylinux2014_aarch64", "manylinux_2_28_aarch64")

EXCLUDED_DIRS = frozenset({"__pycache__", "tests", "test", "infra", ".pytest_cache", ".mypy_cache"})
EXCLUDED_SUFFIXES = frozenset({".pyc", ".pyo"})
# Bump when the layout the bundlers produce changes, so cached assets are rebuilt.
BUNDLE_FORMAT = "1"


class BundlingError(RuntimeError):
    """Local bundling failed; there is deliberately no Docker fallback."""


def pip_install_command(requirements: Path, target: Path, python_version: str = PYTHON_VERSION) -> list[str]:
    """The pip command that installs Linux/aarch64 CPython wheels of ``requirements`` into ``target``."""
    command = [sys.executable, "-m", "pip", "install"]
    for platform in PIP_PLATFORMS:
        command += ["--platform", platform]
    command += [
        "--implementation",
        "cp",
        "--python-version",
        python_version,
        "--only-binary=:all:",
        "--no-compile",
        "--disable-pip-version-check",
        "--no-input",
        "--quiet",
        "--target",
        str(target),
        "-r",
        str(requirements),
    ]
    return command


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
            if path.is_file() and path.suffix not in EXCLUDED_SUFFIXES and path.name != "requirements.txt":
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


def project_fingerprint(root: Path = PROJECT_ROOT) -> str:
    """Hash of the bundled project files (paths and contents)."""
    digest = hashlib.sha256(BUNDLE_FORMAT.encode())
    for path in iter_package_files(root):
        digest.update(path.relative_to(root).as_posix().encode())
        digest.update(b"\0")
        digest.update(path.read_bytes())
        digest.update(b"\0")
    return digest.hexdigest()


def dependencies_fingerprint(requirements: Path, python_version: str, skip: bool) -> str:
    """Hash of everything the dependency layer is built from."""
    digest = hashlib.sha256()
    for part in (BUNDLE_FORMAT, python_version, *PIP_PLATFORMS, "skip" if skip else "pip"):
        digest.update(part.encode())
        digest.update(b"\0")
    digest.update(requirements.read_bytes())
    return digest.hexdigest()


def _prune_caches(directory: Path) -> None:
    for cache in sorted(directory.rglob("__pycache__"), reverse=True):
        shutil.rmtree(cache, ignore_errors=True)


@jsii.implements(ILocalBundling)
class DependencyBundler:
    """Installs lambdas/requirements.txt into ``<output>/python`` (the layer layout)."""

    def __init__(
        self, requirements: Path = REQUIREMENTS, python_version: str = PYTHON_VERSION, skip_install: bool = False
    ) -> None:
        self.requirements = requirements
        self.python_version = python_version
        self.skip_install = skip_install

    def try_bundle(self, output_dir: str, *_args: Any, **_kwargs: Any) -> bool:
        target = Path(output_dir) / "python"
        target.mkdir(parents=True, exist_ok=True)
        if self.skip_install:
            # Synth-only builds (tests): an empty layer, never deployed as is.
            (target / "SKIPPED_DEPENDENCIES.txt").write_text(
                "Built with -c skip_bundle_deps=true: dependencies were not installed.\n", encoding="utf-8"
            )
            return True
        command = pip_install_command(self.requirements, target, self.python_version)
        result = subprocess.run(command, capture_output=True, text=True, check=False)
        if result.returncode != 0:
            raise BundlingError(
                f"pip could not build the Lambda dependency layer (exit {result.returncode}).\n"
                f"command: {' '.join(command)}\n{result.stderr.strip() or result.stdout.strip()}"
            )
        _prune_caches(target)
        return True


@jsii.implements(ILocalBundling)
class ProjectBundler:
    """Copies the project's ``shared/`` and ``lambdas/`` packages into the output directory."""

    def __init__(self, root: Path = PROJECT_ROOT) -> None:
        self.root = root

    def try_bundle(self, output_dir: str, *_args: Any, **_kwargs: Any) -> bool:
        try:
            copied = copy_project_packages(Path(output_dir), self.root)
        except OSError as exc:
            raise BundlingError(f"could not copy the project packages: {exc}") from exc
        if not copied:
            raise BundlingError(f"no files found in {', '.join(PROJECT_PACKAGES)} under {self.root}")
        return True


def _bundling(local: ILocalBundling) -> BundlingOptions:
    # ``image`` is mandatory in BundlingOptions; the local bundlers always succeed or raise, so
    # the image is never pulled or run.
    return BundlingOptions(image=RUNTIME.bundling_image, local=local, command=["false"])


def dependency_code(skip_install: bool = False, requirements: Path = REQUIREMENTS) -> lambda_.AssetCode:
    """Asset code of the dependency layer."""
    return lambda_.Code.from_asset(
        str(requirements.parent),
        asset_hash_type=AssetHashType.CUSTOM,
        asset_hash=dependencies_fingerprint(requirements, PYTHON_VERSION, skip_install),
        bundling=_bundling(DependencyBundler(requirements, PYTHON_VERSION, skip_install)),
    )


def project_code(root: Path = PROJECT_ROOT) -> lambda_.AssetCode:
    """Asset code of the functions: the project's own packages."""
    return lambda_.Code.from_asset(
        str(root / "lambdas"),
        asset_hash_type=AssetHashType.CUSTOM,
        asset_hash=project_fingerprint(root),
        bundling=_bundling(ProjectBundler(root)),
    )
