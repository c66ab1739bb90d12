"""An attribute written through one split's ``.dataset``, which every split of the data set shares (OVT140
``split-attribute-shared``; issue 33, w430).

Premise: the subsets ``random_split(D, ...)`` returns (and every ``Subset(D, ...)`` of one ``D``) hold ``D``
itself, not copies; so ``val_set.dataset.transform = None`` is ``D.transform = None``, for the training split
as well.  A program that wants its splits to differ (augmentation for training, none for validation) must give
each its own data set object; a write through one split changes what every other split reads.

Proven from the code, in one scope (the module or a function): names bound together from one ``random_split``
call (``a, b = random_split(D, ...)``) or from ``Subset`` calls on the same data set, an assignment to
``a.dataset.<attr>`` after them, and another of these splits read somewhere in the scope; reported when the
write changes something the program gave the data set itself -- ``D`` was built with ``<attr>=`` another value,
or ``D.<attr>`` was assigned another value before -- or when two splits write different values to the same
attribute (the later one wins for both).  Silent when the data set never had the attribute set otherwise (one
shared setting written through a split, such as a common normalisation), when the other splits are never read,
and when a split is rebuilt on its own data set object (``Subset(Dataset(...), val_set.indices)``).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass

from overt.lint.index import FileIndex, dotted, kwarg
from overt.lint.rules.base import Hit, rule

SLUG = "split-attribute-shared"
_SPLITTERS = frozenset({"random_split"})


@dataclass
class _Group:
    """The splits of one data set: their names, the data set's expression and the line they were made on."""

    names: list[str]
    source: ast.expr
    line: int
    bound: dict[str, int]  # each split's own binding line


def _call_name(call: ast.AST) -> str | None:
    if not isinstance(call, ast.Call):
        return None
    name = dotted(call.func)
    return name.rsplit(".", 1)[-1] if name else None


def _groups(nodes: list[ast.AST]) -> list[_Group]:
    """Splits bound from one ``random_split`` call, and ``Subset`` calls grouped by their data set's text."""
    out: list[_Group] = []
    subsets: dict[str, _Group] = {}
    for n in nodes:
        if not isinstance(n, ast.Assign) or len(n.targets) != 1:
            continue
        t, v = n.targets[0], n.value
        if _call_name(v) in _SPLITTERS and isinstance(v, ast.Call) and v.args \
                and isinstance(t, (ast.Tuple, ast.List)) and all(isinstance(e, ast.Name) for e in t.elts):
            out.append(_Group([e.id for e in t.elts], v.args[0], n.lineno, {e.id: n.lineno for e in t.elts}))
        elif _call_name(v) == "Subset" and isinstance(v, ast.Call) and v.args and isinstance(t, ast.Name):
            key = ast.dump(v.args[0])
            g = subsets.setdefault(key, _Group([], v.args[0], n.lineno, {}))
            g.names.append(t.id)
            g.bound[t.id] = n.lineno
    return out + [g for g in subsets.values() if len(g.names) > 1]


def _writes(nodes: list[ast.AST], names: set[str]) -> list[tuple[ast.Assign, str, str, ast.expr]]:
    """(statement, split name, attribute, value) for each ``split.dataset.attr = value``."""
    out = []
    for n in nodes:
        if not isinstance(n, ast.Assign) or len(n.targets) != 1:
            continue
        t = n.targets[0]
        if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Attribute) and t.value.attr == "dataset" \
                and isinstance(t.value.value, ast.Name) and t.value.value.id in names:
            out.append((n, t.value.value.id, t.attr, n.value))
    return out


