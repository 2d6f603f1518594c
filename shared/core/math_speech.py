r"""LaTeX math made speakable: ``$10^6 \mid n!$`` is read "10 to the power of 6 divides n factorial".

The app reads every ``tts.speak`` text aloud, and raw LaTeX comes out as "dollar ten caret six
backslash mid". Inline math is converted for speech only (the screen keeps it as written: apps may
render it); display math (``$$…$$``, ``\[…\]``, an equation environment) goes to a card instead
(speakable.py). Money must not misfire: ``$5 and $10`` and ``$HOME/bin`` are not math, because
between single dollars math needs a backslash command, ``^``, ``_`` or braces, and no space right
inside the dollars (pandoc's rule, plus that test). Pure and regex-based: it runs on the hot path.
"""

from __future__ import annotations

import re
from bisect import bisect_right

# Inline math in a line, as alternatives of speakable's token pattern (named groups dmath, bmath,
# pmath, imath). The closing single dollar must not be followed by a digit ("$5 to $10").
INLINE_MATH = (
    r"\$\$(?P<dmath>[^$\n]{1,1000}?)\$\$"
    r"|\\\[(?P<bmath>[^\n]{1,1000}?)\\\]"
    r"|\\\((?P<pmath>[^\n]{1,1000}?)\\\)"
    r"|(?<![\\$])\$(?=[^\s$])(?=[^$\n]*[\\^_{])(?P<imath>[^$\n]{1,1000}?)(?<![\s\\])\$(?![$\d])"
)
_INLINE = re.compile(INLINE_MATH)
_MATH_GROUPS = ("dmath", "bmath", "pmath", "imath")
# An inline formula whose closing delimiter has not arrived yet (the text is still streaming).
_OPENING = re.compile(r"(?:(?<![\\$])\$(?=[^\s$])(?=[^$\n]*[\\^_{])|\\\(|\\\[)[^\n]*\Z")
# Display math, from a line that opens it to the line that closes it. Only a delimiter alone on its
# line, or an environment, may run to the end unclosed (while streaming): "$$ is the PID" is prose.
DISPLAY_ENVIRONMENTS = "equation|align|alignat|gather|multline|eqnarray|displaymath|math"
_DISPLAY = re.compile(
    r"^[ \t]*(?:\$\$(?:[\s\S]*?\$\$|[ \t]*(?:\n[\s\S]*)?\Z)|\\\[(?:[\s\S]*?\\\]|[ \t]*(?:\n[\s\S]*)?\Z)"
    rf"|\\begin\{{((?:{DISPLAY_ENVIRONMENTS})\*?)\}}[\s\S]*?(?:\\end\{{\1\}}|\Z))",
    re.MULTILINE,
)


def math_source(token: re.Match[str]) -> str | None:
    """The LaTeX of a match of ``INLINE_MATH`` (None when the match is another alternative)."""
    return next((token[group] for group in _MATH_GROUPS if token[group] is not None), None)


class Formulas:
    """Where a streaming text has math, so a sentence is never cut inside a formula ("n! = 1" or a
    display block's lines); built once per look at the text, cheap when it has no ``$`` or ``\\``."""

    def __init__(self, text: str) -> None:
        self.text = text
        self._any = "$" in text or "\\" in text
        spans = [m.span() for m in _DISPLAY.finditer(text)] if self._any else []
        self._starts = [start for start, _ in spans]
        self._ends = [end for _, end in spans]

    def covers(self, index: int) -> bool:
        if not self._any:
            return False
        i = bisect_right(self._starts, index)
        if i and index < self._ends[i - 1]:
            return True
        text = self.text
        line_start = text.rfind("\n", 0, index) + 1
        line_end = text.find("\n", index)
        line = text[line_start : len(text) if line_end < 0 else line_end]
        if "$" not in line and "\\" not in line:
            return False
        at = index - line_start
        last = 0
        for token in _INLINE.finditer(line):
            if token.start() < at < token.end():
                return True
            last = token.end()
        opening = _OPENING.search(line, last) if line_end < 0 else None
        return opening is not None and opening.start() < at


# ---- LaTeX to words -----------------------------------------------------------------------------

_LEX = re.compile(r"\\[A-Za-z]+|\\.|\d+(?:\.\d+)?|[A-Za-z]+|[<>!]=|\s+|.", re.DOTALL)
_MAX_DEPTH = 40

