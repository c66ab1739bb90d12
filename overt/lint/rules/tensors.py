"""Rules about tensors: device moves, requires_grad, .data, graphs kept alive (OVT4xx)."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from overt.lint.analysis.devices import device_meetings
from overt.lint.analysis.events import Event, events
from overt.lint.analysis.values import values_for
from overt.lint.analysis.units import (loader_iter, loop_units, model_calls, param_names, target_names,
                                       tensor_names)
from overt.lint.index import FileIndex, dotted, is_const, kwarg
from overt.lint.rules.base import Edit, Hit, rule


@rule("to-without-assign", fixable=True)
def to_without_assign(ix: FileIndex) -> Iterator[Hit]:
    tensors = tensor_names(ix)
    for call in ix.calls:
        stmt = ix.parents.get(call)
        if not isinstance(stmt, ast.Expr) or not isinstance(call.func, ast.Attribute):
            continue
        if call.func.attr not in ("to", "cuda", "cpu"):
            continue
        recv = call.func.value
        name = dotted(recv)
        if not isinstance(recv, ast.Name) or ix.is_model(name) or (
                name not in tensors and not values_for(ix).of(recv).tensor):
            continue
        yield Hit("to-without-assign", call,
                  f"`{ix.segment(call)}` returns a moved copy and throws it away: tensors are not moved in place "
                  f"(modules are), so `{name}` stays where it was", fix=f"write `{name} = {ix.segment(call)}`",
                  edits=[Edit(stmt.lineno, stmt.col_offset, stmt.lineno, stmt.col_offset, f"{name} = ")],
                  fix_note=f"{ix.segment(call)} -> {name} = {ix.segment(call)}")


def _main_guard(node: ast.AST) -> bool:
    """``if __name__ == "__main__":``."""
    test = node.test if isinstance(node, ast.If) else None
    return isinstance(test, ast.Compare) and dotted(test.left) == "__name__" and len(test.comparators) == 1 \
        and isinstance(test.comparators[0], ast.Constant) and test.comparators[0].value == "__main__"


def _cpu_self_test_class(ix: FileIndex, cls: ast.ClassDef) -> bool:
    """A module class defined inside a file's ``if __name__ == "__main__":`` block that puts nothing on a
    device (no ``.cuda()``, ``.to(...)``, ``device=``, ``torch.device``): a stand-in for a quick CPU
    check of the file, which lives and dies in that block, where every tensor is on the CPU."""
    block = next((a for a in ix.ancestors(cls) if _main_guard(a)), None)
    if block is None:
        return False
    for n in ast.walk(block):
        if isinstance(n, ast.Call) and (
                (isinstance(n.func, ast.Attribute) and n.func.attr in ("cuda", "to", "to_device"))
                or (dotted(n.func) or "").endswith("device") or kwarg(n, "device") is not None):
            return False
    return True


@rule("device-mismatch")
def device_mismatch(ix: FileIndex) -> Iterator[Hit]:
    if ix.is_test_file:
        return  # test doubles return CPU tensors on purpose; tests run on one device
    for cname in sorted(ix.module_classes):
        cls = ix.classes[cname]
        if _cpu_self_test_class(ix, cls):
            continue
        for m in device_meetings(ix, cls):
            last = (ix.qualname(m.origin.func) or "").rsplit(".", 1)[-1]
            func = ix.enclosing_function(m.origin)
            where = "forward()" if func is None or func.name == "forward" else f"{func.name}() (called by forward())"
            if m.how == "returned":
                fate = f"forward() returns it (line {m.node.lineno}), so the model's output stays on the CPU"
            elif m.how == "handed":
                fate = f"line {m.node.lineno} hands it to {m.what} together with the model's tensors"
            elif m.how == "layer":
                fate = f"line {m.node.lineno} feeds it to {m.what}, whose weights are on the model's device"
            else:
                fate = (f"line {m.node.lineno} combines it with the model's tensors"
                        + (f" ({m.what})" if m.what else ""))
            yield Hit("device-mismatch", m.origin,
                      f"torch.{last}(...) inside {where} creates the tensor on the CPU whatever device the model "
                      f"and its input are on, and {fate}: on a GPU the model fails there (or silently runs on the "
                      f"CPU)", fix="pass device=x.device (and dtype=x.dtype where it matters), or register it as a "
                      "buffer in __init__")


@rule("inputs-require-grad")
def inputs_require_grad(ix: FileIndex) -> Iterator[Hit]:
    grad_inputs: dict[str, ast.Call] = {}
    for name, values in ix.assigns.items():
        for v in values:
            if isinstance(v, ast.Call) and is_const(kwarg(v, "requires_grad"), True):
                grad_inputs[name] = v
    for call in ix.calls:
        if ix.call_is(call, "TensorDataset", "DataLoader"):
            for arg in call.args:
                name = dotted(arg)
                if name in grad_inputs:
                    yield Hit("inputs-require-grad", grad_inputs[name],
                              f"`{name}` is created with requires_grad=True and used as data, so autograd tracks "
                              f"every batch through the data too: slower steps and more memory for gradients "
                              f"nobody reads", fix="drop requires_grad=True (parameters, not data, need it)")
    for loop in loop_units(ix):
        if not isinstance(loop, (ast.For, ast.AsyncFor)) or not loader_iter(ix, loop.iter):
            continue
        bound = set(target_names(loop.target))
        reads_grad = any(isinstance(n, ast.Attribute) and n.attr == "grad" and dotted(n.value) in bound
                         for n in ix.scope_nodes(loop))
        autograd_grad = any(isinstance(n, ast.Call) and (dotted(n.func) or "").endswith("autograd.grad")
                            for n in ix.scope_nodes(loop))
        if reads_grad or autograd_grad:
            continue
        for n in ix.scope_nodes(loop):
            hit = None
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "requires_grad_" \
                    and dotted(n.func.value) in bound and (not n.args or is_const(n.args[0], True)):
                hit = dotted(n.func.value)
            elif isinstance(n, ast.Assign) and is_const(n.value, True) and any(
                    isinstance(t, ast.Attribute) and t.attr == "requires_grad" and dotted(t.value) in bound
                    for t in n.targets):
                hit = next(dotted(t.value) for t in n.targets if isinstance(t, ast.Attribute))
            if hit:
                yield Hit("inputs-require-grad", n,
                          f"the batch tensor `{hit}` is set to require grad in the training loop but its "
                          f"gradient is never read, so autograd does extra work every step", fix=f"do not set "
                          f"requires_grad on `{hit}`")


#: what a ``.data`` read for its metadata looks like: harmless, never reported
_METADATA = frozenset({"dtype", "device", "shape", "size", "dim", "ndim", "numel", "is_cuda", "layout",
                       "data_ptr", "element_size", "stride", "is_contiguous", "nelement", "type"})


def _data_write(ix: FileIndex, attr: ast.Attribute) -> bool:
    """Is ``x.data`` written here: assigned (``x.data = ...``, ``x.data[i] = ...``, ``x.data += ...``)
    or changed in place (``x.data.add_(...)``, ``x.data.copy_(...)``)?"""
    parent = ix.parents.get(attr)
    if isinstance(attr.ctx, ast.Store):
        return True
    if isinstance(parent, ast.Subscript) and parent.value is attr and isinstance(parent.ctx, ast.Store):
        return True
    if isinstance(parent, ast.AugAssign) and parent.target is attr:
        return True
    if isinstance(parent, ast.Attribute) and parent.value is attr:
        name = parent.attr
        call = ix.parents.get(parent)
        return (isinstance(call, ast.Call) and call.func is parent and name.endswith("_")
                and not name.startswith("_"))
    return False


def _metadata_read(ix: FileIndex, attr: ast.Attribute) -> bool:
    parent = ix.parents.get(attr)
    return isinstance(parent, ast.Attribute) and parent.value is attr and parent.attr in _METADATA


def _self_flag(test: ast.expr) -> str | None:
    """The ``self.<flag>`` a one-shot test reads: ``not self.f``, ``self.f == False``, ``self.f is False``,
    ``self.f == 0``, ``not self.f.item()``."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        test = test.operand
        if isinstance(test, ast.Call) and isinstance(test.func, ast.Attribute) and test.func.attr == "item":
            test = test.func.value
    elif isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], (ast.Eq, ast.Is)) \
            and isinstance(test.comparators[0], ast.Constant) and test.comparators[0].value in (False, 0):
        test = test.left
    else:
        return None
    if isinstance(test, ast.Attribute) and isinstance(test.value, ast.Name) and test.value.id == "self":
        return test.attr
    return None


