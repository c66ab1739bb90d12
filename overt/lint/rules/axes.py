"""Axes that lose their meaning, where the code shows the axes (issue 33): OVT421 ``reshape-moves-axis``
and OVT423 ``bidirectional-last-step`` (their runtime checks: :mod:`overt.guards.axes`).

``reshape-moves-axis``: a tensor's dimensions unpacked from its own shape (``B, H, W, C = x.shape``)
and then written in another order as the shape of a ``reshape``/``view`` of that same tensor
(``x.reshape(B, C, H, W)``, ``x.view(B, T, H * D)`` after ``B, H, T, D = x.shape``).  Reshape keeps
the memory order, so naming the axes in another order is a permutation done with reshape: the
shape is right and the contents are scrambled.  Silent unless the reshaped tensor is the very name
whose shape was unpacked, bound to nothing else between the two lines (``x = x.transpose(1, 2)``
in between makes the old names describe another layout); names that are not from the unpacking
(``-1``, ``n_head``) say nothing either way; a name used twice stops the rule.

``bidirectional-last-step``: the output of a ``nn.LSTM``/``GRU``/``RNN`` built with
``bidirectional=True`` (a literal) in the same class, read at the last time step keeping all its
features (``out[:, -1]``/``out[:, -1, :]`` with ``batch_first=True``, ``out[-1]`` without): the
backward half there has seen one token.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from overt.lint.index import FileIndex, dotted, kwarg
from overt.lint.rules.base import Hit, rule

_SAME = frozenset({"contiguous", "clone", "detach", "float", "half", "double", "to", "cpu", "cuda"})
_RNNS = frozenset({"LSTM", "GRU", "RNN"})


def _unpacked(node: ast.Assign) -> tuple[str, list[str | None]] | None:
    """``(tensor, names)`` of ``a, b, c = tensor.shape`` (or ``tensor.size()``); ``None`` for ``_``."""
    if len(node.targets) != 1 or not isinstance(node.targets[0], ast.Tuple):
        return None
    value = node.value
    if isinstance(value, ast.Attribute) and value.attr == "shape":
        tensor = dotted(value.value)
    elif isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and value.func.attr == "size" \
            and not value.args and not value.keywords:
        tensor = dotted(value.func.value)
    else:
        return None
    names: list[str | None] = []
    for elt in node.targets[0].elts:
        if not isinstance(elt, ast.Name):
            return None
        names.append(None if elt.id == "_" else elt.id)
    if tensor is None or len(names) < 2:
        return None
    return tensor, names


def _receiver(call: ast.Call) -> tuple[str | None, list[ast.expr]] | None:
    """``(tensor, shape arguments)`` of ``tensor[.contiguous()].reshape(...)``/``view(...)`` or
    ``torch.reshape(tensor, shape)``."""
    func = call.func
    if not isinstance(func, ast.Attribute) or func.attr not in ("reshape", "view"):
        return None
    if dotted(func.value) == "torch" and func.attr == "reshape":
        if len(call.args) != 2:
            return None
        base, args = call.args[0], [call.args[1]]
    else:
        base, args = func.value, list(call.args)
    while isinstance(base, ast.Call) and isinstance(base.func, ast.Attribute) and base.func.attr in _SAME:
        base = base.func.value
    if len(args) == 1 and isinstance(args[0], (ast.Tuple, ast.List)):
        args = list(args[0].elts)
    if not args or any(isinstance(a, ast.Starred) for a in args) or call.keywords:
        return None
    return dotted(base), args


def _order(args: list[ast.expr], names: list[str | None]) -> list[list[int]] | None:
    """Per shape argument, the positions (in the unpacking) of the unpacked names it uses, sorted (a
    product merges axes whatever the order of its factors); None when a name is used twice (it names
    something else than one axis)."""
    known = {n: k for k, n in enumerate(names) if n is not None}
    groups: list[list[int]] = []
    seen: set[int] = set()
    for arg in args:
        group = sorted(known[node.id] for node in ast.walk(arg) if isinstance(node, ast.Name) and node.id in known)
        if seen & set(group) or len(set(group)) != len(group):
            return None
        seen |= set(group)
        if group:
            groups.append(group)
    return groups


def _moved(groups: list[list[int]]) -> int | None:
    """The first unpacked position written after a later one (an axis moved), or None."""
    last = -1
    for group in groups:
        if group[0] < last:
            return group[0]
        last = group[-1]
    return None


def _fix(tensor: str, groups: list[list[int]], ndim: int, how: str, written: str) -> str:
    order = [k for group in groups for k in group]
    if sorted(order) != list(range(ndim)):
        return f"move the axes with {tensor}.permute(...)/movedim/transpose first, then {how}"
    perm = ", ".join(map(str, order))
    if all(len(group) == 1 for group in groups):
        return f"{tensor}.permute({perm}) moves the axes (no reshape needed)"
    return f"{tensor}.permute({perm}).reshape({written}): move the axes first, then merge them"


def _rebound(ix: FileIndex, func: ast.AST, tensor: str, start: int, call: ast.Call) -> bool:
    """Whether ``tensor`` is bound again between line ``start`` and the call (or anywhere in a loop
    around the call that does not hold the unpacking too)."""
    stmt = ix.statement_of(call)
    loops = [lp for lp in ix.enclosing_loops(call) if not (lp.lineno <= start <= (lp.end_lineno or lp.lineno))]
    for node in ix.scope_nodes(func):
        if node is stmt or not isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.For)):
            continue
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        bound = {dotted(e) for t in targets for e in (t.elts if isinstance(t, (ast.Tuple, ast.List)) else [t])}
        if tensor not in bound:
            continue
        if start < node.lineno < call.lineno:
            return True
        if any(lp.lineno <= node.lineno <= (lp.end_lineno or lp.lineno) for lp in loops):
            return True
    return False


@rule("reshape-moves-axis")
def reshape_moves_axis(ix: FileIndex) -> Iterator[Hit]:
    """``B, H, W, C = x.shape`` then ``x.reshape(B, C, H, W)`` (issue 33; Selen-Suyue/DensePolicy2D#3,
    jsbaan/transformer-from-scratch#6)."""
    unpackings: dict[int, list[tuple[ast.Assign, str, list[str | None]]]] = {}
    for func_list in ix.functions.values():
        for func in func_list:
            for node in ix.scope_nodes(func):
                if isinstance(node, ast.Assign):
                    found = _unpacked(node)
                    if found:
                        unpackings.setdefault(id(func), []).append((node, *found))
    if not unpackings:
        return
    for call in ix.calls:
        got = _receiver(call)
        if got is None or got[0] is None:
            continue
        tensor, args = got
        func = ix.enclosing_function(call)
        if func is None:
            continue
        before = [u for u in unpackings.get(id(func), []) if u[1] == tensor and u[0].lineno < call.lineno]
        if not before:
            continue
        assign, _, names = max(before, key=lambda u: u[0].lineno)
        groups = _order(args, names)
        moved = _moved(groups) if groups else None
        if moved is None or _rebound(ix, func, tensor, assign.lineno, call):
            continue
        shown = names[moved]
        unpacked = ", ".join(n or "_" for n in names)
        written = ", ".join(ast.unparse(a) for a in args)
        yield Hit("reshape-moves-axis", call,
                  f"`{ast.unparse(call.func)}({written})` names the axes of `{tensor}` in another order than its "
                  f"shape has them (`{unpacked} = {tensor}.shape`, line {assign.lineno}): `{shown}` moves. reshape "
                  f"and view keep the memory order, so this does not move the axis: the result has the written "
                  f"shape and every slice of it holds values interleaved from the other axes (channels-last images "
                  f"read as channels-first, heads merged before the head axis is moved behind the sequence axis)",
                  fix=_fix(tensor, groups, len(names), ast.unparse(call.func).rsplit(".", 1)[-1], written))


def _bidirectional_rnns(ix: FileIndex, cls: ast.ClassDef) -> dict[str, bool]:
    """``self.<attr>`` -> batch_first, for the RNN modules built with a literal ``bidirectional=True``."""
    out: dict[str, bool] = {}
    for node in ast.walk(cls):
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.value, ast.Call)):
            continue
        target = dotted(node.targets[0]) or ""
        callee = (dotted(node.value.func) or "").rsplit(".", 1)[-1]
        if not target.startswith("self.") or callee not in _RNNS:
            continue
        bidi, first = kwarg(node.value, "bidirectional"), kwarg(node.value, "batch_first")
        if not (isinstance(bidi, ast.Constant) and bidi.value is True):
            continue
        if first is not None and not (isinstance(first, ast.Constant) and isinstance(first.value, bool)):
            continue
        out[target] = bool(first.value) if first is not None else False
    return out


