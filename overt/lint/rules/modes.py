"""Rules about train/eval modes and no_grad (OVT2xx)."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from overt.lint.analysis.events import events, exclusive
from overt.lint.analysis.units import eval_regions, loop_units, model_calls
from overt.lint.analysis.values import values_for
from overt.lint.analysis.requirements import torch_floor_of
from overt.lint.analysis.torchera import written_for_torch_before_04
from overt.lint.analysis.volatile import volatile_in
from overt.lint.index import FileIndex, FuncNode, dotted, kwarg, tokens
from overt.lint.rules.base import Edit, Hit, rule
from overt.lint.rules.frameworks import lightning_eval_mode_left, lightning_graph_in_eval, lightning_train_mode_in_eval
from overt.modefree import MODE_FREE_LAYERS

_NOT_TRAINED = {"teacher", "ema", "target", "frozen", "reference", "ref", "pretrained", "old"}


# --------------------------------------------------------------------------- mode tracking


_HARMLESS = frozenset({"print", "len", "isinstance", "type", "id", "getattr", "hasattr", "str", "repr",
                       "list", "tuple", "dict", "set", "sum", "zip", "enumerate", "iter", "next", "vars", "sorted"})


def unknown_calls_with(ix: FileIndex, nodes: list[ast.AST], model: str | None) -> list[ast.Call]:
    """Calls of functions lint cannot see into (not in this file, not torch) that receive
    ``model`` itself: they may switch its mode."""
    if not model:
        return []
    out = []
    for n in nodes:
        if not isinstance(n, ast.Call) or ix.callee(n) is not None:
            continue
        q = ix.qualname(n.func) or ""
        if q in _HARMLESS or q.startswith(("torch.", "nn.", "F.")) or (
                isinstance(n.func, ast.Attribute) and dotted(n.func.value) == model):
            continue
        if any(dotted(a) == model for a in [*n.args, *(k.value for k in n.keywords)]):
            out.append(n)
    return out


def _last_mode(ix: FileIndex, stmts: list[ast.stmt], model: str | None, strict: bool = False) -> str | None:
    """'eval', 'train', 'unknown' (an opaque call takes the model) or None, for the last
    mode change in ``stmts``."""
    marks: list[tuple[tuple[int, int], str]] = []
    trains: list[ast.AST] = []
    evals: dict[tuple[int, int], ast.AST] = {}
    for ev in events(ix, stmts, depth=2):
        pos = (ev.site.lineno, ev.site.col_offset)
        if ev.kind == "eval" and _mode_put_back(ix, ev.node, ev.target):
            continue  # `was = m.training; m.eval(); ...; m.train(was)`: no mode change seen from outside
        if ev.kind == "eval" and (not strict or ev.target == model or (
                ev.nested and ix.is_model(ev.target) and _hands_over(ev.site, model))):
            marks.append((pos, "eval"))
            evals[pos] = ev.site
        elif ev.kind == "train" and (ev.target == model or model is None
                                     or (ev.nested and ix.is_model(ev.target))):
            marks.append((pos, "train"))
            trains.append(ev.site)
    for call in unknown_calls_with(ix, ix.stmts_nodes(stmts), model):
        marks.append(((call.lineno, call.col_offset), "unknown"))
    if not marks:
        return None
    pos, last = max(marks)
    if last == "eval" and any(_other_branch(ix, evals[pos], t) for t in trains):
        return "unknown"  # `if phase == "train": model.train() else: model.eval()`: either mode follows
    return last


def _hands_over(site: ast.AST, model: str | None) -> bool:
    """Does the helper call ``site`` receive ``model`` (as an argument, or as the object of the method)?
    A helper that switches some model of its own to eval mode (``load(surrogate, path)`` calling
    ``surrogate.eval()``) says nothing of a model it was not given."""
    if model is None:
        return True
    if not isinstance(site, ast.Call):
        return False
    if isinstance(site.func, ast.Attribute) and dotted(site.func.value) == model:
        return True
    return any(dotted(a.value if isinstance(a, ast.Starred) else a) == model
               for a in [*site.args, *(k.value for k in site.keywords)])


def _other_branch(ix: FileIndex, a: ast.AST, b: ast.AST) -> bool:
    """Are ``a`` and ``b`` in the two branches of one ``if`` (so that exactly one of them runs)?"""
    for anc in ix.ancestors(a):
        if isinstance(anc, ast.If):
            in_body = any(a is n for s in anc.body for n in ast.walk(s))
            other = anc.orelse if in_body else anc.body
            if any(b is n for s in other for n in ast.walk(s)):
                return True
    return False


def _constructed_in(ix: FileIndex, body: list[ast.stmt], model: str) -> bool:
    if model not in ix.models:
        return False
    for stmt in body:
        for n in ix.scope_nodes(stmt) if not isinstance(stmt, (ast.FunctionDef, ast.ClassDef)) else ():
            if isinstance(n, ast.Assign) and any(dotted(t) == model for t in n.targets):
                return True
    return False


def _container(parent: ast.AST, child: ast.AST) -> list | None:
    for _, value in ast.iter_fields(parent):
        if isinstance(value, list) and any(v is child for v in value):
            return value
    return None


def _arg_for_param(func: FuncNode, call: ast.Call, param: str) -> str | None:
    names = [a.arg for a in func.args.posonlyargs + func.args.args]
    if names and names[0] in ("self", "cls") and isinstance(call.func, ast.Attribute):
        names = names[1:]
    for kw in call.keywords:
        if kw.arg == param:
            return dotted(kw.value)
    if param in names:
        i = names.index(param)
        if i < len(call.args):
            return dotted(call.args[i])
    return None


def mode_at(ix: FileIndex, node: ast.AST, model: str | None, depth: int = 2, strict: bool = False) -> str | None:
    """'train', 'eval' or None (unknown): the mode ``model`` is in when ``node`` runs.
    ``strict``: only mode switches on ``model`` itself count as eval (for flagging eval)."""
    cur: ast.AST = ix.statement_of(node)
    while True:
        parent = ix.parents.get(cur)
        if parent is None:
            return None
        body = _container(parent, cur)
        if body is not None:
            i = next(k for k, v in enumerate(body) if v is cur)
            for stmt in reversed(body[:i]):
                m = _last_mode(ix, [stmt], model, strict)
                if model and isinstance(stmt, ast.Assign) and any(dotted(t) == model for t in stmt.targets) \
                        and not (m is None and _same_module_moved(stmt.value, model)):
                    # (``model = model.to(device)``: the same module, its mode unchanged: look further up)
                    # bound here: a mode switch inside the value's helper (a teacher factory that calls
                    # teacher.eval()) may be another model's; a fresh model starts in training mode
                    return "train" if m is None and model in ix.models else None
                if m:
                    return None if m == "unknown" else m
            if isinstance(parent, (ast.For, ast.AsyncFor, ast.While)) and body is parent.body:
                tail = _last_mode(ix, body[i + 1:], model, strict)
                if tail == "train":
                    return "train"  # the previous iteration left the model training
                if tail == "unknown":
                    return None
        if isinstance(parent, (ast.With, ast.AsyncWith)):
            items = [n for item in parent.items for n in ix.scope_nodes(item.context_expr)]
            if unknown_calls_with(ix, items, model) or any(
                    ix.callee(n) is not None for n in items if isinstance(n, ast.Call)):
                return None  # `with eval_mode(model):` and the like
        if isinstance(parent, ast.Module):
            return "train" if model and _constructed_in(ix, parent.body, model) else None
        if isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef)):
            if model and _constructed_in(ix, parent.body, model):
                return "train"
            if depth <= 0:
                return None
            results = []
            for site in ix.call_sites(parent):
                outer = _arg_for_param(parent, site, model) if model else None
                if outer is None and model and model.startswith("self."):
                    outer = model
                results.append(mode_at(ix, site, outer, depth - 1, strict))
            if "train" in results:
                return "train"
            return "eval" if results and all(r == "eval" for r in results) else None
        if isinstance(parent, (ast.ClassDef, ast.Lambda)):
            return None
        cur = parent


# --------------------------------------------------------------------------- rules


def _needs_grad(ix: FileIndex, region: ast.AST) -> bool:
    """Does the region use gradients on purpose (attribution, adversarial inputs)?"""
    for n in ix.scope_nodes(region):
        if isinstance(n, ast.Call):
            name = dotted(n.func) or ""
            if name.endswith(("autograd.grad", "enable_grad", "requires_grad_")) or ".autograd.functional." in name:
                return True
    return False


#: torch layers whose forward is the same in training and eval mode (no dropout, no batch statistics)
_MODE_FREE = MODE_FREE_LAYERS
#: module methods that return the module itself
_MOVES = frozenset({"to", "cuda", "cpu", "float", "double", "half", "bfloat16", "train", "requires_grad_"})
#: calls whose results are values, not modules (a scale, a buffer's tensor, a parameter)
_VALUES = frozenset({"sqrt", "float", "int", "len", "list", "dict", "tuple", "range", "tensor", "zeros", "ones",
                     "randn", "rand", "arange", "empty", "full", "eye", "linspace", "Parameter", "log", "exp", "max",
                     "min", "sum", "pow"})
#: names in a module's code that make its forward depend on the mode
_MODE_WORDS = ("dropout", "batch_norm", "instance_norm", "batchnorm")


def _mode_free_call(ix: FileIndex, call: ast.AST, depth: int) -> bool:
    """Is ``call`` the construction of a layer whose forward is proven not to depend on the mode?"""
    while isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and call.func.attr in _MOVES:
        call = call.func.value  # Net().to(device), .cuda(), .float(): the same module
    if not isinstance(call, ast.Call):
        return False
    name = dotted(call.func) or ""
    last = name.rsplit(".", 1)[-1]
    if last in ("LSTM", "GRU", "RNN") and name in (last, f"nn.{last}", f"torch.nn.{last}"):
        dropout = kwarg(call, "dropout")
        return len(call.args) < 6 and (dropout is None or (isinstance(dropout, ast.Constant) and not dropout.value))
    if last == "MultiheadAttention" and name in (last, f"nn.{last}", f"torch.nn.{last}"):
        # attention dropout (default 0.0) is its only mode-dependent part
        return _zero_or_default(call, "dropout", 2, default_zero=True)
    if last in ("TransformerEncoderLayer", "TransformerDecoderLayer") and name in (last, f"nn.{last}",
                                                                                   f"torch.nn.{last}"):
        # its dropouts (default 0.1, the fourth argument) are its only mode-dependent parts
        return _zero_or_default(call, "dropout", 3, default_zero=False)
    if last in ("TransformerEncoder", "TransformerDecoder") and name in (last, f"nn.{last}", f"torch.nn.{last}"):
        layer = call.args[0] if call.args else kwarg(call, "encoder_layer" if last.endswith("Encoder")
                                                     else "decoder_layer")
        return layer is not None and _mode_free_call(ix, layer, depth)
    if last in ("InstanceNorm1d", "InstanceNorm2d", "InstanceNorm3d") and name in (last, f"nn.{last}",
                                                                                   f"torch.nn.{last}"):
        # without running statistics (the default) it normalises each sample by itself in both modes
        return _zero_or_default(call, "track_running_stats", 4, default_zero=True)
    if last in ("Sequential", "ModuleList") and name in (last, f"nn.{last}", f"torch.nn.{last}"):
        items = _layer_items(call.args[0]) if last == "ModuleList" and call.args else _layer_items(
            ast.List(elts=list(call.args)))
        return (last == "Sequential" or bool(call.args)) and items is not None and all(
            _mode_free_call(ix, a, depth) for a in items)
    if last in _MODE_FREE and name in (last, f"nn.{last}", f"torch.nn.{last}"):
        return True
    if last in ix.classes and last in ix.module_classes and depth < 3:
        return _mode_free_class(ix, ix.classes[last], depth + 1)
    return False


def _zero_or_default(call: ast.Call, param: str, position: int, default_zero: bool) -> bool:
    """Is ``param`` of ``call`` (keyword or the ``position``-th positional argument) a literal 0/False,
    or left out where its default is 0/False?"""
    value = kwarg(call, param)
    if value is None and len(call.args) > position:
        value = call.args[position]
    if value is None:
        return default_zero
    return isinstance(value, ast.Constant) and not value.value and not isinstance(value.value, str)


def _layer_items(node: ast.expr) -> list[ast.expr] | None:
    """The layer expressions of a ModuleList/Sequential argument: a list or tuple display (``[Block()] * n``
    too), or the element of a comprehension (``Block() for _ in range(n)``); None when they cannot be seen."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
        node = node.left if isinstance(node.left, (ast.List, ast.Tuple)) else node.right
    if isinstance(node, (ast.List, ast.Tuple)):
        items: list[ast.expr] = []
        for e in node.elts:
            inner = _layer_items(e.value) if isinstance(e, ast.Starred) else [e]
            if inner is None:
                return None
            items += inner
        return items
    if isinstance(node, (ast.ListComp, ast.GeneratorExp)):
        return [node.elt]
    return None


