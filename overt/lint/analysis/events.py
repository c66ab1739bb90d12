"""The training-relevant calls in a stretch of code, in source order.

A rule about order ("is the reset between backward() and step()?") reads a
list of :class:`Event` rather than the raw tree.  Calls to functions defined in
the same file, or imported from another module of the linted package, are
followed (two levels deep), so a loop that calls
``train_one_epoch(...)`` sees the resets and mode switches inside it; the event
then carries the call site as ``site`` so findings point at the caller's line.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field, replace

from overt.lint.analysis.values import resolve_in
from overt.lint.index import FileIndex, FuncNode, dotted, is_const, kwarg

CLIP_NAMES = ("clip_grad_norm_", "clip_grad_value_", "clip_grad_norm")


@dataclass
class Event:
    """One training-relevant call.

    kind: backward | step | sched_step | reset | eval | train | clip | unscale
    node: the call (or assignment) itself; site: where it is seen from the code
    being analysed (the call of the in-file helper that contains it, or ``node``).
    """

    kind: str
    node: ast.AST
    site: ast.AST
    target: str | None = None  # optimizer / model / loss text, when known
    info: dict = field(default_factory=dict)
    nested: bool = False  # came from an in-file helper


def _receiver(call: ast.Call) -> ast.expr | None:
    return call.func.value if isinstance(call.func, ast.Attribute) else None


_GRAD_TESTS = frozenset({"grad", "requires_grad"})


def _grad_test(test: ast.AST) -> bool:
    """``p.grad is not None``, ``p.requires_grad``: a test every parameter that has a gradient passes."""
    attrs = {a.attr for a in ast.walk(test) if isinstance(a, ast.Attribute)}
    return bool(attrs) and attrs <= _GRAD_TESTS | {"is_leaf"}


def _param_reset(ix: FileIndex, node: ast.AST, param: ast.expr) -> Event | None:
    """``p.grad = None`` / ``p.grad.zero_()``: a reset of every gradient only inside a loop over all the
    parameters (``for p in model.parameters()``, ``for p in group["params"]``) with no test that picks some
    of them (``if p.grad is not None`` is fine).  Anything else resets a subset (``for n, p in
    model.named_parameters(): if "last_layer" in n: p.grad = None``, ``model.head.weight.grad = None``):
    a partial reset, which is not a reset of the step (None)."""
    name = dotted(param)
    loop = None
    for anc in ix.ancestors(node):
        bound = {n.id for n in ast.walk(anc.target) if isinstance(n, ast.Name)} if isinstance(
            anc, (ast.For, ast.AsyncFor)) else set()
        if name in bound:
            loop = anc
            break
        if isinstance(anc, ast.If) and not _grad_test(anc.test):
            return None  # a test that chooses which parameters
        if isinstance(anc, (ast.FunctionDef, ast.AsyncFunctionDef)):
            break
    if loop is None:
        return None
    body_ifs = [n for s in loop.body for n in ast.walk(s) if isinstance(n, ast.If) and not _grad_test(n.test)]
    if any(isinstance(n, (ast.Continue, ast.Break)) for s in loop.body for n in ast.walk(s)) and body_ifs:
        return None  # `if "head" not in n: continue`: some parameters only
    it = loop.iter
    while isinstance(it, ast.Call) and dotted(it.func) in ("enumerate", "list", "tqdm"):
        it = it.args[0] if it.args else it
    text = ix.segment(it)
    calls = [c for c in ast.walk(it) if isinstance(c, ast.Call) and isinstance(c.func, ast.Attribute)]
    whole = any(c.func.attr in ("parameters", "named_parameters") and (
        dotted(c.func.value) == "self" or ix.is_model(dotted(c.func.value)) or ix.is_optimizer(dotted(c.func.value)))
        for c in calls)
    if whole or "param" in text and "group" in text or text.endswith(("params", "params']", 'params"]')):
        return Event("reset", node, node, name)
    if isinstance(it, ast.Name) and ("param" in it.id.lower() and "last" not in it.id.lower()):
        return Event("reset", node, node, name)  # `for p in params:` (the list handed to the optimizer)
    return None


def classify(ix: FileIndex, node: ast.AST) -> Event | None:
    """The event ``node`` is, or None."""
    if isinstance(node, ast.Assign):
        for t in node.targets:
            if isinstance(t, ast.Attribute) and t.attr == "grad":
                return _param_reset(ix, node, t.value)
        return None
    if not isinstance(node, ast.Call):
        return None
    func = node.func
    attr = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None
    if attr is None:
        return None
    recv = _receiver(node)
    recv_text = dotted(recv) if recv is not None else None
    if attr == "backward" or attr == "manual_backward":
        wrappers = ("accelerator", "fabric", "self.accelerator", "self.fabric")
        if recv is not None and attr == "backward" and recv_text not in wrappers \
                and not (recv_text or "").endswith("autograd"):
            target = recv
        else:
            target = node.args[0] if node.args else None
        scaled = False
        cur = target
        while isinstance(cur, (ast.Call, ast.Attribute)):
            if isinstance(cur, ast.Call) and isinstance(cur.func, ast.Attribute) and cur.func.attr == "scale":
                scaled = True
                break
            cur = cur.func if isinstance(cur, ast.Call) else cur.value
        retain = kwarg(node, "retain_graph")
        return Event("backward", node, node, dotted(target) if target is not None else None,
                     {"scaled": scaled, "retain": is_const(retain, True), "expr": target})
    if attr == "step" and recv is not None:
        if ix.is_scheduler(recv_text):
            return Event("sched_step", node, node, recv_text)
        if ix.is_scaler(recv_text) and node.args:
            return Event("step", node, node, dotted(node.args[0]), {"scaler": True})
        if ix.is_optimizer(recv_text):
            return Event("step", node, node, recv_text)
        return None
    if attr == "zero_grad":
        return Event("reset", node, node, recv_text)
    if attr in ("zero_", "detach_", "fill_", "requires_grad_") and recv is not None:
        base = recv.value if isinstance(recv, ast.Attribute) and recv.attr == "data" else recv
        if isinstance(base, ast.Attribute) and base.attr == "grad" and attr != "requires_grad_":
            if attr == "fill_" and not (node.args and isinstance(node.args[0], ast.Constant) and node.args[0].value == 0):
                return None  # `p.grad.fill_(0.01)`: gradients set to a value, not reset
            return _param_reset(ix, node, base.value)
        return None
    if attr == "eval" and recv is not None and not node.args and not node.keywords:
        return Event("eval", node, node, recv_text)
    if attr == "train" and recv is not None:
        arg = node.args[0] if node.args else kwarg(node, "mode")
        if arg is None and not node.args and not node.keywords:
            return Event("train", node, node, recv_text)
        if is_const(arg, True):
            return Event("train", node, node, recv_text)
        if is_const(arg, False):
            return Event("eval", node, node, recv_text)
        return None
    if attr in CLIP_NAMES:
        if recv_text and any(w in recv_text.lower() for w in ("accelerator", "fabric", "self")):
            return None
        return Event("clip", node, node)
    if attr == "unscale_":
        return Event("unscale", node, node, recv_text)
    low = attr.lower()
    if "grad" in low and any(w in low for w in ("zero", "reset", "clear")):
        return Event("reset", node, node, None, {"unknown": True})
    return None


def _classified(ix: FileIndex, node: ast.AST) -> Event | None:
    key = ("ev", id(node))
    if key in ix.cache:
        return ix.cache[key]
    ev = classify(ix, node)
    ix.cache[key] = ev
    return ev


def _callee(ix: FileIndex, call: ast.Call) -> tuple[FileIndex, FuncNode | None]:
    """The function a call reaches: in this file (``f()``, ``self.f()``), or imported from
    another module of the project (``from .loops import train_one_epoch``)."""
    func = ix.callee(call)
    if func is not None:
        return ix, func
    if ix.project is not None and ix.imports:
        f = call.func
        while isinstance(f, ast.Attribute):
            f = f.value
        if isinstance(f, ast.Name) and f.id in ix.imports and f.id not in _EXTERNAL:
            found = resolve_in(ix, dotted(call.func) or "")
            if isinstance(found, tuple):
                return found
    return ix, None


_COPIES = frozenset({"deepcopy", "copy.deepcopy"})


def _is_deep_copy(value: ast.AST) -> bool:
    """``deepcopy(m)``, ``copy.deepcopy(m)``, or such a copy moved or switched (``deepcopy(m).cuda()``)."""
    while isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) \
            and isinstance(value.func.value, ast.Call):
        value = value.func.value
    return isinstance(value, ast.Call) and dotted(value.func) in _COPIES


def on_a_copy(func: FuncNode, ev: Event) -> bool:
    """Does the mode switch ``ev``, made in ``func``'s body, act on a deep copy ``func`` made of its module?
    True when the receiver is a plain name that ``func`` binds only as ``name = deepcopy(...)``, one such
    binding being a statement of ``func``'s own body before the switch: the module the caller holds keeps
    its mode (an adversarial attack or a probe run on a copy in eval mode)."""
    name = ev.target
    if not name or not name.isidentifier():
        return False
    stores = [n for n in ast.walk(func) if isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Store)]
    if not stores:
        return False
    copies = [st for st in func.body if isinstance(st, ast.Assign) and len(st.targets) == 1
              and isinstance(st.targets[0], ast.Name) and st.targets[0].id == name and _is_deep_copy(st.value)]
    if len(copies) != len(stores):
        return False  # bound some other way too (a loop target, a second assignment, a tuple)
    line = getattr(ev.node, "lineno", 0)
    return any(st.lineno < line for st in copies)


_EXTERNAL = frozenset({"torch", "nn", "F", "np", "numpy", "optim", "os", "sys", "math", "random", "time",
                       "json", "tqdm", "logging", "pathlib", "Path", "functional"})


def events(ix: FileIndex, body: ast.AST | list[ast.stmt], depth: int = 2,
           _seen: frozenset[int] = frozenset()) -> list[Event]:
    """Events under ``body`` (a node or a statement list) in source order,
    not entering nested definitions, following helpers (in this file or imported from the
    project) ``depth`` deep.
    The returned list is cached: read it, do not modify it."""
    key = ("events", id(body) if not isinstance(body, list) else tuple(id(s) for s in body), depth, _seen)
    hit = ix.cache.get(key)
    if hit is not None:
        return hit
    nodes = ix.stmts_nodes(body) if isinstance(body, list) else ix.scope_nodes(body)
    out: list[Event] = []
    for node in nodes:
        ev = _classified(ix, node)
        if ev is not None:
            out.append(ev)
        if depth > 0 and isinstance(node, ast.Call):
            ckey = ("callee", id(node))
            found = ix.cache.get(ckey)
            if found is None:
                found = ix.cache[ckey] = _callee(ix, node)
            where, callee = found
            if callee is not None and id(callee) not in _seen:
                consts = _constant_args(node, callee)
                for inner in events(where, callee.body, depth - 1, _seen | {id(callee)}):
                    if consts and _not_taken(where, inner.site, callee, consts):
                        continue  # `_run_one_epoch(epoch, train=False)`: its `if train:` steps are not run
                    if inner.kind in ("eval", "train") and not inner.nested and on_a_copy(callee, inner):
                        continue  # `model = deepcopy(model); model.eval()`: the caller's model keeps its mode
                    out.append(replace(inner, site=node, nested=True))
    ix.cache[key] = out
    return out


def _constant_args(call: ast.Call, callee: FuncNode) -> dict[str, object]:
    """The callee's parameters that this call fixes to a constant (``train=False``, ``"valid"``), defaults
    included, for the ``if`` tests of the callee that read them."""
    params = [a.arg for a in callee.args.posonlyargs + callee.args.args]
    if params and params[0] in ("self", "cls") and isinstance(call.func, ast.Attribute):
        params = params[1:]
    out: dict[str, object] = {}
    defaults = callee.args.defaults
    for name, d in zip(params[len(params) - len(defaults):], defaults):
        if isinstance(d, ast.Constant):
            out[name] = d.value
    for name, a in zip(params, call.args):
        if isinstance(a, ast.Starred):
            return {}
        if isinstance(a, ast.Constant):
            out[name] = a.value
        else:
            out.pop(name, None)
    for k in call.keywords:
        if k.arg is None:
            return {}
        if isinstance(k.value, ast.Constant):
            out[k.arg] = k.value.value
        else:
            out.pop(k.arg, None)
    return out


def _truth(test: ast.AST, consts: dict[str, object]) -> bool | None:
    """The value of an ``if`` test over constant parameters, or None when it depends on anything else."""
    if isinstance(test, ast.Name) and test.id in consts:
        return bool(consts[test.id])
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        inner = _truth(test.operand, consts)
        return None if inner is None else not inner
    if isinstance(test, ast.BoolOp):  # `not train and self.args.valid_apply`: decided when one operand decides
        parts = [_truth(v, consts) for v in test.values]
        decisive = False if isinstance(test.op, ast.And) else True
        if decisive in parts:
            return decisive
        return None
    if isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.left, ast.Name) \
            and test.left.id in consts and isinstance(test.comparators[0], ast.Constant):
        value, other = consts[test.left.id], test.comparators[0].value
        if isinstance(test.ops[0], (ast.Eq, ast.Is)):
            return value == other
        if isinstance(test.ops[0], (ast.NotEq, ast.IsNot)):
            return value != other
    return None


def _not_taken(ix: FileIndex, node: ast.AST, callee: FuncNode, consts: dict[str, object]) -> bool:
    """Is ``node`` in a branch of ``callee`` that the constant arguments rule out?"""
    cur = node
    for anc in ix.ancestors(node):
        if anc is callee:
            return False
        if isinstance(anc, (ast.If, ast.IfExp)):
            truth = _truth(anc.test, consts)
            if truth is not None:
                in_body = any(cur is s for s in anc.body) if isinstance(anc, ast.If) else cur is anc.body
                if in_body != truth and cur is not anc.test:
                    return True
        cur = anc
    return False


def exclusive(ix: FileIndex, a: ast.AST, others: list[ast.AST]) -> bool:
    """Can ``a`` and none of ``others`` run in one call of their function?  True when a parameter of the
    function decides between them (``if train: ...step()`` / ``else: model.eval()``, ``if mode == "train":``):
    one function that trains or evaluates by a flag is not a training loop that evaluates."""
    func = ix.enclosing_function(a)
    if func is None or not others or any(ix.enclosing_function(o) is not func for o in others):
        return False
    params = {x.arg for x in func.args.posonlyargs + func.args.args + func.args.kwonlyargs}
    candidates: dict[str, set] = {}
    for node in [a, *others]:
        for anc in ix.ancestors(node):
            if anc is func:
                break
            if isinstance(anc, (ast.If, ast.IfExp)):
                for n in ast.walk(anc.test):
                    if isinstance(n, ast.Name) and n.id in params:
                        values = candidates.setdefault(n.id, {True, False})
                        if isinstance(anc.test, ast.Compare) and isinstance(anc.test.comparators[0], ast.Constant):
                            values.add(anc.test.comparators[0].value)
    for name, values in candidates.items():
        if all(_not_taken(ix, a, func, {name: v}) or all(_not_taken(ix, o, func, {name: v}) for o in others)
               for v in values):
            return True
    return False


def function_events(ix: FileIndex, func: FuncNode) -> list[Event]:
    return events(ix, func.body, _seen=frozenset({id(func)}))


def module_constants(ix: FileIndex) -> dict[str, object]:
    """Names bound once in the whole file, at module level, to a literal (``SAVE_OPTIMIZER = False``), and
    never rebound (no other assignment, augmented assignment, ``global`` or loop target names them, and the file
    does not rebind its globals wholesale with ``exec`` or ``globals()``)."""
    key = ("module-constants",)
    if key in ix.cache:
        return ix.cache[key]
    out: dict[str, object] = {}
    if any(isinstance(c.func, ast.Name) and c.func.id in ("exec", "globals") for c in ix.calls):
        # `exec(open("configurator.py").read())`, `globals().update(...)`: any global may be rebound
        ix.cache[key] = out
        return out
    for stmt in ix.tree.body:
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name) \
                and isinstance(stmt.value, ast.Constant) and len(ix.assigns.get(stmt.targets[0].id, [])) == 1:
            out[stmt.targets[0].id] = stmt.value.value
    for node in ast.walk(ix.tree):
        if isinstance(node, ast.Global):
            for n in node.names:
                out.pop(n, None)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)) \
                and not isinstance(ix.parents.get(node), ast.Assign):
            out.pop(node.id, None)  # a loop target, `with ... as`, augmented assignment, walrus
    ix.cache[key] = out
    return out


def ruled_out_by(ix: FileIndex, node: ast.AST) -> list[ast.If]:
    """The ``if`` statements whose test a module constant decides against the branch holding ``node``
    (empty where ``never_runs`` is False)."""
    consts = module_constants(ix)
    if not consts:
        return []
    out, cur = [], node
    for anc in ix.ancestors(node):
        if isinstance(anc, ast.If):
            truth = _truth(anc.test, consts)
            if truth is not None and cur is not anc.test and any(cur is s for s in anc.body) != truth:
                out.append(anc)
        cur = anc
    return out


def never_runs(ix: FileIndex, node: ast.AST) -> bool:
    """Is ``node`` in a branch that a module constant rules out (``if SAVE_OPTIMIZER:`` with
    ``SAVE_OPTIMIZER = False``)?"""
    consts = module_constants(ix)
    if not consts:
        return False
    cur = node
    for anc in ix.ancestors(node):
        if isinstance(anc, ast.If):
            truth = _truth(anc.test, consts)
            if truth is not None and cur is not anc.test and any(cur is s for s in anc.body) != truth:
                return True
        cur = anc
    return False
