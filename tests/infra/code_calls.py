"""The AWS operations each Lambda handler can call, read from the code with ``ast``.

How it finds them:

* Clients: every ``boto3.client("<service>")`` in ``shared/`` and ``lambdas/`` is handed to one
  adapter class where it is built (``SessionStore(client, ...)``, ``ConnectionGateway(factory)``,
  ...). The adapter's methods call operations on it (``self._client.put_item``): a method name
  that is one of the service's operations in botocore's model is one operation.
* Libraries that call AWS themselves (Powertools Parameters) are listed in ``LIBRARY_CALLS``.
* Reach: from a handler function, every function it calls or names (callbacks), transitively.
  ``self.<attribute>.<method>`` and ``<local>.<method>`` resolve through the annotated or
  constructed type (with its subclasses' overrides; a Protocol counts as unknown); a call on an
  object of unknown type resolves to every method of that name in the code (an over-approximation),
  a mere read of one to every property of that name. Module bodies of the modules a handler imports
  run at import, so they are reached too, and with them the functions they register with a
  Powertools event handler (``@app.get("/sessions")`` on ``app = APIGatewayHttpResolver()``): the
  resolver may call any of them. What is no code's: a name bound only to what a regular expression
  returns (``if match := PATTERN.match(line): match.end()``) runs no method of the code, and an
  adapter's operation on its client (``self._client(endpoint).delete_connection(...)``) is the
  operation, not a method of the code of that name. Not seen: a method of an object of unknown type
  passed along without being called (``submit(thing.method)``), ``getattr`` with a computed name.

Nothing here imports the code it reads.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cache, cached_property
from pathlib import Path

import botocore
import botocore.session

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("shared", "lambdas")
MODULE_BODY = "<module>"

# Calls into libraries that make AWS requests with the function's role: (module, function) -> (service, operation).
LIBRARY_CALLS: dict[tuple[str, str], tuple[str, str]] = {
    ("aws_lambda_powertools.utilities.parameters", "get_secret"): ("secretsmanager", "GetSecretValue"),
}
# Modules whose other functions would call AWS too: a call not in LIBRARY_CALLS fails the analysis.
LIBRARY_MODULES = frozenset(module for module, _ in LIBRARY_CALLS)
# DynamoDB transaction items (dict keys of ``TransactItems``) -> the operation each is authorized as.
TRANSACT_ITEMS: dict[str, str] = {
    "Put": "PutItem",
    "Update": "UpdateItem",
    "Delete": "DeleteItem",
    "ConditionCheck": "ConditionCheckItem",
    "Get": "GetItem",
}
TRANSACTIONS = frozenset({"TransactWriteItems", "TransactGetItems"})
# Event handlers whose decorators register a function to be called by the resolver (``app.resolve``).
RESOLVER_MODULES = ("aws_lambda_powertools.event_handler",)
# The regular expressions module: what it and its compiled patterns return is never the code's.
REGEX_MODULE = "re"

Key = tuple[str, str]  # (module, qualified name of a function, or MODULE_BODY)
Operation = tuple[str, str]  # (botocore service name, operation name)


class AnalysisError(AssertionError):
    """The code does something this analysis cannot attribute: extend it rather than guess."""


@cache
def operations(service: str) -> dict[str, str]:
    """botocore's operations of ``service``: python method name -> operation name."""
    model = botocore.session.get_session().get_service_model(service)
    return {botocore.xform_name(name): name for name in model.operation_names}


@cache
def signing_name(service: str) -> str:
    """The IAM service prefix of a botocore service (``bedrock-runtime`` signs as ``bedrock``)."""
    return botocore.session.get_session().get_service_model(service).signing_name


@dataclass
class Module:
    name: str
    tree: ast.Module
    imports: dict[str, str] = field(default_factory=dict)  # local name -> "module" or "module:name"


@dataclass
class Function:
    key: Key
    node: ast.AST
    cls: str | None  # qualified name of the class whose method this is

    @cached_property
    def own_nodes(self) -> list[ast.AST]:
        return list(_own_nodes(self.node))

    @cached_property
    def local_types(self) -> dict[str, set[str]]:
        return _local_types(self.node)


