"""A freeze that never reaches the parameters (OVT127 ``freeze-not-applied``, issue 33, optimizers and
parameters).

``requires_grad`` is a property of tensors.  Assigned where no parameter sees it, it freezes nothing:

- on a module (``model.backbone.requires_grad = False``, a loop over ``model.children()`` /
  ``modules()`` / the modules of ``named_children()`` / ``named_modules()``): a plain Python attribute
  that PyTorch never reads; the method is ``requires_grad_()`` (MICCAI23-ProtoContra-SFDA#18,
  catalyst#81);
- on the values of ``state_dict()`` (a loop over ``.values()`` / ``.items()``, or ``sd[key]`` of a
  name assigned ``model.state_dict()``): ``state_dict()`` returns detached tensors
  (``keep_vars=False``), not the parameters.

A module is proven by the value analysis (a torch layer, a container, a module class of the
project) or by the loop that yields it.  Silent when the module's own class (of the project)
reads or stores ``self.requires_grad`` (a flag the class manages itself) and for
``state_dict(keep_vars=True)``, whose values are the parameters.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from overt.lint.analysis.values import values_for
from overt.lint.index import FileIndex, dotted, kwarg
from overt.lint.rules.base import Hit, rule

_TENSOR_CLASSES = frozenset({"Parameter", "UninitializedParameter", "Buffer", "UninitializedBuffer"})
_MODULE_ITERS = {"children": None, "modules": None, "named_children": 1, "named_modules": 1}


def _state_dict_call(node: ast.expr | None) -> bool:
    """``X.state_dict()`` without ``keep_vars=True``."""
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "state_dict"):
        return False
    keep = kwarg(node, "keep_vars")
    return not (isinstance(keep, ast.Constant) and keep.value is True) and not (node.args and len(node.args) >= 3)


def _loop_kind(loop: ast.For, name: str) -> str | None:
    """What the loop variable ``name`` of ``loop`` holds: "module", "copy" (a state_dict value) or None."""
    it = loop.iter
    if not isinstance(it, ast.Call) or not isinstance(it.func, ast.Attribute):
        return None
    attr = it.func.attr
    target = loop.target
    position = None
    if isinstance(target, ast.Tuple):
        names = [e.id if isinstance(e, ast.Name) else None for e in target.elts]
        if name not in names:
            return None
        position = names.index(name)
    elif not (isinstance(target, ast.Name) and target.id == name):
        return None
    if attr in _MODULE_ITERS:
        return "module" if position == _MODULE_ITERS[attr] else None
    if attr in ("values", "items") and _state_dict_call(it.func.value):
        want = None if attr == "values" else 1
        return "copy" if position == want else None
    return None


def _manages_flag(cls: ast.ClassDef) -> bool:
    """The class reads or stores ``self.requires_grad`` (or names it in getattr/setattr/hasattr)."""
    for n in ast.walk(cls):
        if isinstance(n, ast.Attribute) and n.attr == "requires_grad" and isinstance(n.value, ast.Name) \
                and n.value.id == "self":
            return True
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in ("getattr", "setattr", "hasattr") \
                and any(isinstance(a, ast.Constant) and a.value == "requires_grad" for a in n.args):
            return True
    return False


def _kind(ix: FileIndex, obj: ast.expr, at: ast.AST) -> str | None:
    """What ``obj`` (the object whose ``requires_grad`` is assigned at ``at``) is: "module", "copy" or None."""
    if isinstance(obj, ast.Name):
        for loop in ix.enclosing_loops(at):
            if isinstance(loop, ast.For):
                kind = _loop_kind(loop, obj.id)
                if kind:
                    return kind
    if isinstance(obj, ast.Subscript):
        base = obj.value
        values = [base] if isinstance(base, ast.Call) else list(ix.assigns.get(dotted(base) or "", ()))
        if values and all(_state_dict_call(v) for v in values):
            return "copy"
        return None
    try:
        value = values_for(ix).of(obj)
    except RecursionError:
        return None
    if not value.is_module or value.layer in _TENSOR_CLASSES:
        return None  # (nn.Parameter and nn.Buffer are tensors: requires_grad is theirs)
    if value.cls is not None and _manages_flag(value.cls.node):
        return None
    return "module"


@rule("freeze-not-applied")
def freeze_not_applied(ix: FileIndex) -> Iterator[Hit]:
    for node in ast.walk(ix.tree):
        if not isinstance(node, ast.Assign):
            continue
        for target in node.targets:
            if not (isinstance(target, ast.Attribute) and target.attr == "requires_grad"):
                continue
            kind = _kind(ix, target.value, node)
            if kind is None:
                continue
            text = ix.segment(target.value)
            value = ix.segment(node.value)
            if kind == "module":
                yield Hit("freeze-not-applied", node,
                          f"{text}.requires_grad = {value} sets a plain attribute on an nn.Module, which PyTorch never "
                          "reads: the module's parameters keep their requires_grad, so the layer is trained (or left "
                          "frozen) as before",
                          fix=f"call the method, {text}.requires_grad_({value}), which sets it on every parameter")
            else:
                yield Hit("freeze-not-applied", node,
                          f"{text}.requires_grad = {value} is set on a tensor of state_dict(), a detached copy of the "
                          "weights, not on the parameter: the model's parameters keep their requires_grad and are "
                          "trained as before",
                          fix="iterate over model.named_parameters() instead of model.state_dict() and set "
                          "p.requires_grad there (or call module.requires_grad_(False))")