_GREEK_NAMES = (
    "alpha", "beta", "gamma", "delta", "epsilon", "varepsilon", "zeta", "eta", "theta", "vartheta", "iota", "kappa",
    "lambda", "mu", "nu", "xi", "omicron", "pi", "varpi", "rho", "varrho", "sigma", "varsigma", "tau", "upsilon",
    "phi", "varphi", "chi", "psi", "omega",
)  # fmt: skip
_GREEK = {name: name.removeprefix("var") for name in _GREEK_NAMES}
_GREEK |= {name.capitalize(): name for name in _GREEK.values()}
_WORDS = {
    "cdot": "times", "times": "times", "ast": "times", "div": "divided by", "mid": "divides",
    "nmid": "does not divide", "le": "is less than or equal to", "leq": "is less than or equal to",
    "leqslant": "is less than or equal to", "ge": "is greater than or equal to",
    "geq": "is greater than or equal to", "geqslant": "is greater than or equal to", "ne": "is not equal to",
    "neq": "is not equal to", "approx": "is approximately", "sim": "is similar to", "simeq": "is approximately",
    "equiv": "is equivalent to", "cong": "is congruent to", "propto": "is proportional to", "ll": "is much less than",
    "gg": "is much greater than", "pm": "plus or minus", "mp": "minus or plus", "infty": "infinity",
    "to": "to", "rightarrow": "to", "mapsto": "maps to", "Rightarrow": "implies", "implies": "implies",
    "iff": "if and only if", "Leftrightarrow": "if and only if", "in": "in", "notin": "not in",
    "subset": "is a subset of", "subseteq": "is a subset of", "supset": "is a superset of", "cup": "union",
    "cap": "intersection", "setminus": "minus", "emptyset": "the empty set", "varnothing": "the empty set",
    "forall": "for all", "exists": "there exists", "neg": "not", "lnot": "not", "land": "and", "wedge": "and",
    "lor": "or", "vee": "or", "partial": "partial", "nabla": "nabla", "circ": "composed with", "degree": "degrees",
    "ldots": "dot dot dot", "cdots": "dot dot dot", "dots": "dot dot dot", "prime": "prime",
    "perp": "is perpendicular to", "parallel": "is parallel to", "angle": "angle", "ell": "l", "hbar": "h bar",
    "bmod": "mod", "mod": "mod",
    "%": "percent", "$": "dollars", "&": "and", "#": "number", "_": "underscore",
}  # fmt: skip
_FUNCTIONS = {
    "sin": "sine", "cos": "cosine", "tan": "tangent", "cot": "cotangent", "sec": "secant", "csc": "cosecant",
    "arcsin": "arc sine", "arccos": "arc cosine", "arctan": "arc tangent", "sinh": "hyperbolic sine",
    "cosh": "hyperbolic cosine", "tanh": "hyperbolic tangent", "log": "log", "lg": "log", "ln": "natural log",
    "exp": "exp", "det": "the determinant of", "max": "max", "min": "min", "gcd": "gcd", "lcm": "lcm",
    "deg": "degree", "dim": "dimension", "ker": "kernel", "arg": "arg", "sup": "sup", "inf": "inf", "Pr": "probability",
}  # fmt: skip
_LARGE = {
    "sum": "the sum", "prod": "the product", "int": "the integral", "iint": "the double integral",
    "iiint": "the triple integral", "oint": "the contour integral", "bigcup": "the union",
    "bigcap": "the intersection", "lim": "the limit",
}  # fmt: skip
_TEXT = {"text", "textrm", "textit", "textbf", "textsf", "texttt", "textnormal", "mbox", "emph", "operatorname"}
_STYLE = {"mathrm", "mathit", "mathbf", "mathsf", "mathtt", "mathcal", "mathbb", "mathfrak", "boldsymbol", "bm"}
_ACCENTS = {"hat": "hat", "widehat": "hat", "bar": "bar", "overline": "bar", "tilde": "tilde", "widetilde": "tilde",
            "dot": "dot", "ddot": "double dot"}  # fmt: skip