def _module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _annotation_names(node: ast.AST | None) -> set[str]:
    """Class names an annotation mentions (``SessionStore | None`` -> {"SessionStore"})."""
    if node is None:
        return set()
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        try:
            node = ast.parse(node.value, mode="eval").body
        except SyntaxError:
            return set()
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)} | {
        n.attr for n in ast.walk(node) if isinstance(n, ast.Attribute)
    }


class Code:
    """Every module of ``shared/`` and ``lambdas/``, indexed by function, class and method name."""

    def __init__(self, root: Path = ROOT) -> None:
        self.root = root
        self.modules: dict[str, Module] = {}
        self.functions: dict[Key, Function] = {}
        self.classes: dict[tuple[str, str], ast.ClassDef] = {}
        self.methods_named: dict[str, list[Key]] = {}
        self.attribute_types: dict[tuple[str, str], dict[str, set[tuple[str, str]]]] = {}
        self._derived: dict[tuple[str, str], set[tuple[str, str]]] = {}  # class -> its direct subclasses
        for package in PACKAGES:
            for path in sorted((root / package).rglob("*.py")):
                module = Module(_module_name(root, path), ast.parse(path.read_text(encoding="utf-8")))
                self.modules[module.name] = module
        for module in self.modules.values():
            self._index(module)
        for (module_name, class_name), node in self.classes.items():
            self.attribute_types[(module_name, class_name)] = self._attribute_types(module_name, node)
            for base in node.bases:
                for base_name in _annotation_names(base):
                    base_cls = self.resolve_class(module_name, base_name)
                    if base_cls is not None and base_cls != (module_name, class_name):
                        self._derived.setdefault(base_cls, set()).add((module_name, class_name))

    # --- indexing ----------------------------------------------------------------------------

    def _index(self, module: Module) -> None:
        for node in ast.walk(module.tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    top = alias.name.split(".")[0]
                    module.imports[alias.asname or top] = alias.name if alias.asname else top
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                for alias in node.names:
                    module.imports[alias.asname or alias.name] = f"{node.module}:{alias.name}"
        self.functions[(module.name, MODULE_BODY)] = Function((module.name, MODULE_BODY), module.tree, None)
        self._index_body(module.name, module.tree.body, prefix="", cls=None)

    def _index_body(self, module: str, body: list[ast.stmt], prefix: str, cls: str | None) -> None:
        for node in body:
            if isinstance(node, ast.ClassDef):
                qualified = f"{prefix}{node.name}"
                self.classes[(module, qualified)] = node
                self._index_body(module, node.body, f"{qualified}.", qualified)
            elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                key = (module, f"{prefix}{node.name}")
                self.functions[key] = Function(key, node, cls)
                if cls is not None:
                    self.methods_named.setdefault(node.name, []).append(key)
                self._index_body(module, node.body, f"{prefix}{node.name}.", None)

    def _attribute_types(self, module: str, node: ast.ClassDef) -> dict[str, set[tuple[str, str]]]:
        """``self.<attribute>`` -> the classes it holds: from dataclass fields and class-level
        annotations, ``self.x: T = ...``, ``self.x = param`` (the parameter's annotation) and
        ``self.x = T(...)``."""
        found: dict[str, set[tuple[str, str]]] = {}

        def note(attribute: str, names: set[str]) -> None:
            classes = {c for name in names if (c := self.resolve_class(module, name)) is not None}
            if classes:
                found.setdefault(attribute, set()).update(classes)

        for statement in node.body:
            if isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name):
                note(statement.target.id, _annotation_names(statement.annotation))
        for method in node.body:
            if not isinstance(method, ast.FunctionDef):
                continue
            params = {a.arg: a.annotation for a in (*method.args.args, *method.args.kwonlyargs)}
            for statement in ast.walk(method):
                targets: list[ast.expr] = []
                value: ast.expr | None = None
                if isinstance(statement, ast.Assign):
                    targets, value = statement.targets, statement.value
                elif isinstance(statement, ast.AnnAssign):
                    targets, value = [statement.target], statement.value
                    if _is_self_attribute(statement.target):
                        note(statement.target.attr, _annotation_names(statement.annotation))  # type: ignore[union-attr]
                for target in targets:
                    if not _is_self_attribute(target):
                        continue
                    attribute = target.attr  # type: ignore[attr-defined]
                    if isinstance(value, ast.Name) and value.id in params:
                        note(attribute, _annotation_names(params[value.id]))
                    elif isinstance(value, ast.Call):
                        note(attribute, _annotation_names(value.func))
        return found

    # --- resolution --------------------------------------------------------------------------

    def resolve_class(self, module: str, name: str) -> tuple[str, str] | None:
        if (module, name) in self.classes:
            return (module, name)
        target = self.modules[module].imports.get(name, "") if module in self.modules else ""
        if ":" in target:
            source, imported = target.split(":", 1)
            if (source, imported) in self.classes:
                return (source, imported)
        return None

    def resolve_name(self, module: str, scope: str, name: str) -> list[Key]:
        """A bare name used in ``scope`` of ``module``: a nested or module-level function, a class
        (its ``__init__``), or an imported one."""
        parts = scope.split(".") if scope != MODULE_BODY else []
        for depth in range(len(parts), -1, -1):
            if depth and (module, ".".join(parts[:depth])) in self.classes:
                continue  # a class body is no enclosing scope of its methods
            key = (module, ".".join([*parts[:depth], name]))
            if key in self.functions and key[1] != MODULE_BODY:
                return [key]
        if (cls := self.resolve_class(module, name)) is not None:
            return self._constructor(cls)
        target = self.modules[module].imports.get(name, "")
        if ":" in target:
            source, imported = target.split(":", 1)
            if (source, imported) in self.functions:
                return [(source, imported)]
        return []

    def _constructor(self, cls: tuple[str, str]) -> list[Key]:
        module, name = cls
        keys = [(module, f"{name}.{method}") for method in ("__init__", "__post_init__")]
        return [key for key in keys if key in self.functions]

    def with_bases(self, cls: tuple[str, str]) -> set[tuple[str, str]]:
        """``cls`` and the classes of the code it derives from, at any depth."""
        found: set[tuple[str, str]] = set()
        todo = [cls]
        while todo:
            current = todo.pop()
            if current in found or current not in self.classes:
                continue
            found.add(current)
            for base in self.classes[current].bases:
                for name in _annotation_names(base):
                    if (resolved := self.resolve_class(current[0], name)) is not None:
                        todo.append(resolved)
        return found

    def subclasses(self, cls: tuple[str, str]) -> set[tuple[str, str]]:
        """Every class of the code derived from ``cls``, at any depth."""
        found: set[tuple[str, str]] = set()
        todo = [cls]
        while todo:
            for sub in self._derived.get(todo.pop(), set()) - found:
                found.add(sub)
                todo.append(sub)
        return found

    def resolve_method(self, cls: tuple[str, str], method: str) -> list[Key] | None:
        """``method`` of ``cls`` (or of a base class in the code), with its overrides in subclasses;
        None when the class has none (a Protocol, or an inherited library method)."""
        module, name = cls
        key = (module, f"{name}.{method}")
        if key in self.functions and not _is_protocol(self.classes[cls]):
            overrides = [(m, f"{n}.{method}") for m, n in self.subclasses(cls)]
            return [key, *(k for k in overrides if k in self.functions)]
        for base in self.classes[cls].bases:
            for base_name in _annotation_names(base):
                if (base_cls := self.resolve_class(module, base_name)) is not None and base_cls != cls:
                    found = self.resolve_method(base_cls, method)
                    if found:
                        return found
        return None

    def resolve_attribute(self, function: Function, node: ast.Attribute, *, called: bool = True) -> list[Key]:
        """What ``<value>.<attr>`` runs. Untyped: every method of that name when it is called,
        every property of that name when it is only read (a field read runs nothing)."""
        module = function.key[0]
        value = node.value
        if _is_super(value):
            if function.cls is None:
                return []
            bases = self.classes[(module, function.cls)].bases
            return [
                key
                for base in bases
                for name in _annotation_names(base)
                if (cls := self.resolve_class(module, name)) is not None
                for key in self.resolve_method(cls, node.attr) or []
            ]
        if called and self.is_client_operation(function, node):
            return []
        if isinstance(value, ast.Name) and value.id in self.library_locals(function):
            return []  # a match or pattern of the regex module: its methods are none of the code's
        if isinstance(value, ast.Name) and self._is_regex_constant(module, value.id):
            return []  # a module's compiled pattern (``PATTERN.match(text)``): the regex module's
        if isinstance(value, ast.Name):
            target = self.modules[module].imports.get(value.id, "")
            if target and ":" in target:  # from package import module
                source = target.replace(":", ".")
                if source in self.modules:
                    return self.resolve_name(source, MODULE_BODY, node.attr)
            elif target in self.modules:
                return self.resolve_name(target, MODULE_BODY, node.attr)
            elif target and value.id not in function.local_types:
                return []  # a function of a library module (``re.match``, ``functools.partial``): none of the code's
            if value.id in ("self", "cls") and function.cls is not None:
                found = self.resolve_method((module, function.cls), node.attr)
                if found is not None:
                    return found
        types: set[tuple[str, str]] = set()
        if _is_self_attribute(value) and function.cls is not None:
            types = self.attribute_types.get((module, function.cls), {}).get(value.attr, set())  # type: ignore[attr-defined]
        elif isinstance(value, ast.Name):
            names = function.local_types.get(value.id, set())
            types = {cls for name in names if (cls := self.resolve_class(module, name)) is not None}
        resolved = [self.resolve_method(cls, node.attr) for cls in types]
        if types and all(found is not None for found in resolved):
            return [key for found in resolved for key in found or []]
        methods = self.methods_named.get(node.attr, [])
        return list(methods) if called else [key for key in methods if _is_property(self.functions[key].node)]

    def references(self, function: Function) -> Iterator[Key]:
        """Every function ``function`` calls or names (a module body: also those it registers)."""
        if function.key[1] == MODULE_BODY:
            yield from self.registered(function.key[0])
        called = {id(node.func) for node in function.own_nodes if isinstance(node, ast.Call)}
        for node in function.own_nodes:
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
                if node.id not in function.local_types:  # a local variable is no function
                    yield from self.resolve_name(function.key[0], function.key[1], node.id)
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load):
                yield from self.resolve_attribute(function, node, called=id(node) in called)

    def registered(self, module: str) -> list[Key]:
        """The module-level functions of ``module`` decorated by a method of a resolver the module
        builds (``app = APIGatewayHttpResolver(...)``; ``@app.get(...)``, ``@app.not_found``)."""
        imports = self.modules[module].imports
        resolvers = set()
        for statement in self.modules[module].tree.body:
            if isinstance(statement, ast.Assign) and isinstance(statement.value, ast.Call):
                callee = statement.value.func
                name = callee.id if isinstance(callee, ast.Name) else None
                if name and imports.get(name, "").startswith(RESOLVER_MODULES):
                    resolvers |= {t.id for t in statement.targets if isinstance(t, ast.Name)}
        found = []
        for statement in self.modules[module].tree.body:
            if isinstance(statement, ast.FunctionDef | ast.AsyncFunctionDef) and any(
                _decorator_root(d) in resolvers for d in statement.decorator_list
            ):
                found.append((module, statement.name))
        return found

    @cached_property
    def regex_constants(self) -> dict[str, set[str]]:
        """Per module: its module-level names bound to a compiled pattern (``X = re.compile(...)``)."""
        found: dict[str, set[str]] = {}
        for name, module in self.modules.items():
            for statement in module.tree.body:
                if isinstance(statement, ast.Assign) and self._is_regex_call(name, statement.value, constants=set()):
                    found.setdefault(name, set()).update(t.id for t in statement.targets if isinstance(t, ast.Name))
                elif (
                    isinstance(statement, ast.AnnAssign)
                    and isinstance(statement.target, ast.Name)
                    and statement.value is not None
                    and self._is_regex_call(name, statement.value, constants=set())
                ):
                    found.setdefault(name, set()).add(statement.target.id)
        return found

    def _is_regex_call(self, module: str, node: ast.AST, constants: set[str] | None = None) -> bool:
        """``re.<function>(...)`` or ``<compiled pattern>.<method>(...)``: a value of the regex module."""
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            return False
        receiver = node.func.value
        if not isinstance(receiver, ast.Name):
            return False
        imports = self.modules[module].imports
        if imports.get(receiver.id) == REGEX_MODULE:
            return True
        if constants is None:
            constants = self.regex_constants.get(module, set())
            target = imports.get(receiver.id, "")
            if ":" in target:  # a pattern imported from another module of the code
                source, imported = target.split(":", 1)
                if imported in self.regex_constants.get(source, set()):
                    return True
        return receiver.id in constants

    def _is_regex_constant(self, module: str, name: str) -> bool:
        """``name`` is a compiled pattern of this module, or one imported from another of the code."""
        if name in self.regex_constants.get(module, set()):
            return True
        target = self.modules[module].imports.get(name, "")
        if ":" in target:
            source, imported = target.split(":", 1)
            return imported in self.regex_constants.get(source, set())
        return False

    def library_locals(self, function: Function) -> set[str]:
        """Local names of ``function`` bound only to values of the regex module (matches, patterns):
        every binding of the name assigns one (``=``, ``:=``, ``for``), and it is no parameter."""
        module = function.key[0]
        regex_targets: set[int] = set()
        for node in function.own_nodes:
            if isinstance(node, ast.NamedExpr | ast.Assign | ast.For | ast.comprehension):
                value = node.iter if isinstance(node, ast.For | ast.comprehension) else node.value
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                if self._is_regex_call(module, value):
                    regex_targets |= {id(t) for t in targets if isinstance(t, ast.Name)}
        candidates: set[str] = set()
        other: set[str] = set()
        if isinstance(function.node, ast.FunctionDef | ast.AsyncFunctionDef):
            args = function.node.args
            every = (*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg)
            other |= {a.arg for a in every if a is not None}
        for node in function.own_nodes:
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store | ast.Del):
                (candidates if id(node) in regex_targets else other).add(node.id)
        return candidates - other

    @cached_property
    def adapter_services(self) -> dict[tuple[str, str], set[str]]:
        """The classes boto3 clients are handed to, and the services of those clients."""
        found: dict[tuple[str, str], set[str]] = {}
        for use in client_uses(self):
            found.setdefault(use.adapter, set()).add(use.service)
        return found

    def is_client_operation(self, function: Function, node: ast.Attribute) -> bool:
        """``self.<attr>.<op>`` or ``self.<attr>(...).<op>`` in an adapter, ``op`` an operation of its
        client's service: the client call itself (``adapter_operations`` counts it)."""
        if function.cls is None:
            return False
        cls = (function.key[0], function.cls)
        services = {
            service
            for adapter in (cls, *self.subclasses(cls))  # a base class's methods run on the adapter's client
            for service in self.adapter_services.get(adapter, set())
        }
        receiver = node.value.func if isinstance(node.value, ast.Call) else node.value
        return _is_self_attribute(receiver) and any(node.attr in operations(service) for service in services)

    def reachable(self, entry: Key) -> set[Key]:
        """Every function ``entry`` can run, with the module bodies of the modules it imports."""
        roots = [entry, *[(m, MODULE_BODY) for m in self.imported_modules(entry[0])]]
        seen: set[Key] = set()
        todo = list(roots)
        while todo:
            key = todo.pop()
            if key in seen:
                continue
            seen.add(key)
            todo.extend(self.references(self.functions[key]))
        return seen

    def imported_modules(self, module: str) -> set[str]:
        found: set[str] = set()
        todo = [module]
        while todo:
            name = todo.pop()
            if name in found or name not in self.modules:
                continue
            found.add(name)
            for target in self.modules[name].imports.values():
                source, _, imported = target.partition(":")
                todo.extend(candidate for candidate in (source, f"{source}.{imported}") if candidate in self.modules)
        return found


