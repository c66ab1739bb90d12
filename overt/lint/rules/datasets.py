"""A Dataset whose ``__len__`` counts its fields, not its samples (OVT523 ``dataset-length-wrong``)."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from overt.lint.index import FileIndex
from overt.lint.rules.base import Hit, rule

_GROWERS = frozenset({"append", "extend", "insert", "update", "setdefault", "pop", "clear"})


def _method(cls: ast.ClassDef, name: str) -> ast.FunctionDef | None:
    return next((f for f in cls.body if isinstance(f, ast.FunctionDef) and f.name == name), None)


def _self_attr(node: ast.AST) -> str | None:
    """``"data"`` of ``self.data``."""
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self":
        return node.attr
    return None


def _measured(length: ast.FunctionDef) -> tuple[ast.Return, str] | None:
    """The one ``return len(self.X)`` of ``__len__``, and ``X``."""
    returns = [n for n in ast.walk(length) if isinstance(n, ast.Return)]
    if len(returns) != 1:
        return None
    value = returns[0].value
    if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id == "len" \
            and len(value.args) == 1 and not value.keywords:
        attr = _self_attr(value.args[0])
        if attr is not None:
            return returns[0], attr
    return None


def _fields(cls: ast.ClassDef, attr: str) -> ast.expr | None:
    """The list/tuple/dict display of two or more entries that ``self.<attr>`` is bound to, when that is its
    only binding in the class and nothing grows or replaces its entries."""
    displays = []
    for node in ast.walk(cls):
        if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                for e in (t.elts if isinstance(t, (ast.Tuple, ast.List)) else [t]):
                    if _self_attr(e) == attr:
                        displays.append(node.value if isinstance(node, ast.Assign) else None)
                    if isinstance(e, ast.Subscript) and _self_attr(e.value) == attr:
                        return None  # an entry set: its entries are not known
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _GROWERS \
                and _self_attr(node.func.value) == attr:
            return None
    if len(displays) != 1:
        return None
    shown = displays[0]
    if isinstance(shown, (ast.List, ast.Tuple)) and len(shown.elts) >= 2 \
            and not any(isinstance(e, ast.Starred) for e in shown.elts):
        return shown
    if isinstance(shown, ast.Dict) and len(shown.keys) >= 2 and None not in shown.keys:
        return shown
    return None


def _read_as_fields(getitem: ast.FunctionDef, attr: str) -> ast.Subscript | None:
    """A ``self.<attr>[<constant>][<index>]`` in ``__getitem__``: the entries are per-field arrays, each indexed
    by the sample."""
    for node in ast.walk(getitem):
        if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Subscript) \
                and _self_attr(node.value.value) == attr and isinstance(node.value.slice, ast.Constant) \
                and isinstance(node.value.slice.value, (int, str)):
            return node
    return None


@rule("dataset-length-wrong")
def dataset_length_wrong(ix: FileIndex) -> Iterator[Hit]:
    for cls in ix.classes.values():
        length, getitem = _method(cls, "__len__"), _method(cls, "__getitem__")
        if length is None or getitem is None:
            continue
        measured = _measured(length)
        if measured is None:
            continue
        ret, attr = measured
        shown = _fields(cls, attr)
        if shown is None:
            continue
        read = _read_as_fields(getitem, attr)
        if read is None:
            continue
        n = len(shown.keys) if isinstance(shown, ast.Dict) else len(shown.elts)
        first = ix.segment(read.value)
        yield Hit("dataset-length-wrong", ret,
                  f"`{cls.name}.__len__` returns len(self.{attr}), the number of entries of "
                  f"`{ix.segment(shown)}` (line {shown.lineno}), always {n}, while __getitem__ reads "
                  f"`{ix.segment(read)}` (line {read.lineno}): each entry is an array of samples, so the data set "
                  f"claims {n} samples, a DataLoader yields only the first {n} each epoch, and the rest of the data "
                  "is never seen",
                  fix=f"return the number of samples: len({first})")
