"""The part of CEL that Karpenter's CRD validation rules are written in.

`x-kubernetes-validations` rules in the published CRDs use: `self`/`oldSelf`, field access,
indexing, `has()`, the `all`/`exists`/`exists_one`/`filter`/`map` macros, `size`, `in`,
comparisons, `&&`/`||`/`!`, `?:`, list literals, `int()`/`string()`, and the Kubernetes
string library (`startsWith`, `endsWith`, `contains`, `matches`, `find`, `split`,
`lowerAscii`, `upperAscii`). Anything else is a compile error, reported as the real API
server reports a rule it cannot evaluate.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any


class CelError(Exception):
    pass


_TOKEN = re.compile(
    r"""\s*(?:
    (?P<num>\d+\.\d+|\d+)
  | (?P<str>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')
  | (?P<op>==|!=|<=|>=|&&|\|\||[-+*/%<>!?:.,()\[\]{}])
  | (?P<ident>[A-Za-z_][A-Za-z0-9_]*)
)""",
    re.VERBOSE,
)


def _tokens(text: str) -> list[tuple[str, str]]:
    out = []
    pos = 0
    text = text.strip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m or m.end() == pos:
            raise CelError(f"Syntax error: unexpected character at {pos}: {text[pos : pos + 10]!r}")
        kind = m.lastgroup or ""
        out.append((kind, m.group(kind)))
        pos = m.end()
        while pos < len(text) and text[pos].isspace():
            pos += 1
    out.append(("end", ""))
    return out


@dataclass
class CelExpr:
    """One node of a compiled rule's expression tree: its kind, a value (a literal, a name,
    an operator) and its operands."""

    kind: str
    value: Any = None
    args: tuple[Any, ...] = ()


MACROS = {"all", "exists", "exists_one", "filter", "map"}


class _Parser:
    def __init__(self, text: str) -> None:
        self.toks = _tokens(text)
        self.i = 0

    def peek(self) -> tuple[str, str]:
        return self.toks[self.i]

    def take(self, value: str | None = None) -> tuple[str, str]:
        tok = self.toks[self.i]
        if value is not None and tok[1] != value:
            raise CelError(f"Syntax error: expected {value!r}, found {tok[1]!r}")
        self.i += 1
        return tok

    def parse(self) -> CelExpr:
        node = self.cond()
        if self.peek()[0] != "end":
            raise CelError(f"Syntax error: unexpected {self.peek()[1]!r}")
        return node

    def cond(self) -> CelExpr:
        node = self.binary(0)
        if self.peek()[1] == "?":
            self.take("?")
            yes = self.cond()
            self.take(":")
            no = self.cond()
            return CelExpr("cond", None, (node, yes, no))
        return node

    LEVELS = (
        ("||",),
        ("&&",),
        ("==", "!=", "<", "<=", ">", ">=", "in"),
        ("+", "-"),
        ("*", "/", "%"),
    )

    def binary(self, level: int) -> CelExpr:
        if level == len(self.LEVELS):
            return self.unary()
        node = self.binary(level + 1)
        while self.peek()[1] in self.LEVELS[level] and self.peek()[0] in ("op", "ident"):
            op = self.take()[1]
            node = CelExpr("bin", op, (node, self.binary(level + 1)))
        return node

    def unary(self) -> CelExpr:
        if self.peek()[1] in ("!", "-") and self.peek()[0] == "op":
            op = self.take()[1]
            return CelExpr("not" if op == "!" else "neg", None, (self.unary(),))
        return self.member()

    def args(self) -> list[CelExpr]:
        self.take("(")
        out: list[CelExpr] = []
        while self.peek()[1] != ")":
            out.append(self.cond())
            if self.peek()[1] == ",":
                self.take(",")
        self.take(")")
        return out

    def member(self) -> CelExpr:
        node = self.primary()
        while True:
            tok = self.peek()
            if tok[1] == ".":
                self.take(".")
                name = self.take()[1]
                if self.peek()[1] == "(":
                    if name in MACROS:
                        self.take("(")
                        var = self.take()[1]
                        self.take(",")
                        body = self.cond()
                        self.take(")")
                        node = CelExpr("macro", name, (node, var, body))
                    else:
                        node = CelExpr("method", name, (node, *self.args()))
                else:
                    node = CelExpr("field", name, (node,))
            elif tok[1] == "[":
                self.take("[")
                index = self.cond()
                self.take("]")
                node = CelExpr("index", None, (node, index))
            else:
                return node

    def primary(self) -> CelExpr:
        kind, value = self.take()
        if kind == "num":
            return CelExpr("lit", float(value) if "." in value else int(value))
        if kind == "str":
            return CelExpr("lit", bytes(value[1:-1], "utf-8").decode("unicode_escape"))
        if kind == "ident":
            if value in ("true", "false"):
                return CelExpr("lit", value == "true")
            if value == "null":
                return CelExpr("lit", None)
            if self.peek()[1] == "(":
                if value == "has":
                    self.take("(")
                    target = self.cond()
                    self.take(")")
                    if target.kind != "field":
                        raise CelError("invalid argument to has() macro")
                    return CelExpr("has", target.value, target.args)
                return CelExpr("call", value, tuple(self.args()))
            return CelExpr("var", value)
        if value == "(":
            node = self.cond()
            self.take(")")
            return node
        if value == "[":
            items = []
            while self.peek()[1] != "]":
                items.append(self.cond())
                if self.peek()[1] == ",":
                    self.take(",")
            self.take("]")
            return CelExpr("list", None, tuple(items))
        raise CelError(f"Syntax error: unexpected {value!r}")


def compile_rule(text: str) -> CelExpr:
    return _Parser(text).parse()


def _size(value: Any) -> int:
    if isinstance(value, str | list | dict):
        return len(value)
    raise CelError(f"no such overload: size({type(value).__name__})")


def _method(name: str, target: Any, args: list[Any]) -> Any:
    if name == "size" and not args:
        return _size(target)
    if isinstance(target, str):
        if name == "startsWith":
            return target.startswith(str(args[0]))
        if name == "endsWith":
            return target.endswith(str(args[0]))
        if name == "contains":
            return str(args[0]) in target
        if name == "matches":
            return re.search(str(args[0]), target) is not None
        if name == "find":
            m = re.search(str(args[0]), target)
            return m.group(0) if m else ""
        if name == "split":
            return target.split(str(args[0]))
        if name == "lowerAscii":
            return target.lower()
        if name == "upperAscii":
            return target.upper()
    raise CelError(f"found no matching overload for '{name}' applied to '{type(target).__name__}'")


def _compare(op: str, a: Any, b: Any) -> bool:
    if op == "==":
        return bool(a == b and type(a) is type(b)) or (
            isinstance(a, int | float) and isinstance(b, int | float) and a == b
        )
    if op == "!=":
        return not _compare("==", a, b)
    if op == "in":
        if isinstance(b, dict):
            return a in b
        if isinstance(b, list):
            return any(_compare("==", a, x) for x in b)
        raise CelError("no such overload: in")
    if type(a) is not type(b) and not (isinstance(a, int | float) and isinstance(b, int | float)):
        raise CelError(f"no such overload: {type(a).__name__} {op} {type(b).__name__}")
    if op == "<":
        return bool(a < b)
    if op == "<=":
        return bool(a <= b)
    if op == ">":
        return bool(a > b)
    return bool(a >= b)


def _index(target: Any, index: Any) -> Any:
    if isinstance(target, list) and isinstance(index, int) and not isinstance(index, bool):
        if 0 <= index < len(target):
            return target[index]
        raise CelError(f"index out of bounds: {index}")
    if isinstance(target, dict) and index in target:
        return target[index]
    raise CelError(f"no such key: {index}")


def _logic(node: CelExpr, env: dict[str, Any]) -> bool:
    """`&&` and `||` with CEL's commutative logic: an error on one side is absorbed by a
    decisive other side."""
    op = node.value
    try:
        left: Any = evaluate(node.args[0], env)
    except CelError as exc:
        left = exc
    if (op == "&&" and left is False) or (op == "||" and left is True):
        return bool(left)
    right = evaluate(node.args[1], env)
    if isinstance(left, CelError):
        if (op == "&&" and right is False) or (op == "||" and right is True):
            return bool(right)
        raise left
    return bool(left and right) if op == "&&" else bool(left or right)


def _binary(op: str, a: Any, b: Any) -> Any:
    if op in ("==", "!=", "<", "<=", ">", ">=", "in"):
        return _compare(op, a, b)
    if op == "+":
        return a + b
    if op == "-":
        return a - b
    if op == "*":
        return a * b
    if op == "/":
        if b == 0:
            raise CelError("division by zero")
        return a // b if isinstance(a, int) and isinstance(b, int) else a / b
    if op == "%":
        return a % b
    raise CelError("unsupported expression bin")


def _call(name: str, args: list[Any]) -> Any:
    if name == "size" and len(args) == 1:
        return _size(args[0])
    if name == "int" and len(args) == 1:
        try:
            return int(args[0])
        except (TypeError, ValueError):
            raise CelError(f"cannot convert {args[0]!r} to int") from None
    if name == "string" and len(args) == 1:
        return str(args[0])
    raise CelError(f"undeclared reference to '{name}'")


def _macro(node: CelExpr, env: dict[str, Any]) -> Any:
    target = evaluate(node.args[0], env)
    var, body = node.args[1], node.args[2]
    items = list(target) if isinstance(target, dict | list) else None
    if items is None:
        raise CelError(f"no such overload: {node.value}")

    def test(item: Any) -> Any:
        return evaluate(body, {**env, var: item})

    if node.value == "all":
        return all(test(x) is True for x in items)
    if node.value == "exists":
        return any(test(x) is True for x in items)
    if node.value == "exists_one":
        return sum(1 for x in items if test(x) is True) == 1
    if node.value == "filter":
        return [x for x in items if test(x) is True]
    return [test(x) for x in items]


def evaluate(node: CelExpr, env: dict[str, Any]) -> Any:
    k = node.kind
    if k == "lit":
        return node.value
    if k == "var":
        if node.value not in env:
            raise CelError(f"undeclared reference to '{node.value}'")
        return env[node.value]
    if k == "list":
        return [evaluate(a, env) for a in node.args]
    if k == "field":
        target = evaluate(node.args[0], env)
        if isinstance(target, dict) and node.value in target:
            return target[node.value]
        raise CelError(f"no such key: {node.value}")
    if k == "has":
        target = evaluate(node.args[0], env)
        return isinstance(target, dict) and node.value in target
    if k == "index":
        return _index(evaluate(node.args[0], env), evaluate(node.args[1], env))
    if k == "not":
        value = evaluate(node.args[0], env)
        if not isinstance(value, bool):
            raise CelError("no such overload: !_")
        return not value
    if k == "neg":
        return -evaluate(node.args[0], env)
    if k == "cond":
        test = evaluate(node.args[0], env)
        return evaluate(node.args[1] if test else node.args[2], env)
    if k == "bin" and node.value in ("&&", "||"):
        return _logic(node, env)
    if k == "bin":
        return _binary(node.value, evaluate(node.args[0], env), evaluate(node.args[1], env))
    if k == "call":
        return _call(node.value, [evaluate(a, env) for a in node.args])
    if k == "method":
        target = evaluate(node.args[0], env)
        return _method(node.value, target, [evaluate(a, env) for a in node.args[1:]])
    if k == "macro":
        return _macro(node, env)
    raise CelError(f"unsupported expression {k}")
