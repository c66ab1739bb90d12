"""A top-k list of item ids padded with a real item id, then scored whole (part of OVT824
``metric-off-definition``).

Precision@k, recall@k and hit@k count the items the model *recommended* that the user liked.  A list of
recommended ids kept in a buffer of k slots that starts as zeros (``np.zeros(k, dtype=int)``,
``torch.zeros(k, dtype=torch.long)``, ``np.full(k, 0)``, ``[0] * k``), filled with a ranking that can be
shorter than k (the candidates left after filtering the items already seen, cut by ``argsort(...)[:k]``)
and then scored whole counts each unfilled slot as a recommendation of item 0 -- an item the model never ranked, and in
popularity-ordered catalogues the most liked one -- so the metric is inflated (benfred/implicit#330, w223).

Proven from the code, in one scope: a name bound to an integer buffer of zeros whose last dimension is
``n``; a prefix of it (or of one of its rows) filled by ``buf[:m] = v`` with ``m`` not ``n`` itself
(``buf[:len(top)] = top``), or slot by slot in a loop over ``enumerate(v)``; ``v`` the candidates a
condition kept (``nonzero``, ``np.where(cond)``, ``np.flatnonzero``: positions counted from 0, so 0 is a
real item, and possibly fewer than k of them) indexed by a ranking cut by ``[:k]`` (``argsort``,
``argpartition``); and
the whole buffer (or a row of it) then read as item ids in a membership test (``x in liked for x in buf``,
``np.isin(buf, ...)``, ``torch.isin``, ``np.in1d``, ``np.intersect1d``, ``set(buf) & ...``).  A buffer
filled with -1, a fill over the whole buffer, a ranking of every item or a ``topk`` (always k ids), ids
counted from 1, or a read of the filled part only (``buf[:len(top)]``) is silent.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from overt.lint.index import FileIndex, dotted, is_const, kwarg, names_in
from overt.lint.rules.base import Hit

_INT_DTYPES = {"int", "long", "int64", "int32", "int16", "torch.long", "torch.int64", "torch.int32", "torch.int",
               "np.int64", "np.int32", "np.int_", "np.intp", "numpy.int64", "numpy.int32", "np.int16"}
_INDEXES = {"nonzero", "flatnonzero", "argwhere", "where"}
_MEMBERSHIP = {"isin", "in1d", "intersect1d"}


def _zeros_size(node: ast.AST) -> ast.AST | None:
    """The last dimension of ``node`` when it builds an integer buffer of zeros, else None."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):  # [0] * k
        for lst, n in ((node.left, node.right), (node.right, node.left)):
            if isinstance(lst, ast.List) and len(lst.elts) == 1 and is_const(lst.elts[0], 0):
                return n
        return None
    integer = False
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("long", "int") \
            and not node.args:
        node, integer = node.func.value, True
    elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "astype" \
            and node.args and (dotted(node.args[0]) in _INT_DTYPES or is_const(node.args[0], "int64")):
        node, integer = node.func.value, True
    if isinstance(node, ast.Call) and dotted(node.func) in ("torch.full", "np.full", "numpy.full") and \
            len(node.args) >= 2 and isinstance(node.args[1], ast.Constant) and type(node.args[1].value) is int \
            and node.args[1].value == 0:  # np.full(k, 0): an integer array of zeros unless a dtype says otherwise
        dtype = kwarg(node, "dtype")
        if dtype is not None and not (dotted(dtype) in _INT_DTYPES or
                                      (isinstance(dtype, ast.Constant) and str(dtype.value).startswith("int"))):
            return None
        shape = node.args[0]
        if isinstance(shape, (ast.Tuple, ast.List)):
            return shape.elts[-1] if shape.elts else None
        return shape
    if not (isinstance(node, ast.Call) and dotted(node.func) in ("torch.zeros", "np.zeros", "numpy.zeros")
            and node.args):
        return None
    dtype = kwarg(node, "dtype")
    if dtype is not None and (dotted(dtype) in _INT_DTYPES or
                              (isinstance(dtype, ast.Constant) and str(dtype.value).startswith("int"))):
        integer = True
    if not integer:
        return None
    shape = node.args[0]
    if isinstance(shape, (ast.Tuple, ast.List)):
        return shape.elts[-1] if shape.elts else None
    return shape if len(node.args) == 1 else node.args[-1]


def _bindings(ix: FileIndex, scope: ast.AST, name: str) -> list[ast.AST | None]:
    out: list[ast.AST | None] = []
    for node in ix.scope_nodes(scope):
        if isinstance(node, ast.Assign):
            for t in node.targets:
                if isinstance(t, ast.Name) and t.id == name:
                    out.append(node.value)
                elif isinstance(t, (ast.Tuple, ast.List)) and name in names_in(t):
                    out.append(None)
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign, ast.For)) and name in names_in(node.target):
            out.append(None)
        elif isinstance(node, (ast.comprehension,)) and name in names_in(node.target):
            out.append(None)
    return out