def _last_step(index: ast.expr, batch_first: bool) -> bool:
    """``[:, -1]``/``[:, -1, :]`` (batch first) or ``[-1]``/``[-1, :, :]`` (time first)."""
    items = list(index.elts) if isinstance(index, ast.Tuple) else [index]

    def full(e: ast.expr) -> bool:
        return isinstance(e, ast.Slice) and e.lower is None and e.upper is None and e.step is None

    def last(e: ast.expr) -> bool:
        return isinstance(e, ast.UnaryOp) and isinstance(e.op, ast.USub) and isinstance(e.operand, ast.Constant) \
            and e.operand.value == 1

    time = 1 if batch_first else 0
    if len(items) <= time or len(items) > 3 or not last(items[time]):
        return False
    return all(full(e) for k, e in enumerate(items) if k != time)


@rule("bidirectional-last-step")
def bidirectional_last_step(ix: FileIndex) -> Iterator[Hit]:
    """``out, _ = self.lstm(x)`` of a bidirectional LSTM, then ``out[:, -1, :]`` (issue 33;
    yunjey/pytorch-tutorial#149)."""
    for cls in ix.classes.values():
        rnns = _bidirectional_rnns(ix, cls)
        if not rnns:
            continue
        for func in cls.body:
            if not isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            bindings: list[tuple[int, str, str | None]] = []  # (line, name, the RNN whose output it holds)
            reads: list[ast.Subscript] = []
            for node in ix.scope_nodes(func):
                if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.For)):
                    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                    value = node.value if isinstance(node, ast.Assign) else None
                    first = None
                    if len(targets) == 1 and isinstance(targets[0], ast.Tuple) and targets[0].elts:
                        first = targets[0].elts[0]
                    if isinstance(value, ast.Subscript) and isinstance(value.slice, ast.Constant) \
                            and value.slice.value == 0:
                        first, value = targets[0], value.value
                    called = dotted(value.func) if isinstance(value, ast.Call) else None
                    for t in targets:
                        for e in (t.elts if isinstance(t, (ast.Tuple, ast.List)) else [t]):
                            if isinstance(e, ast.Name):
                                held = called if e is first and called in rnns else None
                                bindings.append((node.lineno, e.id, held))
                elif isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) \
                        and isinstance(node.ctx, ast.Load):
                    reads.append(node)
            for node in reads:
                line = ix.statement_of(node).lineno
                earlier = [b for b in bindings if b[1] == node.value.id and b[0] < line]
                if not earlier:
                    continue
                bound_at, name, rnn = max(earlier, key=lambda b: b[0])
                if rnn is None or not _last_step(node.slice, rnns[rnn]):
                    continue
                fix = (f"torch.cat([{name}[:, -1, :H], {name}[:, 0, H:]], dim=-1)" if rnns[rnn]
                       else f"torch.cat([{name}[-1, :, :H], {name}[0, :, H:]], dim=-1)")
                yield Hit("bidirectional-last-step", node,
                          f"`{ast.unparse(node)}` reads the output of the bidirectional `{rnn}` (line {bound_at}) "
                          f"at its last time step: the forward half there has read the whole sequence, but the "
                          f"backward half runs from the end and has seen one token, so half of the features "
                          f"carry almost nothing",
                          fix=f"take the forward half at the last step and the backward half at the first: "
                              f"{fix} (H the hidden size), or the final hidden states "
                              f"torch.cat([h_n[-2], h_n[-1]], dim=-1)")