def _mode_free_class(ix: FileIndex, cls: ast.ClassDef, depth: int) -> bool:
    """A module class of this file whose layers are all mode-free and whose code never reads the mode
    (``self.training``, functional dropout or batch norm)."""
    if any(dotted(b) not in ("nn.Module", "torch.nn.Module", "Module") for b in cls.bases):
        return False
    for node in ast.walk(cls):  # the code, not its comments: anything that reads or sets the mode
        ident = node.attr if isinstance(node, ast.Attribute) else node.id if isinstance(node, ast.Name) else ""
        if ident in ("training", "train", "eval") or any(w in ident.lower() for w in _MODE_WORDS):
            return False
    for node in ast.walk(cls):
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if not any(isinstance(t, ast.Attribute) or isinstance(t, ast.Tuple) and any(
                    isinstance(e, ast.Attribute) for e in t.elts) for t in targets):
                continue  # a local (``out, _ = self.lstm(x)``), not a layer kept on the module
            values = node.value.elts if isinstance(node.value, ast.Tuple) else [node.value]
            for v in values:
                if isinstance(v, ast.Call) and not _mode_free_call(ix, v, depth) \
                        and (dotted(v.func) or "").rsplit(".", 1)[-1] not in _VALUES:
                    return False  # a layer not proven mode-free (or a call of unknown result: a model hub)
    return True