def _ranked_cut(node: ast.AST) -> bool:
    """``node`` is ``<argsort or argpartition>(...)[:k]``: at most k positions, possibly fewer."""
    if not (isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Slice) and node.slice.lower is None
            and node.slice.upper is not None and node.slice.step is None):
        return False
    inner = node.value
    if isinstance(inner, ast.Subscript):  # np.argsort(s)[::-1][:k]
        inner = inner.value
    return isinstance(inner, ast.Call) and (
        (isinstance(inner.func, ast.Attribute) and inner.func.attr in ("argsort", "argpartition")))


def _index_array(ix: FileIndex, scope: ast.AST, node: ast.AST) -> bool:
    """``node`` names the positions, counted from 0, that a condition kept (``nonzero``, ``np.where(cond)``):
    a filtered candidate set, which can hold fewer than k items."""
    if not isinstance(node, ast.Name):
        return False
    values = _bindings(ix, scope, node.id)
    if len(values) != 1 or values[0] is None:
        return False
    value = values[0]
    while True:
        if isinstance(value, ast.Subscript) and isinstance(value.slice, ast.Constant) and value.slice.value == 0:
            value = value.value
        elif isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and \
                value.func.attr in ("squeeze", "flatten", "ravel", "view", "reshape", "cpu", "numpy"):
            value = value.func.value
        else:
            break
    if not isinstance(value, ast.Call):
        return False
    last = value.func.attr if isinstance(value.func, ast.Attribute) else (dotted(value.func) or "")
    if last not in _INDEXES:
        return False
    if last == "where" and len(value.args) != 1:
        return False
    return True


def _ranked_ids(ix: FileIndex, scope: ast.AST, node: ast.AST, depth: int = 0) -> bool:
    """``node`` holds item ids counted from 0: a filtered candidate set indexed by a ranking cut to k, so
    fewer than k when fewer candidates are left (a ranking of every item, always k long, is not)."""
    if depth > 3:
        return False
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
            node.func.attr in ("tolist", "numpy", "cpu", "long", "astype"):
        return _ranked_ids(ix, scope, node.func.value, depth)
    if isinstance(node, ast.Name):
        values = _bindings(ix, scope, node.id)
        return len(values) == 1 and values[0] is not None and _ranked_ids(ix, scope, values[0], depth + 1)
    if isinstance(node, ast.Subscript) and _index_array(ix, scope, node.value):  # candidates[order[:k]]
        sl = node.slice
        if isinstance(sl, ast.Name):
            values = _bindings(ix, scope, sl.id)
            return len(values) == 1 and values[0] is not None and _ranked_cut(values[0])
        return _ranked_cut(sl)
    return False


def _same(a: ast.AST, b: ast.AST) -> bool:
    return ast.dump(a) == ast.dump(b)


def _prefix_fills(ix: FileIndex, scope: ast.AST, buf: str, size: ast.AST) -> Iterator[tuple[ast.stmt, ast.AST]]:
    """(the statement, the ids written) for each fill of a prefix of ``buf`` (or a row of it) shorter than
    ``size`` may be."""
    for node in ix.scope_nodes(scope):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Subscript):
            t = node.targets[0]
            if dotted(t.value) != buf:
                continue
            sl = t.slice.elts[-1] if isinstance(t.slice, ast.Tuple) and t.slice.elts else t.slice
            if isinstance(sl, ast.Slice) and sl.lower is None and sl.step is None and sl.upper is not None \
                    and not _same(sl.upper, size):
                yield node, node.value
        elif isinstance(node, ast.For) and isinstance(node.iter, ast.Call) and dotted(node.iter.func) == "enumerate" \
                and node.iter.args and isinstance(node.target, ast.Tuple) and len(node.target.elts) == 2 \
                and all(isinstance(e, ast.Name) for e in node.target.elts):
            pos, item = (e.id for e in node.target.elts)  # type: ignore[attr-defined]
            for stmt in node.body:
                if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and \
                        isinstance(stmt.targets[0], ast.Subscript) and dotted(stmt.targets[0].value) == buf and \
                        isinstance(stmt.targets[0].slice, ast.Name) and stmt.targets[0].slice.id == pos and \
                        isinstance(stmt.value, ast.Name) and stmt.value.id == item:
                    yield node, node.iter.args[0]