def _decorator_root(node: ast.AST) -> str | None:
    """The name a decorator starts from (``app`` of ``@app.get("/x")`` and of ``@app.not_found``)."""
    if isinstance(node, ast.Call):
        node = node.func
    while isinstance(node, ast.Attribute):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def _is_self_attribute(node: ast.AST) -> bool:
    return isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self"


def _local_types(node: ast.AST) -> dict[str, set[str]]:
    """The local names of a function (parameters and assigned names) -> the class names their
    annotation or constructor call mentions (empty when unknown)."""
    if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
        return {}
    args = node.args
    found: dict[str, set[str]] = {
        a.arg: _annotation_names(a.annotation)
        for a in (*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg)
        if a is not None
    }
    for child in _own_nodes(node):
        if isinstance(child, ast.Name) and isinstance(child.ctx, ast.Store):
            found.setdefault(child.id, set())
        elif isinstance(child, ast.AnnAssign) and isinstance(child.target, ast.Name):
            found.setdefault(child.target.id, set()).update(_annotation_names(child.annotation))
        elif isinstance(child, ast.Assign) and isinstance(child.value, ast.Call):
            for target in child.targets:
                if isinstance(target, ast.Name):
                    found.setdefault(target.id, set()).update(_annotation_names(child.value.func))
    return found