def _mode_free(ix: FileIndex, model: str | None) -> bool:
    """Is ``model`` bound once, in this file, to a module proven to behave the same in both modes (an
    ``nn.Sequential`` of such layers, or a class of this file made of them)?  Then evaluating it in
    training mode changes nothing, whatever the mode is."""
    values = ix.assigns.get(model or "", [])
    return len(values) == 1 and _mode_free_call(ix, values[0], 0)


@rule("train-mode-in-eval")
def train_mode_in_eval(ix: FileIndex) -> Iterator[Hit]:
    yield from lightning_train_mode_in_eval(ix)
    for region, call, named in eval_regions(ix):
        model = dotted(call.func)
        func = ix.enclosing_function(call)
        own = events(ix, func.body, depth=0) if func is not None else []
        if any(e.kind == "train" for e in own) and not any(e.kind == "backward" for e in own):
            continue  # the evaluation switches to train() itself: on purpose (MC dropout, BN recalibration)
        if not named and not _trains_before(ix, region):
            continue  # a no_grad loop that is not named as evaluation (e.g. BatchNorm recalibration)
        if mode_at(ix, call, model) == "train" and not _mode_free(ix, model):
            yield Hit("train-mode-in-eval", call,
                      f"{model} runs in evaluation code while still in training mode (dropout active, "
                      f"BatchNorm using and updating batch statistics), so the metrics are noisy and wrong", fix=f""
                      f"call {model}.eval() before evaluating (and {model}.train() before training resumes)")