def _first_call_init(ix: FileIndex, node: ast.AST, func: ast.AST) -> bool:
    """Is this ``.data`` write a data-dependent initialisation on forward()'s first call (Glow's ActNorm:
    ``if not self.initialized: self.weight.data.copy_(...); self.initialized = True``), made before this
    call reads the tensor?  The branch runs once, on the first forward, when no earlier forward has saved the
    old values in a graph, and before this forward saves any: no backward() ever reads what was overwritten.
    The flag must be tested and set true in the same branch, and nothing in forward() may read the tensor
    before the branch."""
    written = dotted(node.value) if isinstance(node, ast.Attribute) else None
    if not written:
        return False
    prev, cur = node, ix.parents.get(node)
    while cur is not None and cur is not func:
        if isinstance(cur, ast.If) and any(prev is stmt for stmt in cur.body):
            flag = _self_flag(cur.test)
            sets = flag is not None and any(
                isinstance(n, ast.Assign) and isinstance(n.value, ast.Constant) and n.value.value in (True, 1)
                and any(isinstance(t, ast.Attribute) and t.attr == flag and isinstance(t.value, ast.Name)
                        and t.value.id == "self" for t in n.targets)
                for stmt in cur.body for n in ast.walk(stmt))
            start = (cur.lineno, cur.col_offset)
            if sets and not any(isinstance(n, (ast.Attribute, ast.Name)) and (n.lineno, n.col_offset) < start
                                and dotted(n) == written for n in ast.walk(func)):
                return True
        prev, cur = cur, ix.parents.get(cur)
    return False


