"""Calls of a script's functions written at module level, read from the script's source, for probes that
repeat a call at the end of the run when the function was defined after the last evaluation forward (so it
was never wrapped: nothing ran in the session between its definition and its call).

Only calls whose arguments are plain names of the module (or constants) are returned, with the values those
names hold at the end of the run: a probe that compares the function with itself on values derived from
them (a metamorphic probe) needs no more than that; a probe that compares with the original call's result
must not use them.
"""

from __future__ import annotations

import ast
import functools
from typing import Any, Iterator


@functools.lru_cache(maxsize=8)
def _tree(filename: str) -> ast.Module | None:
    try:
        with open(filename, encoding="utf-8") as f:
            return ast.parse(f.read())
    except (OSError, SyntaxError, ValueError, UnicodeDecodeError):
        return None


def _module_nodes(tree: ast.Module) -> Iterator[ast.AST]:
    """Every node of the module's own statements, outside function, class and lambda bodies."""
    stack: list[ast.AST] = list(reversed(tree.body))
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        yield node
        stack.extend(reversed(list(ast.iter_child_nodes(node))))


_MISSING = object()


def _value(node: ast.AST, namespace: dict) -> Any:
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        return namespace.get(node.id, _MISSING)
    return _MISSING


def module_calls(filename: str, functions: dict[str, Any], namespace: dict) \
        -> Iterator[tuple[str, Any, tuple, dict, int]]:
    """(name, function, args, kwargs, line) of the first module-level call of each of ``functions``' names
    whose arguments are all names of ``namespace`` or constants."""
    tree = _tree(filename)
    if tree is None:
        return
    done: set[str] = set()
    for node in _module_nodes(tree):
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name):
            continue
        name = node.func.id
        if name not in functions or name in done or namespace.get(name) is not functions[name][0]:
            continue
        if any(isinstance(a, ast.Starred) for a in node.args) or any(k.arg is None for k in node.keywords):
            continue
        args = tuple(_value(a, namespace) for a in node.args)
        kwargs = {k.arg: _value(k.value, namespace) for k in node.keywords}
        if any(v is _MISSING for v in args) or any(v is _MISSING for v in kwargs.values()):
            continue
        done.add(name)
        yield name, functions[name][0], args, kwargs, node.lineno