def _is_super(node: ast.AST) -> bool:
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "super"


def _is_property(node: ast.AST) -> bool:
    decorators = node.decorator_list if isinstance(node, ast.FunctionDef) else []
    return any(_annotation_names(d) & {"property", "cached_property"} for d in decorators)


def _is_protocol(node: ast.ClassDef) -> bool:
    return any("Protocol" in _annotation_names(base) for base in node.bases)


def _own_nodes(node: ast.AST) -> Iterator[ast.AST]:
    """The nodes of a function (or module) body, without those of the functions and classes it
    defines (they are functions of their own, reached when named)."""
    children = node.body if isinstance(node, ast.Module) else [*ast.iter_child_nodes(node)]
    for child in children:
        if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            # A nested function's decorators and defaults run here; its body does not.
            yield from (n for d in child.decorator_list for n in ast.walk(d))
            continue
        yield child
        yield from _own_nodes(child)


# --- clients and the operations called on them --------------------------------------------------


@dataclass(frozen=True)
class ClientUse:
    service: str
    adapter: tuple[str, str]  # the class the client is handed to
    created_in: Key


def _boto3_client_service(node: ast.AST) -> str | None:
    """The service of a client built here: ``boto3.client("x")``, or the handlers' own factory
    ``aws_client("x")`` (``lambdas.runtime``: a botocore client built as boto3 builds it)."""
    boto3_client = (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "client"
        and isinstance(node.func.value, ast.Name)
        and node.func.value.id == "boto3"
    )
    own_factory = isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "aws_client"
    if boto3_client or own_factory:
        assert isinstance(node, ast.Call)
        if not node.args or not isinstance(node.args[0], ast.Constant) or not isinstance(node.args[0].value, str):
            raise AnalysisError("boto3.client() with a service name that is not a literal")
        return node.args[0].value
    return None