def _training_step(ix: FileIndex, node: ast.AST) -> str | None:
    """Where a write through ``.data`` hides a change from autograd: ``forward()`` of a module, a
    Lightning ``training_step``, or a training loop between a forward (a model call before the write
    in the loop) and its backward() (between the forward pass that saved the tensor and the backward
    pass that reads it).  None elsewhere: init, re-parameterisation, dtype swaps, and the update after backward() (manual SGD), which autograd
    never sees again."""
    func = ix.enclosing_function(node)
    if func is not None:
        cls = ix.enclosing_class(func)
        if func.name == "forward" and cls is not None and cls.name in ix.module_classes:
            return None if _first_call_init(ix, node, func) else "forward()"
        if func.name == "training_step":
            return "training_step()"
    at = (node.lineno, node.col_offset)
    for loop in ix.enclosing_loops(node):
        backs = [e for e in events(ix, loop, depth=0) if e.kind == "backward"]
        if not any((e.node.lineno, e.node.col_offset) > at for e in backs):
            continue
        # between a forward and its backward: a write before the iteration's first forward (WGAN's weight clipping
        # at the top of the critic loop) changes the values the next forward reads, with no graph holding them;
        # so does a write after the backward() that consumed the last forward's graph (the same clipping right
        # after the critic's step), unless that backward() keeps its graph (retain_graph)
        fwds = [(c.lineno, c.col_offset) for c in model_calls(ix, loop) if (c.lineno, c.col_offset) < at]
        if fwds and not any(max(fwds) < (e.node.end_lineno, e.node.end_col_offset) < at and _frees_graph(e)
                            for e in backs):
            return "the training loop, between a forward and its backward()"
    return None


def _frees_graph(back: Event) -> bool:
    """Does this backward() free the graph it ran through (no ``retain_graph``, or ``retain_graph=False``)?"""
    retain = kwarg(back.node, "retain_graph") if isinstance(back.node, ast.Call) else None
    return retain is None or is_const(retain, False)


def _storage_swap(ix: FileIndex, attr: ast.Attribute) -> bool:
    """``p.data = p.data.to(...)`` / ``p.data = p.data.half()``: a dtype or device swap of the storage."""
    stmt = ix.parents.get(attr)
    return (isinstance(stmt, ast.Assign) and attr in stmt.targets and isinstance(stmt.value, ast.Call)
            and any(isinstance(n, ast.Attribute) and n.attr == "data" and dotted(n.value) == dotted(attr.value)
                    for n in ast.walk(stmt.value)))


def _param_like(ix: FileIndex, v: ast.expr, params: set[str], tensors: set[str], losses: set[str]) -> bool:
    text = dotted(v)
    if isinstance(v, ast.Attribute) and v.attr in ("weight", "bias", "grad"):
        return True
    return bool(text) and (text in params or text in losses or text in tensors)