_SILENT = {
    "left", "right", "big", "Big", "bigg", "Bigg", "bigl", "bigr", "Bigl", "Bigr", "biggl", "biggr", "middle",
    "displaystyle", "textstyle", "limits", "nolimits", "quad", "qquad", "langle", "rangle", "lvert", "rvert",
    "vert", "Vert", "lVert", "rVert", "lfloor", "rfloor", "lceil", "rceil", "{", "}", "|", ",", ";", ":", "!",
    " ", "\\", "nonumber", "notag", "label", "tag", "begin", "end",
}  # fmt: skip
_OPERATORS = {
    "+": "plus", "-": "minus", "\u2212": "minus", "=": "equals", "<": "is less than", ">": "is greater than",
    "<=": "is less than or equal to", ">=": "is greater than or equal to", "!=": "is not equal to", "*": "times",
    "/": "over", "'": "prime", ",": ",", ";": ",", "\u00d7": "times", "·": "times", "÷": "divided by",
    "≤": "is less than or equal to", "≥": "is greater than or equal to", "≠": "is not equal to",
    "≈": "is approximately", "∞": "infinity",
}  # fmt: skip
_DROPPED = set("()[]|{}&~.:^_$\\")
# Words a parenthesis applies to: f(x) is "f of x".
_APPLIED = {
    "f", "g", "h", "F", "G", "H", "O", "P", "E", "prime", "exp", "max", "min", "gcd", "lcm", "arg", "probability",
}  # fmt: skip
# Words after which a parenthesis starts an operand rather than multiplying one.
_JOINERS = {
    "plus", "minus", "times", "over", "equals", "divides", "mod", "modulo", "and", "or", "not", "in", "to",
    "sub", "of", "as", "from", "base", "choose", "vector", "approaches", "union", "intersection", "for all",
}  # fmt: skip
_ORDINAL = {"2": "square", "3": "cube"}


def speak_math(latex: str) -> str:
    """``latex`` (a formula without its delimiters) as words a speech engine reads naturally."""
    words = _Reader(_LEX.findall(latex)).expression()
    spoken = re.sub(r"[\\{}^_$]+", " ", " ".join(words))
    spoken = re.sub(r"\s+", " ", spoken).strip()
    return re.sub(r" ,", ",", spoken).strip(" ,")


