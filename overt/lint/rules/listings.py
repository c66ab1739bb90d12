"""Two directory listings paired by position, one of them unsorted (OVT522 ``listings-paired-unsorted``,
issue 33 family 4: labels that still belong to their inputs).

``os.listdir``, ``glob.glob``, ``os.scandir`` and ``Path.iterdir``/``glob``/``rglob`` return entries
in an arbitrary order (the file system's).  Two listings -- input files and label files, images and
masks -- paired by position (``zip(xs, ys)``, or ``xs[i]`` with ``ys[i]``) then pair each input with
some other sample's label unless both are sorted: the model trains on shuffled labels and nothing
fails (fast-DiT#4).  Reported at the pairing when at least one of the two listings is not sorted
(``sorted(...)`` around it, ``.sort()`` on it or a rebinding ``xs = sorted(xs)``, anywhere in the file).  Listings that are
filtered (``[f for f in os.listdir(d) if ...]``, ``filter``, ``list``) keep their order and count as
listings.  Quiet when both are sorted -- the rule cannot see whether two sorted listings line up
(names numbered ``x_00`` and ``y_0`` sort differently; the guard ``labels-unrelated-to-inputs`` sees
the effect at run time) -- and when an entry of one is derived from the other's name.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from overt.lint.index import FileIndex
from overt.lint.rules.base import Hit, rule

_LISTING_FUNCS = frozenset({"os.listdir", "glob.glob", "glob.iglob", "os.scandir"})
_LISTING_METHODS = frozenset({"iterdir", "glob", "rglob"})


def _listing(ix: FileIndex, node: ast.AST) -> bool | None:
    """None when ``node`` is not a directory listing; else whether it is sorted."""
    if isinstance(node, ast.Call):
        q = ix.qualname(node.func) or ""
        if q in ("sorted",) and node.args:
            return True if _listing(ix, node.args[0]) is not None else None
        if q in ("list", "filter", "tuple") and node.args:
            return _listing(ix, node.args[-1])
        if q in _LISTING_FUNCS:
            return False
        if isinstance(node.func, ast.Attribute) and node.func.attr in _LISTING_METHODS:
            return False  # Path.iterdir/glob/rglob (glob.glob itself resolved above)
        return None
    if isinstance(node, (ast.ListComp, ast.GeneratorExp)) and len(node.generators) == 1:
        return _listing(ix, node.generators[0].iter)
    return None


def _scope(ix: FileIndex, node: ast.AST) -> int:
    """Names are paired within one function; ``self.x`` within one class."""
    func = ix.enclosing_function(node)
    return id(func) if func is not None else 0


@rule("listings-paired-unsorted")
def listings_paired_unsorted(ix: FileIndex) -> Iterator[Hit]:
    listings: dict[tuple[int, str], tuple[ast.AST, bool]] = {}  # (scope, name) -> (assignment, sorted)
    for node in ast.walk(ix.tree):
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            state = _listing(ix, node.value)
            if state is None:
                continue
            text = ast.unparse(node.targets[0])
            scope = _class_scope(ix, node) if text.startswith("self.") else _scope(ix, node)
            listings[(scope, text)] = (node, state)
    if not listings:
        return
    for node in ast.walk(ix.tree):  # xs = sorted(xs) (or ys = sorted(xs)) anywhere: sorted
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.value, ast.Call) \
                and ix.qualname(node.value.func) == "sorted" and node.value.args:
            src = ast.unparse(node.value.args[0])
            scope = _class_scope(ix, node) if src.startswith("self.") else _scope(ix, node)
            if (scope, src) in listings:
                text = ast.unparse(node.targets[0])
                tscope = _class_scope(ix, node) if text.startswith("self.") else _scope(ix, node)
                listings[(tscope, text)] = (node, True)
    for call in ix.calls:  # xs.sort() anywhere: sorted
        if isinstance(call.func, ast.Attribute) and call.func.attr == "sort":
            text = ast.unparse(call.func.value)
            for key in [k for k in listings if k[1] == text]:
                listings[key] = (listings[key][0], True)

    def find(expr: ast.AST) -> tuple[str, bool] | None:
        text = ast.unparse(expr)
        scope = _class_scope(ix, expr) if text.startswith("self.") else _scope(ix, expr)
        hit = listings.get((scope, text))
        if hit is not None:
            return text, hit[1]
        state = _listing(ix, expr)
        return (text, state) if state is not None else None

    for call in ix.calls:
        if ix.qualname(call.func) != "zip" or len(call.args) < 2:
            continue
        found = [f for f in (find(a) for a in call.args) if f is not None]
        if len(found) >= 2 and not all(s for _, s in found):
            yield _hit(call, [t for t, _ in found], [t for t, s in found if not s])
    # xs[i] and ys[i] with one index in one function
    seen: dict[tuple[int, str], list[tuple[ast.Subscript, str, bool]]] = {}
    for node in ast.walk(ix.tree):
        if not isinstance(node, ast.Subscript) or isinstance(node.slice, (ast.Slice, ast.Constant, ast.UnaryOp)):
            continue  # xs[0] beside ys[0] picks one file of each (a lookup), not a pairing of every entry
        f = find(node.value)
        if f is None:
            continue
        key = (_scope(ix, node), ast.unparse(node.slice))
        seen.setdefault(key, []).append((node, f[0], f[1]))
    for group in seen.values():
        names = {}
        for node, text, state in group:
            names.setdefault(text, (node, state))
        if len(names) < 2 or all(state for _, state in names.values()):
            continue
        last = max((node for node, _ in names.values()), key=lambda n: (n.lineno, n.col_offset))
        yield _hit(last, list(names), [t for t, (_, s) in names.items() if not s])


def _class_scope(ix: FileIndex, node: ast.AST) -> int:
    func = ix.enclosing_function(node)
    cls = ix.enclosing_class(func) if func is not None else None
    return id(cls) if cls is not None else _scope(ix, node)


def _hit(node: ast.AST, names: list[str], unsorted: list[str]) -> Hit:
    return Hit(
        "listings-paired-unsorted", node,
        f"the directory listings {', '.join(names)} are paired by position, but {', '.join(unsorted)} "
        f"{'is' if len(unsorted) == 1 else 'are'} not sorted: os.listdir, glob and iterdir return files in the "
        "file system's order, so each input can be paired with another sample's label and the model trains on "
        "shuffled labels without any error",
        fix="derive each label's path from its input's file name, or sort both listings by the same key "
        "(sorted(os.listdir(d)); names numbered without zero padding need a numeric key)",
    )
