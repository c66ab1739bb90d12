"""Rules about tensors: device moves, requires_grad, .data, graphs kept alive (OVT4xx)."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from overt.lint.events import events
from overt.lint.index import FACTORIES, FileIndex, dotted, has_star_kwargs, is_const, kwarg
from overt.lint.rules.base import Edit, Hit, rule

CLASSIFICATION_DATASETS = {"MNIST", "FashionMNIST", "KMNIST", "EMNIST", "QMNIST", "CIFAR10", "CIFAR100",
                           "SVHN", "STL10", "ImageFolder", "ImageNet", "Caltech101", "Food101", "Flowers102"}
INT_DTYPES = {"long", "int64", "int32", "int", "int16", "int8", "uint8"}


def _is_factory(ix: FileIndex, call: ast.AST) -> bool:
    if not isinstance(call, ast.Call):
        return False
    q = ix.qualname(call.func) or ""
    return q.startswith("torch.") and q.count(".") == 1 and q.rsplit(".", 1)[-1] in FACTORIES


def _loader_iter(ix: FileIndex, expr: ast.AST) -> str | None:
    """The loader name a for-loop iterates (``loader``, ``enumerate(loader)``, ``tqdm(loader)``)."""
    for n in ast.walk(expr):
        text = dotted(n) if isinstance(n, (ast.Name, ast.Attribute)) else None
        if text and (text in ix.loaders or "loader" in text.lower() or text.rsplit(".", 1)[-1] in ("dl", "batches")):
            return text
    return None


def _target_names(target: ast.AST) -> list[str]:
    return [n.id for n in ast.walk(target) if isinstance(n, ast.Name)]


def tensor_names(ix: FileIndex) -> set[str]:
    """Names that hold tensors: made by torch factories or drawn from a data loader."""
    if "tensor_names" in ix.cache:
        return ix.cache["tensor_names"]
    out: set[str] = set()
    for name, values in ix.assigns.items():
        if any(_is_factory(ix, v) for v in values):
            out.add(name)
    for loop in ix.loops:
        # only tuple targets: a single `batch` may be a dict or an object whose .to() works in place
        if isinstance(loop, (ast.For, ast.AsyncFor)) and isinstance(loop.target, ast.Tuple) \
                and _loader_iter(ix, loop.iter):
            tgt = loop.target
            if len(tgt.elts) == 2 and isinstance(tgt.elts[1], ast.Tuple):
                tgt = tgt.elts[1]  # enumerate(loader)
            out.update(e.id for e in tgt.elts if isinstance(e, ast.Name))
    for name, values in ix.assigns.items():
        if any(isinstance(v, ast.Name) and v.id in out for v in values):
            out.add(name)
    out -= ix.models
    ix.cache["tensor_names"] = out
    return out


def label_names(ix: FileIndex) -> set[str]:
    """Names holding integer class indices: randint/argmax/.long()/integer dtype, or the
    second item drawn from a loader over a torchvision classification data set."""
    if "label_names" in ix.cache:
        return ix.cache["label_names"]
    out: set[str] = set()
    for name, values in ix.assigns.items():
        for v in values:
            if not isinstance(v, ast.Call):
                continue
            q = ix.qualname(v.func) or ""
            last = q.rsplit(".", 1)[-1]
            dtype = dotted(kwarg(v, "dtype")) or ""
            if (q in ("torch.randint",) or last in ("long", "argmax")
                    or (_is_factory(ix, v) and dtype.rsplit(".", 1)[-1] in INT_DTYPES)):
                out.add(name)
    cls_loaders = set()
    for name, call in ix.loaders.items():
        ds = call.args[0] if call.args else kwarg(call, "dataset")
        cands = [ds] + (ix.assigns.get(dotted(ds) or "", []) if ds is not None else [])
        if any(isinstance(c, ast.Call) and (ix.qualname(c.func) or "").rsplit(".", 1)[-1] in CLASSIFICATION_DATASETS
               for c in cands):
            cls_loaders.add(name)
    for loop in ix.loops:
        if not isinstance(loop, (ast.For, ast.AsyncFor)):
            continue
        src = _loader_iter(ix, loop.iter)
        if src in cls_loaders:
            tgt = loop.target
            if isinstance(tgt, ast.Tuple) and len(tgt.elts) == 2 and isinstance(tgt.elts[1], ast.Tuple):
                tgt = tgt.elts[1]  # enumerate(loader)
            if isinstance(tgt, ast.Tuple) and len(tgt.elts) == 2 and isinstance(tgt.elts[1], ast.Name):
                out.add(tgt.elts[1].id)
    ix.cache["label_names"] = out
    return out


def param_names(ix: FileIndex) -> set[str]:
    """Loop variables bound to parameters (``for p in model.parameters()``)."""
    out: set[str] = set()
    for loop in ix.loops:
        if isinstance(loop, (ast.For, ast.AsyncFor)):
            calls = [n for n in ast.walk(loop.iter) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)]
            if any(c.func.attr in ("parameters", "named_parameters") for c in calls):
                names = _target_names(loop.target)
                out.add(names[-1]) if names else None
    return out


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
        if not isinstance(recv, ast.Name) or name not in tensors or ix.is_model(name):
            continue
        yield Hit("to-without-assign", call,
                  f"`{ix.segment(call)}` returns a moved copy and throws it away: tensors are not moved in place "
                  f"(modules are), so `{name}` stays where it was; write `{name} = {ix.segment(call)}`",
                  edits=[Edit(stmt.lineno, stmt.col_offset, stmt.lineno, stmt.col_offset, f"{name} = ")],
                  fix_note=f"{ix.segment(call)} -> {name} = {ix.segment(call)}")


def _moved_or_index(ix: FileIndex, node: ast.AST) -> bool:
    """Is ``node`` moved by a method chain (``.float().to(x.device)``) or used only as an index?"""
    cur = node
    parent = ix.parents.get(cur)
    while isinstance(parent, (ast.Attribute, ast.Call)) and (
            not isinstance(parent, ast.Call) or parent.func is cur):
        if isinstance(parent, ast.Attribute) and parent.attr in ("to", "cuda", "type_as", "to_device"):
            return True
        cur, parent = parent, ix.parents.get(parent)
    cur = node
    while not isinstance(cur, ast.stmt):
        parent = ix.parents.get(cur)
        if isinstance(parent, ast.Subscript) and parent.slice is cur:
            return True  # indexing a tensor on any device with a CPU index works
        cur = parent
    return False


@rule("device-mismatch")
def device_mismatch(ix: FileIndex) -> Iterator[Hit]:
    for cname in ix.module_classes:
        for item in ix.classes[cname].body:
            if not (isinstance(item, ast.FunctionDef) and item.name == "forward"):
                continue
            moved = set()
            for n in ix.scope_nodes(item):
                if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in (
                        "to", "cuda", "type_as", "to_device"):
                    if dotted(n.func.value):
                        moved.add(dotted(n.func.value))
            for n in ix.scope_nodes(item):
                if not _is_factory(ix, n) or kwarg(n, "device") is not None or has_star_kwargs(n):
                    continue
                last = (ix.qualname(n.func) or "").rsplit(".", 1)[-1]
                literal = n.args and isinstance(n.args[0], (ast.List, ast.Tuple, ast.ListComp))
                if last in ("tensor", "as_tensor") and not literal:
                    continue  # 0-dim CPU tensors mix freely with tensors on any device
                parent = ix.parents.get(n)
                if _moved_or_index(ix, n):
                    continue
                if isinstance(parent, ast.Assign) and any(dotted(t) in moved for t in parent.targets):
                    continue
                yield Hit("device-mismatch", n,
                          f"torch.{last}(...) inside forward() creates the tensor on the CPU whatever device the "
                          f"model and its input are on, so the model fails (or silently runs on the CPU) on a "
                          f"GPU; pass device=x.device (and dtype=x.dtype where it matters), or register it as a "
                          f"buffer in __init__")


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
                              f"nobody reads; drop requires_grad=True (parameters, not data, need it)")
    from overt.lint.rules.gradients import loop_units

    for loop in loop_units(ix):
        if not isinstance(loop, (ast.For, ast.AsyncFor)) or not _loader_iter(ix, loop.iter):
            continue
        bound = set(_target_names(loop.target))
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
                          f"gradient is never read, so autograd does extra work every step; remove it")


@rule("data-attribute")
def data_attribute(ix: FileIndex) -> Iterator[Hit]:
    params = param_names(ix)
    tensors = tensor_names(ix)
    losses = {n for n, vals in ix.assigns.items()
              if any(isinstance(v, ast.Call) and ix.is_loss_fn(v) not in (None, "unknown") for v in vals)}
    for attr in ix.attributes:
        if attr.attr != "data":
            continue
        v = attr.value
        text = dotted(v)
        if isinstance(v, ast.Attribute) and v.attr in ("weight", "bias", "grad"):
            pass
        elif text and (text in params or text in losses or text in tensors):
            pass
        else:
            continue
        yield Hit("data-attribute", attr,
                  f"`{ix.segment(attr)}` reads or writes the tensor behind autograd's back (no version check), "
                  f"which can silently corrupt gradients; use `.detach()` to read and `with torch.no_grad():` "
                  f"(or torch.nn.init) to write")


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


@rule("graph-leak")
def graph_leak(ix: FileIndex) -> Iterator[Hit]:
    for loop in ix.loops:
        evs = events(ix, loop, depth=0)
        backs = [e for e in evs if e.kind == "backward"]
        if not backs or ix.under_no_grad(loop):
            continue
        losses = set()
        for e in backs:
            expr = e.info.get("expr")
            if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute) and expr.func.attr == "scale" \
                    and expr.args:
                expr = expr.args[0]
            if isinstance(expr, ast.Name):
                losses.add(expr.id)
        for n in ix.scope_nodes(loop):
            if isinstance(n, ast.Assign):
                if isinstance(n.value, ast.Call) and ix.is_loss_fn(n.value) not in (None, "unknown"):
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
            if not _bare_refs(value, losses):
                continue
            if acc in backward_names or any(
                    isinstance(m, ast.Assign) and any(dotted(t) in backward_names for t in m.targets)
                    and acc in {dotted(x) for x in ast.walk(m.value) if isinstance(x, (ast.Name, ast.Attribute))}
                    for m in scope_nodes):
                continue  # accumulated on purpose and backpropagated later
            yield Hit("graph-leak", n,
                      f"`{acc}` keeps the loss tensor itself, and with it the whole autograd graph of every "
                      f"step, so memory grows until the run dies; store `loss.item()` (or `loss.detach()`)")