def _trains_before(ix: FileIndex, region: ast.AST) -> bool:
    """Does the code around ``region`` train (call backward()) before it?"""
    func = ix.enclosing_function(region)
    body = func.body if func is not None else ix.tree.body
    return any(e.kind == "backward" and e.site.lineno < region.lineno for e in events(ix, body, depth=2))


def _no_grad_reaches(ix: FileIndex, node: ast.AST, depth: int = 2) -> bool | None:
    """True: under no_grad; False: provably not; None: unknown."""
    if ix.under_no_grad(node):
        return True
    func = ix.enclosing_function(node)
    if func is None:
        return False if ix.enclosing_class(node) is None else None
    if any(e.kind == "backward" for e in events(ix, func.body, depth=0)):
        return False  # a function that trains runs with autograd on
    if depth <= 0:
        return None
    sites = ix.call_sites(func)
    if not sites:
        return None
    results = [_no_grad_reaches(ix, s, depth - 1) for s in sites]
    if all(r is True for r in results):
        return True
    return False if False in results else None


def _freezes_all(ix: FileIndex, stmt: ast.stmt, model: str) -> bool:
    """Is ``stmt`` ``model.requires_grad_(False)``, or a loop over ``model.parameters()`` /
    ``model.named_parameters()`` whose body sets the loop's parameter ``requires_grad = False``
    unconditionally (every parameter of the whole model, not of a part of it)?"""
    if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
        c = stmt.value
        return isinstance(c.func, ast.Attribute) and c.func.attr == "requires_grad_" \
            and dotted(c.func.value) == model and len(c.args) == 1 and is_false(c.args[0])
    if not isinstance(stmt, ast.For) or not isinstance(stmt.iter, ast.Call) \
            or not isinstance(stmt.iter.func, ast.Attribute) or stmt.iter.args \
            or stmt.iter.func.attr not in ("parameters", "named_parameters") \
            or dotted(stmt.iter.func.value) != model:
        return False
    target = stmt.target
    if stmt.iter.func.attr == "named_parameters":
        if not (isinstance(target, ast.Tuple) and len(target.elts) == 2):
            return False
        target = target.elts[1]
    if not isinstance(target, ast.Name):
        return False
    for b in stmt.body:
        if isinstance(b, ast.Assign) and is_false(b.value) and any(
                isinstance(t, ast.Attribute) and t.attr == "requires_grad" and dotted(t.value) == target.id
                for t in b.targets):
            return True
        if isinstance(b, ast.Expr) and isinstance(b.value, ast.Call) and isinstance(b.value.func, ast.Attribute) \
                and b.value.func.attr == "requires_grad_" and dotted(b.value.func.value) == target.id \
                and len(b.value.args) == 1 and is_false(b.value.args[0]):
            return True
    return False


def _sets_grad_off(node: ast.AST, param: str) -> bool:
    """Does ``node`` hold ``param.requires_grad = False`` or ``param.requires_grad_(False)``?"""
    for n in ast.walk(node):
        if isinstance(n, ast.Assign) and is_false(n.value) and any(
                isinstance(t, ast.Attribute) and t.attr == "requires_grad" and dotted(t.value) == param
                for t in n.targets):
            return True
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "requires_grad_" \
                and dotted(n.func.value) == param and len(n.args) == 1 and is_false(n.args[0]):
            return True
    return False


