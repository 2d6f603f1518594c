"""Extract the identifiers of installed open-source packages as name lists for the identifier eval.

Walks a package's source with ``ast`` (nothing is imported) and writes ``names_<package>.json``
beside this file: the package's version and, at most ``MAX_NAMES`` of them, each distinct name with
the file it is first defined in (relative to site-packages). Order is relevance as a person editing
the code would meet it: module files, classes, top-level functions and assigned names first, then
methods, then private names; within each group, files in path order and names in source order.

    .venv/bin/python benchmarks/identifier_corpus/extract_names.py rich pydantic flask moto websockets
"""

from __future__ import annotations

import argparse
import ast
import importlib.metadata
import importlib.util
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
MAX_NAMES = 5000
SKIPPED_FOLDERS = {"tests", "test", "testing", "__pycache__", "vendored", "_vendor"}


def file_names(tree: ast.Module) -> tuple[list[str], list[str]]:
    """(module-level classes, functions and assigned names such as constants and type aliases; methods)."""
    top: list[str] = []
    methods: list[str] = []
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            top.append(node.name)
            methods.extend(item.name for item in node.body if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef))
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            top.append(node.name)
        elif isinstance(node, ast.Assign):
            top.extend(target.id for target in node.targets if isinstance(target, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            top.append(node.target.id)
    return top, methods


def package_names(package: str) -> list[dict[str, str]]:
    spec = importlib.util.find_spec(package)
    if spec is None or spec.origin is None:
        raise SystemExit(f"{package} is not installed")
    root = Path(spec.origin).parent
    site = root.parent
    groups: list[list[tuple[str, str]]] = [[], [], []]  # public first-level, public methods, private
    for source in sorted(root.rglob("*.py")):
        relative = source.relative_to(site).as_posix()
        if SKIPPED_FOLDERS & set(source.relative_to(root).parts[:-1]):
            continue
        try:
            tree = ast.parse(source.read_text(encoding="utf-8"))
        except (SyntaxError, UnicodeDecodeError):
            continue
        top, methods = file_names(tree)
        found = [(source.name, 0)] + [(name, 0) for name in top] + [(name, 1) for name in methods]
        for name, group in found:
            if name.startswith("__") and name.endswith("__"):
                continue  # __init__.py, dunder methods: not something a person names
            groups[2 if name.startswith("_") else group].append((name, relative))
    names: dict[str, str] = {}
    for group in groups:
        for name, path in group:
            names.setdefault(name, path)
    return [{"name": name, "path": path} for name, path in list(names.items())[:MAX_NAMES]]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("packages", nargs="+")
    args = parser.parse_args(argv)
    for package in args.packages:
        names = package_names(package)
        version = importlib.metadata.version(package)
        lines = ",\n".join(json.dumps(entry) for entry in names)  # one name a line: readable diffs
        text = f'{{"package": {json.dumps(package)}, "version": {json.dumps(version)}, "names": [\n{lines}\n]}}\n'
        target = HERE / f"names_{package}.json"
        target.write_text(text, encoding="utf-8")
        print(f"{package} {version}: {len(names)} names -> {target.name}", file=sys.stderr)


if __name__ == "__main__":
    main()