def _whole(node: ast.AST, buf: str) -> bool:
    """``node`` is the whole buffer or one row of it (``buf``, ``buf.tolist()``, ``buf[u]``)."""
    while isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
            node.func.attr in ("tolist", "numpy", "cpu", "flatten", "ravel"):
        node = node.func.value
    if isinstance(node, ast.Call) and dotted(node.func) in ("list", "set", "np.asarray", "np.array") and node.args:
        return _whole(node.args[0], buf)
    if isinstance(node, ast.Subscript) and isinstance(node.slice, (ast.Name, ast.Constant)):
        node = node.value
    return isinstance(node, ast.Name) and node.id == buf


def _membership(ix: FileIndex, scope: ast.AST, buf: str, after: int) -> ast.AST | None:
    """The first read of the whole buffer as item ids in a membership test, after line ``after``."""
    for node in ix.scope_nodes(scope):
        if getattr(node, "lineno", 0) <= after:
            continue
        if isinstance(node, ast.Call):
            last = (dotted(node.func) or "").rsplit(".", 1)[-1]
            if last in _MEMBERSHIP and node.args and _whole(node.args[0], buf):
                return node
            if isinstance(node.func, ast.Attribute) and node.func.attr in ("intersection", "isdisjoint") and \
                    node.args and (_whole(node.func.value, buf) or _whole(node.args[0], buf)):
                return node
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitAnd) and \
                any(isinstance(s, ast.Call) and dotted(s.func) == "set" and _whole(s, buf)
                    for s in (node.left, node.right)):
            return node
        if isinstance(node, (ast.GeneratorExp, ast.ListComp, ast.SetComp)) and len(node.generators) == 1:
            gen = node.generators[0]
            if isinstance(gen.target, ast.Name) and _whole(gen.iter, buf):
                var = gen.target.id
                for sub in (n for part in [node.elt, *gen.ifs] for n in ast.walk(part)):
                    if isinstance(sub, ast.Compare) and len(sub.ops) == 1 and isinstance(sub.ops[0], ast.In) and \
                            var in names_in(sub.left):
                        return node
        if isinstance(node, ast.For) and isinstance(node.target, ast.Name) and _whole(node.iter, buf):
            var = node.target.id
            for stmt in node.body:
                for sub in ast.walk(stmt):
                    if isinstance(sub, ast.Compare) and len(sub.ops) == 1 and isinstance(sub.ops[0], ast.In) and \
                            var in names_in(sub.left):
                        return node
    return None


def _filled_again(ix: FileIndex, scope: ast.AST, buf: str) -> bool:
    """``buf`` filled whole with another value (``buf[:] = -1``, ``buf.fill_(-1)``, ``buf -= 1``)."""
    for node in ix.scope_nodes(scope):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                node.func.attr in ("fill_", "fill", "masked_fill_") and dotted(node.func.value) == buf:
            return True
        if isinstance(node, ast.AugAssign) and dotted(node.target) == buf:
            return True
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Subscript) and dotted(t.value) == buf and
                                                not isinstance(node.value, ast.Name) and
                                                isinstance(t.slice, ast.Compare) for t in node.targets):
            return True  # buf[buf == 0] = -1
    return False


def padded_ids(ix: FileIndex) -> Iterator[Hit]:
    """Hits of ``metric-off-definition`` for a top-k id buffer padded with item 0 and scored whole."""
    scopes: list[ast.AST] = [ix.tree] + [n for n in ast.walk(ix.tree)
                                         if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    for scope in scopes:
        for node in ix.scope_nodes(scope):
            if not (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)):
                continue
            size = _zeros_size(node.value)
            if size is None:
                continue
            buf = node.targets[0].id
            if len(_bindings(ix, scope, buf)) != 1 or _filled_again(ix, scope, buf):
                continue
            fill = next(((stmt, ids) for stmt, ids in _prefix_fills(ix, scope, buf, size)
                         if _ranked_ids(ix, scope, ids)), None)
            if fill is None:
                continue
            stmt, ids = fill
            read = _membership(ix, scope, buf, stmt.lineno)
            if read is None:
                continue
            yield Hit("metric-off-definition", node.value,
                      f"`{buf} = {ix.segment(node.value)}` keeps item ids in slots that start as 0, and "
                      f"`{ix.segment(stmt).splitlines()[0]}` "
                      f"(line {stmt.lineno}) fills only as many slots as `{ix.segment(ids)}` holds: the candidates "
                      f"a condition kept, ranked and cut to {ix.segment(size)}, fewer whenever fewer candidates are "
                      "left; "
                      f"`{ix.segment(read).splitlines()[0]}` (line {read.lineno}) then scores every slot as a "
                      "recommended item, so each unfilled slot counts as a recommendation of item 0, which the model "
                      "never ranked, and a hit whenever item 0 is relevant: the precision/recall/hit rate reported "
                      "is not the metric's, usually higher",
                      fix=f"start the buffer with an id that is no item (`np.full(k, -1)`, `torch.full((k,), -1)`), "
                          f"or score only the filled part (`{buf}[:len(...)]`); precision@k still divides by k")