def client_uses(code: Code) -> list[ClientUse]:
    """Every ``boto3.client(...)`` in the code and the adapter class it is handed to."""
    uses: list[ClientUse] = []
    for function in code.functions.values():
        if function.key[1] == MODULE_BODY:
            if any(_boto3_client_service(n) for n in _own_nodes(function.node)):
                raise AnalysisError(f"{function.key[0]} builds a boto3 client at import: hand it to an adapter")
            continue
        for node in _own_nodes(function.node):
            boto3_attribute = isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
            if boto3_attribute and node.value.id == "boto3" and node.attr != "client":  # type: ignore[attr-defined]
                raise AnalysisError(f"{function.key}: boto3.{node.attr} is not analysed (use boto3.client)")  # type: ignore[attr-defined]
            service = _boto3_client_service(node)
            if service is None:
                continue
            uses.append(ClientUse(service, _adapter_of(code, function, node), function.key))
    return uses


def _adapter_of(code: Code, function: Function, creation: ast.Call) -> tuple[str, str]:
    """The class a client reaches: built with the client call itself, a name bound to it, or the
    nested function that builds it (a factory), in the outermost function around it."""
    module, qualname = function.key
    outer = code.functions[(module, qualname.split(".")[0])]
    carriers: set[str] = set()
    if qualname != outer.key[1]:
        carriers.add(qualname.split(".")[-1])  # a factory function that returns the client
    for node in ast.walk(outer.node):
        if isinstance(node, ast.Assign) and node.value is creation:
            carriers |= {t.id for t in node.targets if isinstance(t, ast.Name)}
    adapters = set()
    for node in ast.walk(outer.node):
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name):
            continue
        cls = code.resolve_class(module, node.func.id)
        if cls is None:
            continue
        arguments = [*node.args, *(k.value for k in node.keywords)]
        if any(a is creation or (isinstance(a, ast.Name) and a.id in carriers) for a in arguments):
            adapters.add(cls)
    if len(adapters) != 1:
        raise AnalysisError(f"cannot tell which class uses the client built in {function.key}: {sorted(adapters)}")
    return adapters.pop()