def _freezes_part(ix: FileIndex, model: str) -> bool:
    """Does the file switch ``requires_grad`` off for some of ``model``'s parameters: ``model.requires_grad_(False)``
    (or a submodule's), or a loop over ``model.parameters()`` / ``model.named_parameters()`` (or a submodule's)
    whose body, under any condition, sets the loop's parameter ``requires_grad = False``?  Then the model is (partly)
    a frozen feature extractor, and an eval() on it may be the protocol (a linear probe keeps the frozen
    BatchNorm statistics as they are): which of its layers still train, and whether any of them depends on the
    mode, is not known."""
    def _of_model(expr: ast.AST) -> bool:
        text = dotted(expr) or ""
        return text == model or text.startswith(model + ".")
    for n in ast.walk(ix.tree):
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "requires_grad_" \
                and _of_model(n.func.value) and len(n.args) == 1 and is_false(n.args[0]):
            return True
        if isinstance(n, (ast.For, ast.AsyncFor)) and isinstance(n.iter, ast.Call) \
                and isinstance(n.iter.func, ast.Attribute) and not n.iter.args \
                and n.iter.func.attr in ("parameters", "named_parameters") and _of_model(n.iter.func.value):
            target = n.target
            if n.iter.func.attr == "named_parameters":
                if not (isinstance(target, ast.Tuple) and len(target.elts) == 2):
                    continue
                target = target.elts[1]
            if isinstance(target, ast.Name) and any(_sets_grad_off(b, target.id) for b in n.body):
                return True
    return False


def _module_at_site(ix: FileIndex, ev) -> str | None:
    """The module an in-file helper's ``eval()`` is on, as the loop names it: the argument the helper called at
    ``ev.site`` receives for the parameter the ``eval()`` is called on (None when not known)."""
    if not ev.nested or not ev.target or not isinstance(ev.site, ast.Call):
        return ev.target if not ev.nested else None
    func = ix.enclosing_function(ev.node)
    if func is None or (dotted(ev.site.func) or "").rsplit(".", 1)[-1] != func.name:
        return None
    return _arg_for_param(func, ev.site, ev.target)


def is_false(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and node.value is False


def _turns_grad_on(node: ast.AST) -> bool:
    """``requires_grad=True`` / ``x.requires_grad = True`` / ``requires_grad_()`` or ``(True)`` in ``node``."""
    for n in ast.walk(node):
        if isinstance(n, ast.keyword) and n.arg == "requires_grad" and not is_false(n.value):
            return True
        if isinstance(n, ast.Assign) and not is_false(n.value) and any(
                isinstance(t, ast.Attribute) and t.attr == "requires_grad" for t in n.targets):
            return True
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "requires_grad_" \
                and not (len(n.args) == 1 and is_false(n.args[0])):
            return True
    return False


def _frozen_models_only(ix: FileIndex, region: ast.AST) -> bool:
    """Does every model the region calls have all its parameters frozen by a statement of the function (or
    module) that holds the region, before the region, with nothing in that function (or the file) asking for
    gradients again?  Then no operation of the evaluation has an input that requires grad: no graph is built,
    and ``no_grad`` would change nothing."""
    calls = model_calls(ix, region)
    if not calls:
        return False
    if isinstance(region, (ast.FunctionDef, ast.AsyncFunctionDef)):  # an evaluation function: freezes in it
        func, before = region, min(c.lineno for c in calls)
    else:  # an evaluation loop: freezes before it
        func, before = ix.enclosing_function(region), region.lineno
    scope = func if func is not None else ix.tree
    if _turns_grad_on(scope):
        return False
    top = scope.body  # a freeze under a condition or in a loop may not run
    stmts = [s for s in ix.scope_nodes(scope) if isinstance(s, ast.stmt)]
    for model in {dotted(c.func) for c in calls}:
        if not model or "." in model:
            return False  # an attribute may be reassigned anywhere
        freezes = [s for s in top if _freezes_all(ix, s, model) and s.end_lineno < before]
        if not freezes:
            return False
        after = freezes[0].lineno
        for n in stmts:  # rebound after the freeze to anything but the same module moved (model.to(device))
            if isinstance(n, (ast.Assign, ast.AnnAssign, ast.AugAssign)) and n.lineno > after and any(
                    dotted(t) == model for t in (n.targets if isinstance(n, ast.Assign) else [n.target])) \
                    and not _same_module_moved(n.value, model):
                return False
    return True


def _same_module_moved(value: ast.AST | None, model: str) -> bool:
    """``model.to(device)``, ``model.cuda().eval()``: the same module object."""
    while isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) \
                and value.func.attr in _MOVES | {"eval"}:
        value = value.func.value
    return dotted(value) == model


