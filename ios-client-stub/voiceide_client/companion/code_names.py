"""The names one file defines: functions, classes, methods, types and constants.

* **Python**, with ``ast``: functions and classes at any depth (methods too), and the module's
  constants and type aliases (``MAX_SIZE = …``, ``UserId = str``). A file that does not parse is
  read by the tokenizer instead.
* **JavaScript, TypeScript, Go, Rust and Swift**, with tree-sitter grammars (when their packages are
  installed; else the tokenizer): declarations of functions, classes, methods, interfaces, types,
  enums, traits and modules anywhere, and variables and constants outside function bodies.
* **Anything else**: the tokenizer keeps the identifiers that look like code names (``camelCase``,
  ``PascalCase`` with two humps, ``snake_case``, ``UPPER_CASE``), three characters or more, no
  keyword.

Dunder names (``__init__``) are no one's vocabulary and are left out everywhere.
"""

from __future__ import annotations

import ast
import importlib
import re
from collections.abc import Iterator
from functools import cache
from typing import Any

from shared.wire.workspace import MAX_NAME

MIN_NAME = 3
"""Characters of a name at least: shorter ones (``T``, ``io``) are no one's vocabulary."""
IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]{2,}")
_NAME = re.compile(r"^[A-Za-z_$][A-Za-z0-9_$]*$")
_CAMEL = re.compile(r"[a-z0-9][A-Z]|[A-Z]{2}[a-z]")
_PASCAL = re.compile(r"^[A-Z][a-z0-9]+[A-Z]")
_SNAKE = re.compile(r"[A-Za-z0-9]_[A-Za-z0-9]")
_CONSTANT = re.compile(r"^_?[A-Z][A-Z0-9_]*$")
_TYPE_ALIAS = re.compile(r"^_?[A-Z][A-Za-z0-9]*[a-z][A-Za-z0-9]*$")
KEYWORDS = frozenset(
    {
        "and", "as", "assert", "async", "await", "break", "case", "catch", "class", "const", "continue", "def",
        "default", "del", "defer", "do", "elif", "else", "enum", "except", "export", "extends", "false", "final",
        "finally", "for", "from", "func", "function", "global", "go", "goto", "if", "impl", "import", "in",
        "instanceof", "interface", "internal", "is", "lambda", "let", "match", "mod", "move", "mut", "new", "nil",
        "none", "not", "null", "or", "override", "package", "pass", "private", "protected", "protocol", "pub",
        "public", "raise", "readonly", "return", "self", "static", "struct", "super", "switch", "throw", "throws",
        "trait", "true", "try", "type", "typealias", "typeof", "undefined", "unsafe", "use", "var", "void", "where",
        "while", "with", "yield", "this", "extension", "fileprivate", "init", "deinit", "subscript", "inout",
        "guard", "repeat", "associatedtype", "some", "any", "chan", "select", "range", "fallthrough", "crate",
        "dyn", "loop", "ref", "nan", "infinity"
    }
)  # fmt: skip
"""Keywords of the common languages, compared in lower case: never a name."""
GRAMMARS: dict[str, tuple[str, str]] = {
    "javascript": ("tree_sitter_javascript", "language"),
    "javascriptreact": ("tree_sitter_javascript", "language"),
    "typescript": ("tree_sitter_typescript", "language_typescript"),
    "typescriptreact": ("tree_sitter_typescript", "language_tsx"),
    "go": ("tree_sitter_go", "language"),
    "rust": ("tree_sitter_rust", "language"),
    "swift": ("tree_sitter_swift", "language"),
}
"""Language id -> (package module, function returning its grammar)."""
DECLARATIONS = frozenset(
    {
        # JavaScript and TypeScript
        "function_declaration", "generator_function_declaration", "class_declaration", "method_definition",
        "abstract_class_declaration", "interface_declaration", "type_alias_declaration", "enum_declaration",
        "abstract_method_signature", "method_signature", "module",
        # Go
        "type_spec", "method_declaration", "method_elem",
        # Rust
        "struct_item", "enum_item", "trait_item", "function_item", "function_signature_item", "mod_item",
        "type_item", "union_item", "macro_definition", "const_item", "static_item",
        # Swift
        "protocol_declaration", "typealias_declaration", "protocol_function_declaration",
    }
)  # fmt: skip
VARIABLES = frozenset({"variable_declarator", "const_spec", "var_spec", "property_declaration"})
"""Declarations kept outside function bodies only (a function's locals are no one's vocabulary)."""
FUNCTIONS = frozenset(
    {
        "function_declaration", "generator_function_declaration", "function_expression", "arrow_function",
        "method_definition", "function", "function_item", "closure_expression", "method_declaration",
        "func_literal", "lambda_literal", "init_declaration", "function_body", "statement_block",
    }
)  # fmt: skip