def _given(nodes: list[ast.AST], source: ast.expr, attr: str, before: int) -> tuple[ast.expr, int] | None:
    """The value the program gave the data set's ``attr`` itself before line ``before``: a keyword of the call
    that built it (inline, or bound to its name), or an assignment ``D.attr = ...``."""
    if isinstance(source, ast.Call):
        v = kwarg(source, attr)
        return (v, source.lineno) if v is not None else None
    name = dotted(source)
    if name is None:
        return None
    found = None
    for n in nodes:
        if not isinstance(n, ast.Assign) or len(n.targets) != 1 or n.lineno >= before:
            continue
        t = n.targets[0]
        if dotted(t) == name and isinstance(n.value, ast.Call):
            v = kwarg(n.value, attr)
            found = (v, n.lineno) if v is not None else None
        elif dotted(t) == f"{name}.{attr}":
            found = (n.value, n.lineno)
    return found


def _read_after_split(nodes: list[ast.AST], name: str, split_line: int) -> int | None:
    """The first line after the split where ``name`` is read (not as the base of a ``.dataset`` write), or None."""
    written = {id(n.targets[0].value.value) for n in nodes if isinstance(n, ast.Assign) and len(n.targets) == 1
               and isinstance(n.targets[0], ast.Attribute) and isinstance(n.targets[0].value, ast.Attribute)
               and n.targets[0].value.attr == "dataset"}
    lines = [n.lineno for n in nodes if isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Load)
             and n.lineno > split_line and id(n) not in written]
    return min(lines) if lines else None


def _rebound(nodes: list[ast.AST], name: str, after: int, before: int) -> bool:
    """``name`` is bound again between two lines (``val_set = Subset(new_data, val_set.indices)``): no longer a
    split of the group."""
    return any(isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Store) and after < n.lineno < before
               for n in nodes)


def _scope_hits(ix: FileIndex, scope: ast.AST) -> Iterator[Hit]:
    nodes = ix.scope_nodes(scope)
    for g in _groups(nodes):
        writes = [w for w in _writes(nodes, set(g.names)) if w[0].lineno > g.line
                  and not _rebound(nodes, w[1], g.bound[w[1]], w[0].lineno)]
        for stmt, split, attr, value in writes:
            others = [(o, _read_after_split(nodes, o, g.line)) for o in g.names if o != split]
            others = [(o, at) for o, at in others if at is not None]
            if not others:
                continue
            given = _given(nodes, g.source, attr, stmt.lineno)
            rival = next((w for w in writes if w[1] != split and w[2] == attr and w[0].lineno > stmt.lineno
                          and ast.dump(w[3]) != ast.dump(value)), None)
            if given is not None and ast.dump(given[0]) != ast.dump(value):
                before = f"`{ix.segment(given[0])}`, given at line {given[1]}"
            elif rival is not None:
                before = None
            else:
                continue
            other, at = others[0]
            data = ix.segment(g.source)
            if before is not None:
                what = (f"every split of `{data}` (line {g.line}) reads that one object, so `{other}` (read at line "
                        f"{at}) now reads `{attr}` = `{ix.segment(value)}` too, not {before}")
            else:
                what = (f"`{ix.segment(rival[0].targets[0])}` (line {rival[0].lineno}) writes the same attribute of "
                        f"the same object afterwards, so both splits of `{data}` (line {g.line}) read "
                        f"`{ix.segment(rival[3])}` and this value is lost")
            yield Hit(SLUG, stmt,
                      f"`{ix.segment(stmt.targets[0])} = ...` writes `{attr}` of the data set `{split}` is a subset "
                      f"of, not of `{split}` alone: {what}. A transform meant for one split (augmentation off for "
                      "validation) reaches the others, and training runs on data other than the one configured, "
                      "with no error",
                      fix=f"give `{split}` its own data set object (`{split} = Subset(<a new data set with {attr}="
                          f"...>, {split}.indices)`, or a copy.copy of it) instead of writing through `.dataset`")


@rule(SLUG)
def split_attribute_shared(ix: FileIndex) -> Iterator[Hit]:
    """A write through one split's ``.dataset`` that every split sees, in the module and in every function."""
    yield from _scope_hits(ix, ix.tree)
    for node in ast.walk(ix.tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield from _scope_hits(ix, node)