def adapter_operations(code: Code, use: ClientUse) -> dict[Key, set[Operation]]:
    """Per method of the adapter: the operations it calls on the client (``self.<attr>.<op>(...)``
    or ``self.<attr>(...).<op>(...)``), transaction items expanded to what they are authorized as."""
    names = operations(use.service)
    module = use.adapter[0]
    family = code.with_bases(use.adapter)  # methods inherited from a base class use the client too
    found: dict[Key, set[Operation]] = {}
    for key, function in code.functions.items():
        if function.cls is None or (key[0], function.cls) not in family:
            continue
        for node in ast.walk(function.node):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
                continue
            receiver = node.func.value.func if isinstance(node.func.value, ast.Call) else node.func.value
            if node.func.attr in names and _is_self_attribute(receiver):
                found.setdefault(key, set()).add((use.service, names[node.func.attr]))
    if not found:
        raise AnalysisError(f"{use.adapter} gets a {use.service} client but calls none of its operations")
    items = _transaction_items(code.modules[module].tree)
    for called in found.values():
        for service, operation in list(called):
            if operation in TRANSACTIONS:
                called.discard((service, operation))
                called |= {(service, TRANSACT_ITEMS[item]) for item in items}
    return found


def _transaction_items(tree: ast.Module) -> set[str]:
    """Transaction item kinds a module builds (dict keys such as ``"Put"``)."""
    return {
        key.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Dict)
        for key in node.keys
        if isinstance(key, ast.Constant) and key.value in TRANSACT_ITEMS
    }


