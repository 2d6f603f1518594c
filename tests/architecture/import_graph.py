"""The project's import graph, read from the source with ``ast`` (nothing is imported), and the
layering rules it must keep (docs/architecture.md, "Layers").

Every import counts, also one inside a function or under ``TYPE_CHECKING``: a lazy import is still
a dependency, and a circle hidden behind one is still a circle.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# Top-level package -> its folder: the product, the client stub, the infrastructure, the benchmarks.
PACKAGES: dict[str, Path] = {
    "shared": ROOT / "shared",
    "lambdas": ROOT / "lambdas",
    "conductor_local": ROOT / "conductor_local",
    "infra": ROOT / "infra",
    "benchmarks": ROOT / "benchmarks",
    "voiceide_client": ROOT / "ios-client-stub" / "voiceide_client",
}
AWS_SDK = ("boto3", "botocore", "aws_lambda_powertools")
# The client stub's rooms, lowest first: each imports only the rooms below it (``__main__`` and the
# package itself aside), and of the conductor only its pure layers (``shared.wire``, ``shared.core``).
CLIENT = "voiceide_client"
CLIENT_ROOMS = ("voice", "tools", "connection", "rendering", "conversation", "companion", "command_line")


@dataclass
class ImportGraph:
    """Module -> the project modules it imports, and module -> the outside top-level names it imports."""

    internal: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))
    external: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))


def module_files(packages: Mapping[str, Path]) -> dict[str, Path]:
    """Dotted module name -> file, for every ``.py`` file under each package's folder."""
    found: dict[str, Path] = {}
    for package, folder in packages.items():
        for file in sorted(folder.rglob("*.py")):
            parts = [package, *file.relative_to(folder).with_suffix("").parts]
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = file
    return found


def read_graph(packages: Mapping[str, Path] = PACKAGES) -> ImportGraph:
    modules = module_files(packages)

    def owner(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    graph = ImportGraph()
    for module, file in modules.items():
        is_package = file.name == "__init__.py"
        for node in ast.walk(ast.parse(file.read_text(encoding="utf-8"), filename=str(file))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    here = module.split(".") if is_package else module.split(".")[:-1]
                    here = here[: len(here) - (node.level - 1)]
                    base = ".".join([*here, base] if base else here)
                named = [f"{base}.{alias.name}" for alias in node.names]
                targets = [name if name in modules else base for name in named]
            for target in targets:
                resolved = owner(target)
                if resolved is None:
                    graph.external[module].add(target.split(".")[0])
                elif resolved != module:
                    graph.internal[module].add(resolved)
        graph.internal.setdefault(module, set())
    return graph


def circles(graph: ImportGraph) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, without recursion)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    counter = 0
    for start in sorted(graph.internal):
        if start in index:
            continue
        work: list[tuple[str, Iterable[str]]] = [(start, iter(sorted(graph.internal[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.internal.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def _within(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def layer_violations(graph: ImportGraph) -> list[str]:
    """Every import that breaks a layering rule, as ``importer -> imported: rule``."""
    broken: list[str] = []
    for module, targets in sorted(graph.internal.items()):
        for target in sorted(targets):
            pure_target = _within(target, "shared.core") or _within(target, "shared.wire")
            if _within(module, "shared.core") and not pure_target:
                broken.append(f"{module} -> {target}: the core imports only itself and the wire formats")
            if _within(module, "shared.wire") and not _within(target, "shared.wire"):
                broken.append(f"{module} -> {target}: the wire formats import only each other")
            if _within(module, "shared.adapters") and _within(target, "shared.flows"):
                broken.append(f"{module} -> {target}: adapters never import flows")
            if _within(module, "shared") and not _within(target, "shared"):
                broken.append(f"{module} -> {target}: the shared library imports nothing outside it")
            if _within(module, "lambdas") and not (_within(target, "lambdas") or _within(target, "shared")):
                broken.append(f"{module} -> {target}: a Lambda bundle holds only lambdas/ and shared/")
            broken.extend(_client_violation(module, target))
    for module, names in sorted(graph.external.items()):
        pure = _within(module, "shared.core") or _within(module, "shared.wire")
        for name in sorted(names):
            if pure and name in AWS_SDK:
                broken.append(f"{module} -> {name}: the core and the wire formats never touch AWS")
    return broken


def _client_room(module: str) -> int | None:
    parts = module.split(".")
    if parts[0] != CLIENT or len(parts) < 2 or parts[1] not in CLIENT_ROOMS:
        return None
    return CLIENT_ROOMS.index(parts[1])


def _client_violation(module: str, target: str) -> list[str]:
    if not _within(module, CLIENT):
        return []
    if not (_within(target, CLIENT) or _within(target, "shared.wire") or _within(target, "shared.core")):
        return [f"{module} -> {target}: the client uses only the conductor's wire formats and core"]
    room, below = _client_room(module), _client_room(target)
    if room is not None and below is not None and below > room:
        return [f"{module} -> {target}: a room of the client imports only the rooms below it"]
    return []