def _feeds_backward(ix: FileIndex, loop: ast.AST, names: set[str]) -> bool:
    """Do ``names`` flow, through the assignments of ``loop``'s body, into a value ``loop`` calls ``backward()``
    on (``loss = f(pos, neg)`` ... ``loss.backward()``)?"""
    nodes = ix.scope_nodes(loop)
    wanted = {dotted(n.func.value) for n in nodes if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
              and n.func.attr == "backward" and dotted(n.func.value)}
    if not wanted:
        return False
    assigns = [n for n in nodes if isinstance(n, (ast.Assign, ast.AugAssign, ast.AnnAssign)) and n.value is not None]
    for _ in range(8):  # the names the backward's value is computed from, a few assignments back
        grown = set(wanted)
        for a in assigns:
            targets = a.targets if isinstance(a, ast.Assign) else [a.target]
            if any(isinstance(x, ast.Name) and x.id in wanted for t in targets for x in ast.walk(t)):
                grown |= {x.id for x in ast.walk(a.value) if isinstance(x, ast.Name)}
        if grown == wanted:
            break
        wanted = grown
    return bool(wanted & names)


def _called_by_training(ix: FileIndex, func: ast.AST) -> bool:
    """Is the function ``func`` (named like an evaluation routine) called in this file inside a loop whose
    ``backward()`` reads its result (spotlight's ``_get_negative_prediction`` scores the negatives ``fit()``'s
    loss is built from)?  Then it is part of training, and its graph is needed."""
    if not isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return False
    for n in ast.walk(ix.tree):
        if not (isinstance(n, ast.Call) and (dotted(n.func) or "").rsplit(".", 1)[-1] == func.name):
            continue
        stmt = next((a for a in ix.ancestors(n) if isinstance(a, (ast.Assign, ast.AnnAssign))), None)
        loop = next(iter(ix.enclosing_loops(n)), None)
        if stmt is None or loop is None or ix.enclosing_function(n) is func:
            continue
        targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
        names = {x.id for t in targets for x in ast.walk(t) if isinstance(x, ast.Name)}
        if _feeds_backward(ix, loop, names):
            return True
    return False


def _volatile_before_04(ix: FileIndex, region: ast.AST) -> bool:
    """Does ``region`` wrap values in ``Variable(..., volatile=True)`` (itself, or through a project helper
    it asks for a volatile input: ``get_batch(..., evaluation=True)``) in a project whose torch floor is below
    0.4, or, naming none, whose code beside the file is written for torch before 0.4 (``.cuda(async=True)``,
    ``loss.data[0]`` and nothing of 0.4's API)?  Up to torch 0.3 ``volatile`` is how autograd was switched off
    (no graph); it is ignored from 0.4 on, so whether a graph is built depends on a torch the project allows
    either way: not provable."""
    if not volatile_in(ix, region):
        return False
    floor = torch_floor_of(ix.path)
    if floor is None:
        return written_for_torch_before_04(ix.path, ix.project.root if ix.project is not None else None)
    return floor < (0, 4)


@rule("graph-in-eval")
def graph_in_eval(ix: FileIndex) -> Iterator[Hit]:
    if ix.grad_globally_off:
        return
    yield from lightning_graph_in_eval(ix)
    for region, call, named in eval_regions(ix):
        if not named or _needs_grad(ix, region):
            continue
        if _called_by_training(ix, region):
            continue  # named like prediction, but a training loop of this file calls it and backpropagates
        if _volatile_before_04(ix, region):
            continue  # Variable(..., volatile=True) turns autograd off on the torch < 0.4 the project allows
        if _frozen_models_only(ix, region):
            continue  # every parameter frozen before: nothing in it requires grad, no graph is built
        if _no_grad_reaches(ix, call) is False:
            yield Hit("graph-in-eval", call,
                      "evaluation runs with autograd on: a graph is built and kept for every batch, costing "
                      "memory and time for gradients nobody reads", fix="wrap it in `with torch.no_grad():` (or "
                      "`torch.inference_mode()`)")


def _frozen(ix: FileIndex, model: str | None) -> bool:
    """Is ``model`` frozen somewhere in the file (``requires_grad_(False)``, or
    ``p.requires_grad = False`` over its parameters)?"""
    for line in ix.source_lines:
        if "requires_grad" in line and model and model in line:
            return True
    for loop in ix.loops:
        if isinstance(loop, (ast.For, ast.AsyncFor)) and model and f"{model}." in ix.segment(loop.iter) and any(
                "requires_grad" in ix.segment(s) for s in loop.body):
            return True
    return False