def looks_like_code(token: str) -> bool:
    """Whether an identifier reads as a code name rather than a word of text."""
    if not MIN_NAME <= len(token) <= MAX_NAME or token.lower() in KEYWORDS or _dunder(token):
        return False
    if sum(character.isalpha() for character in token) < 3:
        return False
    return bool(_SNAKE.search(token) or _CAMEL.search(token) or _PASCAL.match(token))


def token_names(text: str) -> list[str]:
    """The identifiers of ``text`` that look like code names, each once, in order."""
    return [token for token in _unique(IDENTIFIER.findall(text)) if looks_like_code(token)]


def python_names(text: str) -> list[str] | None:
    """The names a Python module defines; None when it does not parse."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    found: list[str] = []
    for statement in tree.body:
        targets: list[ast.expr] = []
        if isinstance(statement, ast.Assign):
            targets = statement.targets
        elif isinstance(statement, ast.AnnAssign):
            targets = [statement.target]
        found += [
            target.id
            for target in targets
            if isinstance(target, ast.Name) and (_CONSTANT.match(target.id) or _TYPE_ALIAS.match(target.id))
        ]
    statements: list[ast.AST] = list(reversed(tree.body))
    while statements:  # statements only: a definition is never inside an expression
        node = statements.pop()
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            found.append(node.name)
        inner = [child for child in ast.iter_child_nodes(node) if isinstance(child, _BLOCKS)]
        statements.extend(reversed(inner))
    return _unique(name for name in found if _kept(name))


_BLOCKS = (ast.stmt, ast.excepthandler, ast.match_case)
"""What holds statements: definitions are looked for in these alone."""


def tree_sitter_names(text: str, language: str) -> list[str] | None:
    """The names a file declares, by its language's tree-sitter grammar; None without one."""
    parser = _parser(language)
    if parser is None:
        return None
    try:
        tree = parser.parse(text.encode("utf-8"))
    except Exception:
        return None
    return _unique(name for name in _declared(tree) if _kept(name))


def parsed_names(text: str, language: str | None) -> list[str] | None:
    """What a file defines, by ``python_names`` or ``tree_sitter_names``; None when neither can
    read it (another language, no grammar, a file that does not parse)."""
    if language == "python":
        return python_names(text)
    if language in GRAMMARS:
        return tree_sitter_names(text, language)
    return None


def names_of(text: str, language: str | None) -> list[str]:
    """What a file defines (``parsed_names``), else the code names it holds (``token_names``)."""
    found = parsed_names(text, language)
    return token_names(text) if found is None else found


def grammars() -> list[str]:
    """The languages whose grammar is installed."""
    return [language for language in GRAMMARS if _parser(language) is not None]


@cache
def _parser(language: str) -> Any | None:
    module_name, function = GRAMMARS.get(language, ("", ""))
    if not module_name:
        return None
    try:
        import tree_sitter

        grammar = getattr(importlib.import_module(module_name), function)()
        return tree_sitter.Parser(tree_sitter.Language(grammar))
    except Exception:  # no package, or one built for another version of tree-sitter
        return None


def _declared(tree: Any) -> Iterator[str]:
    cursor = tree.walk()
    in_function = [False]  # for the children of the node the cursor is on
    while True:
        node = cursor.node
        kind = node.type
        if kind in DECLARATIONS or (kind in VARIABLES and not in_function[-1]):
            name = node.child_by_field_name("name")
            if name is not None and name.text is not None:
                text = name.text.decode("utf-8", errors="replace")
                if _NAME.match(text):
                    yield text
        if cursor.goto_first_child():
            in_function.append(in_function[-1] or kind in FUNCTIONS)
            continue
        while not cursor.goto_next_sibling():
            if not cursor.goto_parent():
                return
            in_function.pop()


def _kept(name: str) -> bool:
    return MIN_NAME <= len(name) <= MAX_NAME and not _dunder(name)


def _dunder(name: str) -> bool:
    return name.startswith("__") and name.endswith("__")


def _unique(names: Iterator[str] | list[str]) -> list[str]:
    return list(dict.fromkeys(names))
