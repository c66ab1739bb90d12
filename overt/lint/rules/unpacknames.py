"""A function's returned tuple unpacked by its caller into names that say the other order (one form of
OVT530 ``pairing-order-mismatch``: the rule itself is :mod:`overt.lint.rules.pairorder`).

A function defined in the file returns ``a, b`` (every ``return`` a tuple of one length) and a caller
writes ``x, y = f(...)``.  The caller's names are its reading of the positions.  A target every word of
which abbreviates a word of the value returned at *another* position -- and none of whose words names the
value at its own -- while the target at that other position does not name its own value either (all four
names saying something), reads the halves swapped (scPerturBench#13: ``return perturbed[idx], cells[idx]``
unpacked as ``ctrl, pert``).  A word of three letters or more abbreviates a word when it is that word, a
prefix of it (``pert`` of ``perturbed``) or its consonant abbreviation (``ctrl`` of ``control``).

Silent: a function whose name says it reorders (``swap``, ``reverse``, ``flip``, ``invert``, ...), one
that returns one of its own parameters as it came (a swap helper's output named by its input), a value
with no name (a call, an arithmetic expression), names too generic to say what a value is.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from overt.lint.index import FileIndex, tokens

_REORDERS = ("swap", "revers", "flip", "invert", "inverse", "transpos", "permut", "shuffl", "rotat", "sort",
             "exchange", "mirror", "other", "opposite")
_GENERIC = frozenset({"the", "out", "output", "outputs", "input", "inputs", "data", "res", "result", "results",
                      "ret", "value", "values", "tmp", "item", "items", "new", "old", "all", "get", "idx", "index",
                      "batch", "obj", "var", "num", "and", "for", "with", "self", "cls"})
_VOWELS = frozenset("aeiou")


def _head(node: ast.AST) -> str | None:
    """The name a returned value goes by: ``x``, ``x[i]``, ``self.x``, ``x.clone()``, ``x.to(dev)``."""
    while True:
        if isinstance(node, ast.Subscript):
            node = node.value
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and node.func.attr in ("clone", "detach", "to", "float", "long", "cpu", "cuda", "numpy", "copy",
                                       "contiguous", "double", "int", "squeeze", "unsqueeze", "flatten"):
            node = node.func.value
        else:
            break
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"):
        return node.attr
    return None


def _words(name: str) -> list[str]:
    return [t for t in tokens(name) if len(t) >= 3 and t not in _GENERIC and not t.isdigit()]


def _subsequence(short: str, long: str) -> bool:
    it = iter(long)
    return all(ch in it for ch in short)


def _abbreviates(t: str, w: str) -> bool:
    if t == w or (len(w) > len(t) and w.startswith(t)):
        return True
    # a consonant abbreviation: ctrl of control, pred of prediction is a prefix already
    return len(t) >= 3 and t[0] == w[0] and len(w) > len(t) + 1 and sum(c in _VOWELS for c in t[1:]) == 0 \
        and _subsequence(t, w)


def _names(target: str, value: str) -> bool:
    """Some word of ``target`` is a word of ``value``'s name or abbreviates one."""
    return any(_abbreviates(t, w) for t in _words(target) for w in tokens(value))


def _names_fully(target: str, value: str) -> bool:
    """Every word of ``target`` abbreviates a word of ``value``'s name (``pert`` of ``perturbed_cells``; not
    ``src_dict`` of ``src_lengths``, which share a qualifier only)."""
    words = _words(target)
    return bool(words) and all(any(_abbreviates(t, w) for w in tokens(value)) for t in words)


def _returned(func: ast.FunctionDef | ast.AsyncFunctionDef) -> list[str | None] | None:
    """The heads of the tuple every ``return`` of ``func`` gives, if they agree; None for a function that
    hands back one of its own parameters as it came (a swap helper's output is named by its input)."""
    params = {a.arg for a in func.args.args + func.args.kwonlyargs + func.args.posonlyargs}
    shapes: list[list[str | None]] = []
    for node in ast.walk(func):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)) and node is not func:
            continue
        if isinstance(node, ast.Return):
            if not isinstance(node.value, ast.Tuple):
                return None
            if any(isinstance(e, ast.Name) and e.id in params for e in node.value.elts):
                return None
            shapes.append([_head(e) for e in node.value.elts])
    if not shapes or any(s != shapes[0] for s in shapes[1:]):
        return None
    return shapes[0]


def unpack_hits(ix: FileIndex) -> Iterator[tuple[ast.AST, str, str, str, str]]:
    """(assignment, function, target, its value's name, the value at the target's position)."""
    for node in ix.kids:  # every node of the file
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Tuple)
                and isinstance(node.value, ast.Call)):
            continue
        targets = node.targets[0].elts
        if not all(isinstance(t, ast.Name) for t in targets) or len(targets) < 2:
            continue
        func = ix.callee(node.value)
        if func is None or any(r in func.name.lower() for r in _REORDERS):
            continue
        heads = _returned(func)
        if heads is None or len(heads) != len(targets):
            continue
        names = [t.id for t in targets]
        for i, target in enumerate(names):
            own = heads[i] is not None and _names(target, heads[i])
            others = [j for j, h in enumerate(heads) if j != i and h is not None and _names_fully(target, h)]
            if own or len(others) != 1:
                continue
            j = others[0]
            # every name of the two positions must say something: a one-letter value or a `_` proves nothing
            if heads[i] is None or not _words(heads[i]) or not _words(heads[j]) or not _words(names[j]):
                continue
            if heads[j] is not None and _names(names[j], heads[j]):
                continue
            yield node, func.name, target, heads[j], heads[i] or "?"
            break
