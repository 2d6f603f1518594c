"""One import path per name: a name of ``shared`` is imported from the module that defines it, never
through a module that only imports it (a re-export). Read from the source with ``ast``.

Both ways of reaching a name count: ``from shared.core.stream import claim_stream``, and
``stream.claim_stream`` after ``from shared.core import stream`` or ``import shared.core.stream``.
A submodule is its own module, so ``from shared.core import conductor`` is fine.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from tests.architecture.import_graph import PACKAGES, ROOT, module_files

# The package whose modules' names are checked, and every source that uses them: the product, the
# client stub, the infrastructure, the benchmarks and the tests.
DEFINING = "shared"
SOURCES: dict[str, Path] = {**PACKAGES, "tests": ROOT / "tests"}


def _bound(target: ast.expr) -> set[str]:
    return {node.id for node in ast.walk(target) if isinstance(node, ast.Name)}


@dataclass(frozen=True)
class ModuleNames:
    """What a module binds at its top level: the names it defines, and the modules it imports whole."""

    defined: frozenset[str]
    whole_imports: frozenset[str]


def module_names(tree: ast.Module) -> ModuleNames:
    """The top-level names a module defines (def, class, assignment, loop or ``with`` target), also
    under ``if``/``try``/``with``, never inside a function or class; and the names ``import x`` binds."""
    defined: set[str] = set()
    whole: set[str] = set()
    pending: list[ast.AST] = list(tree.body)
    while pending:
        node = pending.pop()
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            defined.add(node.name)
            continue
        if isinstance(node, ast.Assign):
            for target in node.targets:
                defined |= _bound(target)
        elif isinstance(node, ast.AnnAssign | ast.AugAssign | ast.For | ast.AsyncFor):
            defined |= _bound(node.target)
        elif isinstance(node, ast.With | ast.AsyncWith):
            for item in node.items:
                if item.optional_vars is not None:
                    defined |= _bound(item.optional_vars)
        elif isinstance(node, ast.Import):
            whole |= {(alias.asname or alias.name).split(".")[0] for alias in node.names}
        for block in ("body", "orelse", "finalbody", "handlers"):
            pending.extend(getattr(node, block, None) or [])
    return ModuleNames(frozenset(defined), frozenset(whole))


@dataclass
class _FileUses:
    """One walk over a file: its imports, the attributes it reads, and the names it binds otherwise."""

    imports: list[ast.Import | ast.ImportFrom] = field(default_factory=list)
    attributes: list[ast.Attribute] = field(default_factory=list)
    rebound: set[str] = field(default_factory=set)

    @classmethod
    def of(cls, tree: ast.Module) -> _FileUses:
        uses = cls()
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                uses.imports.append(node)
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load):
                uses.attributes.append(node)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                uses.rebound.add(node.id)
            elif isinstance(node, ast.arg):
                uses.rebound.add(node.arg)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                uses.rebound.add(node.name)
        return uses


def _parse(file: Path) -> ast.Module:
    return ast.parse(file.read_text(encoding="utf-8"), filename=str(file))


def _absolute(node: ast.ImportFrom, module: str, is_package: bool) -> str:
    if not node.level:
        return node.module or ""
    here = module.split(".") if is_package else module.split(".")[:-1]
    here = here[: len(here) - (node.level - 1)]
    return ".".join([*here, node.module] if node.module else here)


def _dotted(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute) and (base := _dotted(node.value)) is not None:
        return f"{base}.{node.attr}"
    return None


def borrowed_names(sources: Mapping[str, Path] = SOURCES, defining: str = DEFINING) -> Iterator[str]:
    """Every use of a name of ``defining``'s modules through a module that does not define it, as
    ``importer:line: module.name``. A module alias the file also binds otherwise (a parameter, a variable)
    is not followed."""
    files = module_files(sources)
    names = {module: module_names(_parse(file)) for module, file in files.items() if module.split(".")[0] == defining}

    def borrowed(module: str, name: str, *, whole_imports_too: bool = False) -> bool:
        if f"{module}.{name}" in names or name in names[module].defined:
            return False
        return not (whole_imports_too and name in names[module].whole_imports)

    for importer, file in files.items():  # one tree at a time: hundreds held at once slow the collector
        uses = _FileUses.of(_parse(file))
        modules: dict[str, str] = {}  # local name -> the module of ``defining`` it stands for
        for node in uses.imports:
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.asname is not None:
                        modules[alias.asname] = alias.name
                    else:
                        modules[alias.name.split(".")[0]] = alias.name.split(".")[0]
                continue
            source = _absolute(node, importer, file.name == "__init__.py")
            if source not in names:
                continue
            for alias in node.names:
                if f"{source}.{alias.name}" in names:
                    modules[alias.asname or alias.name] = f"{source}.{alias.name}"
                elif alias.name != "*" and borrowed(source, alias.name):
                    yield f"{importer}:{node.lineno}: {source}.{alias.name}"
        for local in uses.rebound:
            modules.pop(local, None)
        for attribute in uses.attributes:
            dotted = _dotted(attribute.value)
            if dotted is None or attribute.attr.startswith("__"):
                continue
            head, _, rest = dotted.partition(".")
            module = ".".join(filter(None, [modules.get(head), rest]))
            # a module the code imports whole (``service.time``) is reached to patch it, not re-exported
            if head in modules and module in names and borrowed(module, attribute.attr, whole_imports_too=True):
                yield f"{importer}:{attribute.lineno}: {module}.{attribute.attr}"