def _parameters_of(arg: ast.expr) -> str | None:
    """``X.parameters()`` (or ``filter(f, X.parameters())``, ``list(X.parameters())``): X's text, else None."""
    if isinstance(arg, ast.Call) and dotted(arg.func) in ("filter", "list") and arg.args:
        arg = arg.args[-1]
    if isinstance(arg, ast.Call) and isinstance(arg.func, ast.Attribute) and arg.func.attr == "parameters" \
            and not arg.args:
        return dotted(arg.func.value)
    return None


def _steps_other_modules(ix: FileIndex, unit: ast.AST, model: str | None) -> bool:
    """Is every optimizer stepped in ``unit`` built, wherever this file assigns it, over the parameters of a
    module other than ``model`` (neither of them part of the other)?  Then ``model`` is not shown to be trained
    there: it may be a fixed feature extractor, or hand its trained parts to that module, whose own mode counts."""
    targets = {e.target for e in events(ix, unit) if e.kind == "step"}
    if not model or not targets or None in targets:
        return False
    for target in targets:
        values = ix.assigns.get(target or "", [])
        if not values:
            return False
        for v in values:
            if not isinstance(v, ast.Call):
                return False
            arg = v.args[0] if v.args else kwarg(v, "params")
            owner = _parameters_of(arg) if arg is not None else None
            if owner is None or owner == model or owner.startswith(model + ".") or model.startswith(owner + "."):
                return False
    return True


_SAME_MODULE = frozenset({"to", "cuda", "cpu", "float", "double", "half", "bfloat16", "type", "requires_grad_"})


def _loop_of(ix: FileIndex, node: ast.AST) -> ast.AST | None:
    """The loop a ``break``/``continue`` leaves."""
    return next((a for a in ix.ancestors(node) if isinstance(a, (ast.For, ast.AsyncFor, ast.While))), None)


def _mode_put_back(ix: FileIndex, call: ast.AST, target: str | None) -> bool:
    """``was = m.training; m.eval(); ...; m.train(was)``: the ``eval()`` at ``call`` is undone by a later
    ``train(was)`` of the same module, in the same statement list (so on every path that goes on past it, no
    ``return`` between them), with ``was`` read from ``m.training`` before the ``eval()`` and ``m`` bound to no
    other module in between: the module leaves in the mode it came in."""
    func = ix.enclosing_function(call)
    if not target or func is None:
        return False
    nodes = ix.scope_nodes(func)
    at = (call.lineno, call.col_offset)
    saved = {t.id for n in nodes if isinstance(n, ast.Assign) and (n.lineno, n.col_offset) < at
             and isinstance(n.value, ast.Attribute) and n.value.attr == "training" and dotted(n.value.value) == target
             for t in n.targets if isinstance(t, ast.Name)}
    if not saved:
        return False
    holder = next((a for a in [call, *ix.ancestors(call)] if isinstance(a, ast.stmt)), None)
    for restore in nodes:
        if not (isinstance(restore, ast.Call) and isinstance(restore.func, ast.Attribute) and restore.func.attr == "train"
                and dotted(restore.func.value) == target and (restore.lineno, restore.col_offset) > at):
            continue
        arg = restore.args[0] if restore.args else kwarg(restore, "mode")
        if not (isinstance(arg, ast.Name) and arg.id in saved):
            continue
        stmt = ix.parents.get(restore)
        block = _container(ix.parents.get(stmt), stmt) if isinstance(stmt, ast.Expr) else None
        if block is None:
            continue
        # the statement of that block holding the eval() comes before the restore
        mine = next((s for s in [holder, *ix.ancestors(holder)] if any(s is b for b in block)), None)
        if mine is None or block.index(mine) >= block.index(stmt):
            continue
        between = [n for n in nodes if at < (getattr(n, "lineno", 0), getattr(n, "col_offset", 0))
                   < (restore.lineno, restore.col_offset)]
        if any(isinstance(n, (ast.Return, ast.Raise)) for n in between):
            continue
        # a break/continue leaves the restore behind only from a loop around the eval() (not one after it)
        if any(isinstance(n, (ast.Break, ast.Continue)) and
               (getattr(_loop_of(ix, n), "lineno", 0), getattr(_loop_of(ix, n), "col_offset", 0)) < at
               for n in between):
            continue
        rebound = [n for n in between if isinstance(n, ast.Assign) and any(dotted(t) == target for t in n.targets)]
        if all(isinstance(n.value, ast.Call) and isinstance(n.value.func, ast.Attribute)
               and n.value.func.attr in _SAME_MODULE and dotted(n.value.func.value) == target for n in rebound):
            return True
    return False