@rule("data-attribute")
def data_attribute(ix: FileIndex) -> Iterator[Hit]:
    """``.data`` written inside forward() or a training step (warning: autograd does not see the change);
    any other read or write of a tensor's ``.data`` is hygiene (info).  Metadata reads (``p.data.dtype``)
    and code under ``torch.no_grad()`` are left alone; one finding per line."""
    params = param_names(ix)
    tensors = tensor_names(ix)
    losses = {n for n, vals in ix.assigns.items()
              if any(isinstance(v, ast.Call) and ix.is_loss_fn(v) not in (None, "unknown") for v in vals)}
    lines: set[int] = set()
    for attr in ix.attributes:
        if attr.attr != "data" or attr.lineno in lines:
            continue
        if not _param_like(ix, attr.value, params, tensors, losses) or _metadata_read(ix, attr):
            continue
        if ix.under_no_grad(attr) or ix.grad_globally_off:
            continue
        lines.add(attr.lineno)
        write = _data_write(ix, attr)
        grad = isinstance(attr.value, ast.Attribute) and attr.value.attr == "grad"  # not part of any graph
        where = _training_step(ix, attr) if write and not grad and not _storage_swap(ix, attr) else None
        if where is not None:
            yield Hit("data-attribute", attr,
                      f"`{ix.segment(attr)}` is written inside {where}, behind autograd's back (no version "
                      f"check): backward() computes this step's gradient from values that are no longer "
                      f"there, silently", fix="make the change under `with torch.no_grad():` on the tensor itself "
                                       "(or with torch.nn.init / an optimizer), outside the graph",
                      severity="warning")
        else:
            yield Hit("data-attribute", attr,
                      f"`{ix.segment(attr)}` {'writes' if write else 'reads'} the tensor behind autograd's "
                      f"back (no version check)",
                      fix="use `.detach()` to read and `with torch.no_grad():` (or torch.nn.init) to write",
                      severity="info")


def _bare_refs(expr: ast.AST, names: set[str]) -> bool:
    """Does ``expr`` use one of ``names`` without .item()/.detach()/float()?"""
    parents: dict[ast.AST, ast.AST] = {}
    for n in ast.walk(expr):
        for c in ast.iter_child_nodes(n):
            parents[c] = n
    for n in ast.walk(expr):
        if isinstance(n, ast.Name) and n.id in names and isinstance(n.ctx, ast.Load):
            cur, safe = n, False
            while cur in parents:
                p = parents[cur]
                if isinstance(p, ast.Attribute) and p.attr in ("item", "detach", "tolist", "numpy", "data", "detach_"):
                    safe = True
                    break
                if isinstance(p, ast.Call) and isinstance(p.func, ast.Name) \
                        and p.func.id in ("float", "int", "str", "round"):
                    safe = True
                    break
                if isinstance(p, ast.Call) and p.func is not cur and not isinstance(p.func, ast.Attribute):
                    safe = True  # passed to some helper: unknown, stay quiet
                    break
                cur = p
            if not safe:
                return True
    return False


#: calls whose result holds no graph: a Python number or list, a detached tensor, a numpy array
_DETACHING_METHODS = frozenset({"item", "tolist", "detach", "numpy"})
_DETACHING_FUNCS = frozenset({"float", "int", "round"})


def _detached(value: ast.AST | None) -> bool:
    """``loss_fn(a, b).item()``, ``float(loss)``, ``loss.detach()``, a number: a value without a graph."""
    if isinstance(value, ast.Constant):
        return isinstance(value.value, (int, float)) and not isinstance(value.value, bool)
    if not isinstance(value, ast.Call):
        return False
    if isinstance(value.func, ast.Attribute):
        return value.func.attr in _DETACHING_METHODS
    return isinstance(value.func, ast.Name) and value.func.id in _DETACHING_FUNCS


def _rebound_detached(vals, expr: ast.AST, name: str) -> bool:
    """Is every read of ``name`` in ``expr`` reached only by assignments of graph-free values (``loss =
    loss_fn(out, y).item()`` a few lines above the sum)?  The same name may hold the loss tensor elsewhere in
    the loop; what is summed here is the value bound last."""
    reads = [n for n in ast.walk(expr) if isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Load)]
    if not reads:
        return False
    for r in reads:
        defs = vals.defs(r)
        if not defs or any(d.kind != "assign" or d.index is not None or not _detached(d.value) for d in defs):
            return False
    return True