class _Reader:
    """Reads LaTeX tokens into words, one construct at a time (a small recursive descent)."""

    def __init__(self, tokens: list[str]) -> None:
        self.tokens = tokens
        self.at = 0
        self.depth = 0

    def _peek(self) -> str | None:
        while self.at < len(self.tokens) and self.tokens[self.at].isspace():
            self.at += 1
        return self.tokens[self.at] if self.at < len(self.tokens) else None

    def _next(self) -> str | None:
        token = self._peek()
        if token is not None:
            self.at += 1
        return token

    def expression(self, until: str | None = None) -> list[str]:
        """Words up to ``until`` (consumed) or the end."""
        words: list[str] = []
        self.depth += 1
        while (token := self._next()) is not None:
            if token == until:
                break
            if token == "}":  # unbalanced: nothing opened it
                continue
            words += self._construct(token, words)
        self.depth -= 1
        return words

    def argument(self, *, one_digit: bool = False) -> list[str]:
        """One argument: a braced group or a single token (``\\frac12``: one digit each)."""
        token = self._next()
        if token is None:
            return []
        if token == "{":
            return self.expression("}") if self.depth < _MAX_DEPTH else self._raw_group(opened=True)
        if one_digit and token[0].isdigit() and len(token) > 1 and "." not in token:
            self.tokens[self.at - 1] = token[1:]
            self.at -= 1
            return [token[0]]
        return self._construct(token, [])

    def _raw_group(self, *, opened: bool = False) -> list[str]:
        """A braced group's text as written (``\\text{ if }``), without reading it as math."""
        if not opened:
            if self._peek() != "{":
                token = self._next()
                return [token] if token else []
            self._next()
        level, out = 1, []
        while self.at < len(self.tokens):
            token = self.tokens[self.at]
            self.at += 1
            level += (token == "{") - (token == "}")
            if level == 0:
                break
            out.append(token)
        text = re.sub(r"\\([A-Za-z]+|.)", r"\1", "".join(out))
        return [text] if text.strip() else []

    def _limits(self) -> tuple[list[str], list[str]]:
        """A large operator's ``_{…}`` and ``^{…}``, in either order."""
        lower: list[str] = []
        upper: list[str] = []
        while (token := self._peek()) in ("_", "^", "\\limits", "\\nolimits"):
            self._next()
            if token == "_":
                lower = self.argument()
            elif token == "^":
                upper = self.argument()
        return lower, upper

    def _construct(self, token: str, before: list[str]) -> list[str]:
        if token == "{":
            return self.expression("}") if self.depth < _MAX_DEPTH else self._raw_group(opened=True)
        if token == "^":
            return self._power()
        if token == "_":
            return ["sub", *self.argument()]
        if token == "!":
            return ["factorial"] if before else []
        if token == "(":
            return self._parenthesized(before)
        if token in _OPERATORS:
            return [_OPERATORS[token]]
        if token[0] == "\\":
            return self._command(token[1:])
        if token in _DROPPED:
            return []
        if token.isalpha() and len(token) > 1:  # a name written without its backslash, or letters multiplied
            if token in _FUNCTIONS:
                return self._command(token)
            return [token] if len(token) > 3 else list(token)
        return [token]

    def _parenthesized(self, before: list[str]) -> list[str]:
        """``f(x)`` is "f of x"; ``n(n+1)`` "n times the quantity n plus 1"; ``(x)`` just "x"."""
        inner = self.expression(")") if self.depth < _MAX_DEPTH else self._raw_group(opened=True)
        if before and before[-1] in _APPLIED:
            return ["of", *inner]
        if len(inner) < 2:
            return inner
        operand = before and before[-1] not in _JOINERS and re.fullmatch(r"[\w.]+", before[-1])
        return ["times the quantity" if operand else "the quantity", *inner]

    def _power(self) -> list[str]:
        if self._peek() in ("\\circ", "\\degree"):
            self._next()
            return ["degrees"]
        exponent = self.argument()
        if len(exponent) == 1 and exponent[0] in ("2", "3"):
            return ["squared" if exponent[0] == "2" else "cubed"]
        if exponent == ["prime"]:
            return exponent
        return ["to the power of", *exponent] if exponent else []

    def _command(self, name: str) -> list[str]:
        if name in _GREEK:
            return [_GREEK[name]]
        if name in _WORDS:
            return [_WORDS[name]]
        if name in ("frac", "dfrac", "tfrac", "cfrac"):
            top, bottom = self.argument(one_digit=True), self.argument(one_digit=True)
            return [*_quantity(top), "over", *_quantity(bottom)]
        if name in ("binom", "dbinom", "tbinom"):
            top, bottom = self.argument(one_digit=True), self.argument(one_digit=True)
            return [*top, "choose", *bottom]
        if name == "sqrt":
            degree: list[str] = []
            if self._peek() == "[":
                self._next()
                degree = self.expression("]")
            root = _ORDINAL.get(" ".join(degree), f"{' '.join(degree)}th") if degree else "square"
            return [f"the {root} root of", *self.argument(one_digit=True)]
        if name in _LARGE:
            lower, upper = self._limits()
            words = [_LARGE[name]]
            if name == "lim":
                words += ["as", *("approaches" if word == "to" else word for word in lower)] if lower else []
            elif lower and upper:
                words += ["from", *lower, "to", *upper]
            elif lower or upper:
                words += ["over", *lower, *upper]
            return [*words, "of"]
        if name in _FUNCTIONS:
            if self._peek() == "_":
                self._next()
                return [_FUNCTIONS[name], "base", *self.argument(), "of"]
            return [_FUNCTIONS[name]]
        if name in _TEXT:
            return self._raw_group()
        if name in _STYLE:
            return self.argument()
        if name in _ACCENTS:
            return [*self.argument(), _ACCENTS[name]]
        if name == "vec":
            return ["vector", *self.argument()]
        if name == "pmod":
            return ["modulo", *self.argument()]
        if name in ("not", "cancel"):
            return ["not", *self.argument()]
        if name in _SILENT or not name.isalpha():
            if name in ("begin", "end", "label", "tag"):
                self._raw_group()
            return []
        return [name]


def _quantity(words: list[str]) -> list[str]:
    """A fraction's part: "n plus 1 over 2" needs a marker to be heard as (n + 1) / 2."""
    return ["the quantity", *words] if len(words) > 1 else words
