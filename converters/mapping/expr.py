"""Shape and argument expressions of the mapping files: a tiny, safe integer evaluator.

Mapping rules give shapes and transform arguments as expressions over the normalised config
(``linear_num_value_heads * linear_value_head_dim``). ``eval`` would run arbitrary code from a data
file, so expressions are parsed with :mod:`ast` and only these nodes are accepted: integer literals,
names, unary ``-``, and the binary operators ``+ - * //``. Every name must be bound to a Python
``int`` (``bool`` is refused: ``True * 4`` is a bug, not a shape). Division by zero and unknown names
raise :class:`ExprError` naming the expression.
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Mapping

_BINOPS = {
    ast.Add: lambda a, b: a + b,
    ast.Sub: lambda a, b: a - b,
    ast.Mult: lambda a, b: a * b,
    ast.FloorDiv: lambda a, b: a // b,
}

#: Longest expression text accepted (a mapping expression is a short formula, not a program).
MAX_EXPR_CHARS = 256


class ExprError(ValueError):
    """An expression that does not parse or does not evaluate to an integer."""


def parse(text: str | int) -> ast.expr:
    """Parse one expression; raises :class:`ExprError` on syntax or a disallowed construct."""
    if isinstance(text, bool):
        raise ExprError(f"{text!r} is a boolean, not an integer expression")
    if isinstance(text, int):
        return ast.Constant(text)
    if not isinstance(text, str):
        raise ExprError(f"expected an integer expression, got {type(text).__name__} {text!r}")
    if len(text) > MAX_EXPR_CHARS:
        raise ExprError(f"expression longer than {MAX_EXPR_CHARS} characters")
    return _parse_text(text)


@functools.lru_cache(maxsize=4096)
def _parse_text(text: str) -> ast.expr:
    """The checked tree of ``text`` (cached: a mapping repeats its few formulas for every layer and expert; the
    tree is only read)."""
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError as exc:
        raise ExprError(f"expression {text!r} does not parse: {exc.msg}") from None
    _check(tree.body, text)
    return tree.body


def _check(node: ast.AST, text: str) -> None:
    if isinstance(node, ast.Constant):
        if isinstance(node.value, bool) or not isinstance(node.value, int):
            raise ExprError(f"expression {text!r}: only integer literals are allowed, got {node.value!r}")
    elif isinstance(node, ast.Name):
        pass
    elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        _check(node.operand, text)
    elif isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
        _check(node.left, text)
        _check(node.right, text)
    else:
        what = type(node.op).__name__ if isinstance(node, ast.BinOp | ast.UnaryOp) else type(node).__name__
        raise ExprError(f"expression {text!r}: {what} is not allowed (only integers, names, + - * //)")


def names(text: str | int) -> set[str]:
    """The names an expression reads."""
    return {n.id for n in ast.walk(parse(text)) if isinstance(n, ast.Name)}


def evaluate(text: str | int, env: Mapping[str, object]) -> int:
    """Evaluate ``text`` with the integer names of ``env``."""
    return _eval(parse(text), env, text)


def _eval(node: ast.AST, env: Mapping[str, object], text: str | int) -> int:
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        if node.id not in env:
            raise ExprError(f"expression {text!r}: unknown name {node.id!r}")
        value = env[node.id]
        if isinstance(value, bool) or not isinstance(value, int):
            raise ExprError(f"expression {text!r}: {node.id} = {value!r} is not an integer")
        return value
    if isinstance(node, ast.UnaryOp):
        return -_eval(node.operand, env, text)
    left = _eval(node.left, env, text)
    right = _eval(node.right, env, text)
    if isinstance(node.op, ast.FloorDiv) and right == 0:
        raise ExprError(f"expression {text!r}: division by zero")
    return _BINOPS[type(node.op)](left, right)