@rule("graph-leak")
def graph_leak(ix: FileIndex) -> Iterator[Hit]:
    vals = values_for(ix)
    for loop in ix.loops:
        evs = events(ix, loop, depth=1)  # backward() in a helper the loop calls counts too
        backs = [e for e in evs if e.kind == "backward"]
        if not backs or ix.under_no_grad(loop):
            continue
        losses = set()
        for e in backs:
            if e.nested:
                continue
            expr = e.info.get("expr")
            if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute) and expr.func.attr == "scale" \
                    and expr.args:
                expr = expr.args[0]
            if isinstance(expr, ast.Name):
                losses.add(expr.id)
        for n in ix.scope_nodes(loop):
            if isinstance(n, ast.Assign) and isinstance(n.value, ast.Call):
                if ix.is_loss_fn(n.value) not in (None, "unknown") or vals.of(n.value).loss:
                    losses.update(dotted(t) for t in n.targets if isinstance(t, ast.Name))
        for n in ix.scope_nodes(loop):  # `loss = loss.item()` after backward: no graph kept
            if isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name) \
                    and n.targets[0].id in losses and n.targets[0].id in {x.id for x in ast.walk(n.value)
                                                                          if isinstance(x, ast.Name)} \
                    and not _bare_refs(n.value, {n.targets[0].id}):
                losses.discard(n.targets[0].id)
        if not losses:
            continue
        func = ix.enclosing_function(loop)
        scope_nodes = list(ix.scope_nodes(func if func is not None else ix.tree))
        backward_names = {dotted(x) for e in events(ix, func.body if func else ix.tree.body, depth=0)
                          if e.kind == "backward" for x in ast.walk(e.node)
                          if isinstance(x, (ast.Name, ast.Attribute))} - {None}
        assigned_in_loop = {dotted(t) for n in ix.scope_nodes(loop) if isinstance(n, ast.Assign)
                            for t in n.targets if not _bare_refs(n.value, {dotted(t) or ""})}
        for n in ix.scope_nodes(loop):
            acc, value = None, None
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "append" \
                    and isinstance(ix.parents.get(n), ast.Expr) and n.args:
                acc, value = dotted(n.func.value), n.args[0]
            elif isinstance(n, ast.AugAssign) and isinstance(n.op, ast.Add):
                acc, value = dotted(n.target), n.value
            if acc is None or acc in losses or acc in assigned_in_loop:
                continue
            if ix.enclosing_loops(n)[0] is not loop:
                continue
            if not _bare_refs(value, {name for name in losses if not _rebound_detached(vals, value, name)}):
                continue
            if acc in backward_names or any(
                    isinstance(m, ast.Assign) and any(dotted(t) in backward_names for t in m.targets)
                    and acc in {dotted(x) for x in ast.walk(m.value) if isinstance(x, (ast.Name, ast.Attribute))}
                    for m in scope_nodes):
                continue  # accumulated on purpose and backpropagated later
            yield Hit("graph-leak", n,
                      f"`{acc}` keeps the loss tensor itself, and with it the whole autograd graph of every "
                      f"step, so memory grows until the run dies", fix="store `loss.item()` (or `loss.detach()`)")


#: numpy array methods that change the array in place
_NUMPY_INPLACE = frozenset({"fill", "sort", "put", "resize", "itemset", "partition", "setfield"})


def _scope(ix: FileIndex, node: ast.AST) -> ast.AST:
    while node in ix.parents and not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Module)):
        node = ix.parents[node]
    return node


def _mutates(node: ast.AST, name: str) -> bool:
    """Does statement/expression ``node`` write into the array ``name`` in place?"""
    if isinstance(node, ast.AugAssign):
        t = node.target
        return (isinstance(t, ast.Name) and t.id == name) or (
            isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name) and t.value.id == name)
    if isinstance(node, ast.Assign):
        return any(isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name) and t.value.id == name
                   for t in node.targets)
    if isinstance(node, ast.Call):
        f = node.func
        if isinstance(f, ast.Attribute) and f.attr in _NUMPY_INPLACE and isinstance(f.value, ast.Name) \
                and f.value.id == name:
            return True
        return any(k.arg == "out" and isinstance(k.value, ast.Name) and k.value.id == name for k in node.keywords)
    return False


@rule("numpy-shared-memory")
def numpy_shared_memory(ix: FileIndex) -> Iterator[Hit]:
    for call in ix.calls:
        q = ix.qualname(call.func) or ""
        if not (q.endswith("from_numpy") and ix.is_torchish(q)) or not call.args or not isinstance(call.args[0], ast.Name):
            continue
        name = call.args[0].id
        scope = _scope(ix, call)
        later = [n for n in ast.walk(scope) if getattr(n, "lineno", 0) > call.lineno and _mutates(n, name)
                 and _scope(ix, n) is scope]
        rebound = [n for n in ast.walk(scope) if isinstance(n, ast.Assign) and n.lineno > call.lineno
                   and any(isinstance(t, ast.Name) and t.id == name for t in n.targets)]
        if not later or (rebound and min(r.lineno for r in rebound) < later[0].lineno):
            continue
        first = min(later, key=lambda n: (n.lineno, n.col_offset))
        yield Hit("numpy-shared-memory", first,
                  f"`{name}` is written in place after torch.from_numpy({name}) (line {call.lineno}) made a tensor "
                  f"that shares its memory: the tensor changes too", fix=f"use torch.tensor({name}) (a copy), or "
                  f"{name}.copy() before the write")