def library_operations(code: Code, key: Key) -> set[Operation]:
    """Operations a function makes through the libraries of ``LIBRARY_CALLS``."""
    function = code.functions[key]
    module = code.modules[key[0]]
    found: set[Operation] = set()
    for node in _own_nodes(function.node):
        if not (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)):
            continue
        source = module.imports.get(node.value.id, "").replace(":", ".")
        if source in LIBRARY_MODULES:
            if (source, node.attr) not in LIBRARY_CALLS:
                raise AnalysisError(f"{key}: {source}.{node.attr} may call AWS: add it to LIBRARY_CALLS")
            found.add(LIBRARY_CALLS[(source, node.attr)])
    return found


@cache
def code() -> Code:
    return Code()


def handler_operations(handler: str, source: Code | None = None) -> set[Operation]:
    """Every operation the Lambda handler ``handler`` (``lambdas.turn.handler``) can call."""
    source = source or code()
    module, _, name = handler.rpartition(".")
    if (module, name) not in source.functions:
        raise AnalysisError(f"no handler {handler}")
    reached = source.reachable((module, name))
    called: set[Operation] = set()
    for use in client_uses(source):
        for method, ops in adapter_operations(source, use).items():
            if method in reached:
                called |= ops
    for key in reached:
        called |= library_operations(source, key)
    return called