@rule("eval-mode-in-train")
def eval_mode_in_train(ix: FileIndex) -> Iterator[Hit]:
    yield from lightning_eval_mode_left(ix)
    seen: set[int] = set()
    flagged_loops: set[int] = set()
    for loop in ix.loops:
        evs = events(ix, loop, depth=2)
        kinds = {e.kind for e in evs}
        if not {"backward", "step"} <= kinds or "train" in kinds:
            continue
        steps = [e.site for e in evs if e.kind in ("backward", "step")]
        for ev in evs:
            if ev.kind != "eval" or id(ev.site) in seen:
                continue
            if exclusive(ix, ev.site, steps):
                continue  # `if train: step()` / `else: model.eval()`: one call trains or evaluates
            if ev.target and set(tokens(ev.target)) & _NOT_TRAINED:
                continue
            if _mode_put_back(ix, ev.node, ev.target):
                continue  # `was = m.training; m.eval(); ...; m.train(was)`: the mode it came in with, put back
            frozen = _module_at_site(ix, ev)
            if frozen and _freezes_part(ix, frozen):
                continue  # requires_grad switched off on (part of) it: a frozen feature extractor kept in eval mode
            if not ev.nested and not ix.is_model(ev.target):
                continue
            model = ev.target if not ev.nested else None
            if model and unknown_calls_with(ix, ix.scope_nodes(loop), model):
                continue  # an opaque helper gets the model and may switch it back
            if model and any(isinstance(n, ast.Assign) and any(dotted(t) == model for t in n.targets)
                             for n in ix.scope_nodes(loop)):
                continue  # a fresh model every iteration (k-fold, restarts) starts in training mode
            seen.add(id(ev.site))
            flagged_loops.add(id(loop))
            yield Hit("eval-mode-in-train", ev.site,
                      "this training loop switches the model to eval mode here but never back to training "
                      "mode, so later steps train with dropout off and BatchNorm frozen", fix=f"call "
                      f"{ev.target if ev.target and not ev.nested else 'model'}.train() at the start of each "
                      f"epoch/training phase")
            break
    # a training loop entered while the model is still in eval mode (evaluated first, never train())
    for unit in loop_units(ix):
        if id(unit) in flagged_loops or any(id(enc) in flagged_loops for enc in ix.enclosing_loops(unit)):
            continue
        calls = [c for c in model_calls(ix, unit) if not ix.under_no_grad(c)]
        if len({dotted(c.func) for c in calls}) != 1:
            continue  # none, or several models (one may be a frozen feature extractor in eval mode)
        model = dotted(calls[0].func)
        if set(tokens(model or "")) & _NOT_TRAINED or _frozen(ix, model):
            continue
        func = ix.enclosing_function(unit)
        steps = [e.site for e in events(ix, unit) if e.kind in ("backward", "step")]
        evals = [e.site for e in events(ix, func.body if func else ix.tree, depth=0) if e.kind == "eval"]
        if evals and all(exclusive(ix, e, steps) for e in evals):
            continue  # `if mode == "train": model.train() else: model.eval()` ... `if mode == "train": step()`
        if _steps_other_modules(ix, unit, model):
            continue  # the optimizers it steps hold other modules' parameters: the model is not shown trained
        if mode_at(ix, calls[0], model, strict=True) == "eval":
            yield Hit("eval-mode-in-train", calls[0],
                      f"{model} is trained here while still in eval mode (an earlier {model}.eval() is never undone), "
                      f"so dropout is off and BatchNorm frozen for the whole run", fix=f"call {model}.train() before the "
                      f"training loop")


def _known_module(ix: FileIndex, node: ast.expr, text: str) -> bool:
    """Is ``node`` certainly an ``nn.Module`` (built from a module class or a torch layer, here or one
    hop away)?  Only then is ``m(x)`` the same call as ``m.forward(x)`` plus the hooks."""
    if text in ix.models and not any(
            isinstance(v, ast.Call) and (dotted(v.func) or "").endswith("RemoteModule")
            for v in ix.assigns.get(text, ())):
        return True
    try:
        value = values_for(ix).of(node)
    except RecursionError:
        return False
    return value.is_module


@rule("forward-called-directly", fixable=True)
def forward_called_directly(ix: FileIndex) -> Iterator[Hit]:
    """``m.forward(x)`` where ``m`` is known to be an nn.Module (not in tests, which call forward on purpose)."""
    if ix.is_test_file:
        return
    for call in ix.calls:
        func = call.func
        if not (isinstance(func, ast.Attribute) and func.attr == "forward"):
            continue
        recv = dotted(func.value)
        if recv is None or recv in ("self", "cls", "super") or recv.rsplit(".", 1)[-1][:1].isupper():
            continue
        v = func.value
        if not _known_module(ix, v, recv):
            continue  # a Protocol object, an RPC RemoteModule, a wrapper: .forward may be the documented call
        edit = Edit(v.end_lineno, v.end_col_offset, func.end_lineno, func.end_col_offset, "")
        yield Hit("forward-called-directly", call,
                  f"{recv}.forward(...) skips the module's hooks (guards, profilers, quantisation)", fix=f"call "
                  f"{recv}(...) instead",
                  edits=[edit], fix_note=f"{recv}.forward(...) -> {recv}(...)")
