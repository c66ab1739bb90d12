"""Which modules a plain Python container can hold without losing anything (used by unregistered-submodule,
OVT401; session 49, fresh4-dev).

A module kept in a plain list is not a child of its owner: the optimizer (through ``parameters()``), ``.to()``,
``state_dict()`` and ``train()``/``eval()`` all miss it.  A module with no parameters, no buffers and no
train/eval behaviour has nothing for any of them to reach, so the list loses nothing.  This is proven only
for torch.nn activations, pooling, padding and shape layers, and for classes of the same file built from
nothing but those and plain values; anything else (an imported class, a call of unknown result, a read of
``self.training``, a registration) leaves the question open, and the rule reports as before.
"""

from __future__ import annotations

import ast
import re

from overt.lint.index import FileIndex, dotted

#: torch.nn classes with no parameters, no buffers and the same behaviour in train() and eval() (dropout and
#: the norms are not among them: a plain list hides them from eval(), or their state from state_dict())
_STATELESS = re.compile(
    r"(ReLU|ReLU6|GELU|SiLU|Mish|Tanh|Sigmoid|Hardtanh|Hardswish|Hardsigmoid|LeakyReLU|ELU|CELU|SELU|GLU|Softmax|"
    r"Softmax2d|LogSoftmax|Softmin|Softplus|Softsign|Tanhshrink|Threshold|LogSigmoid|Identity|Flatten|Unflatten|"
    r"(Max|Avg|AdaptiveMax|AdaptiveAvg|LP)Pool[123]d|MaxUnpool[123]d|Upsample|UpsamplingNearest2d|"
    r"UpsamplingBilinear2d|PixelShuffle|PixelUnshuffle|(Reflection|Replication|Zero|Constant|Circular)Pad[123]d|"
    r"ChannelShuffle|CosineSimilarity|PairwiseDistance|Fold|Unfold)$")
_PLAIN_CALLS = ("int", "float", "bool", "str", "len", "min", "max", "abs", "round", "tuple")


def _stateless_module(ix: FileIndex, node: ast.AST, depth: int = 0) -> bool:
    """Is ``node`` a call that provably builds a module with no parameters, no buffers and no train/eval
    behaviour (a torch.nn pooling or activation layer, or a class of this file built only from those)?"""
    if depth > 4 or not isinstance(node, ast.Call):
        return False
    q = ix.qualname(node.func) or ""
    last = q.rsplit(".", 1)[-1]
    if ix.is_torchish(q) and (".nn." in f".{q}" or q.startswith("nn.")) and _STATELESS.match(last):
        return True
    cls = ix.classes.get(last) if last in ix.module_classes else None
    if cls is None or q != last:
        return False
    key = ("stateless-module", last)
    if key not in ix.cache:
        ix.cache[key] = False  # a class that builds itself
        ix.cache[key] = _stateless_class(ix, cls, depth)
    return bool(ix.cache[key])


def _plain_or_stateless(ix: FileIndex, call: ast.Call, depth: int) -> bool:
    return (isinstance(call.func, ast.Name) and call.func.id in _PLAIN_CALLS) or _stateless_module(ix, call, depth + 1)


def _stateless_class(ix: FileIndex, cls: ast.ClassDef, depth: int) -> bool:
    """``cls`` derives from nn.Module (or such a class of this file), registers nothing, never reads
    ``self.training``, and builds nothing but stateless modules and plain values into itself."""
    for base in cls.bases:
        q = ix.qualname(base) or ""
        parent = ast.Call(func=base, args=[], keywords=[])
        if q not in ("nn.Module", "torch.nn.Module", "Module") and not (
                isinstance(base, ast.Name) and _stateless_module(ix, parent, depth + 1)):
            return False
    for n in ast.walk(cls):
        if isinstance(n, ast.Attribute) and n.attr == "training":
            return False  # behaves differently in eval(), which a plain list would not reach
        if isinstance(n, ast.Call):
            name = n.func.attr if isinstance(n.func, ast.Attribute) else dotted(n.func) or ""
            if name in ("register_buffer", "register_parameter", "register_module", "add_module", "Parameter",
                        "setattr", "__setattr__"):
                return False
    for stmt in cls.body:
        if not isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            if any(isinstance(c, ast.Call) and not _plain_or_stateless(ix, c, depth) for c in ast.walk(stmt)):
                return False
        elif stmt.name == "__init__":  # every call is super().__init__ or builds a plain value or a stateless module
            for c in ast.walk(stmt):
                if isinstance(c, ast.Call) and not (
                        _plain_or_stateless(ix, c, depth) or (isinstance(c.func, ast.Name) and c.func.id == "super")
                        or (isinstance(c.func, ast.Attribute) and c.func.attr == "__init__")):
                    return False
        elif not _keeps_nothing(ix, stmt, depth):
            return False
    return True


def _keeps_nothing(ix: FileIndex, func: ast.AST, depth: int) -> bool:
    """A method other than __init__ stores no module (or anything built by an unknown call) on ``self``."""
    def built(value: ast.AST, tainted: set[str]) -> bool:
        return any((isinstance(c, ast.Call) and not _plain_or_stateless(ix, c, depth))
                   or (isinstance(c, ast.Name) and c.id in tainted) for c in ast.walk(value))
    tainted: set[str] = set()
    for n in ast.walk(func):
        if isinstance(n, ast.Assign) and built(n.value, set()):
            tainted.update(t.id for t in n.targets if isinstance(t, ast.Name))
    for n in ast.walk(func):
        if isinstance(n, (ast.Assign, ast.AugAssign, ast.AnnAssign)) and n.value is not None:
            targets = n.targets if isinstance(n, ast.Assign) else [n.target]
            on_self = any(isinstance(x, ast.Name) and x.id == "self" for t in targets
                          if isinstance(t, (ast.Attribute, ast.Subscript)) for x in ast.walk(t))
            if on_self and built(n.value, tainted):
                return False
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) \
                and (dotted(n.func.value) or "").startswith("self.") and any(built(a, tainted) for a in n.args):
            return False  # self.cache.append(nn.Linear(...))
    return True


def only_stateless(ix: FileIndex, value: ast.AST | None) -> bool:
    """Every item ``value`` puts in a container is a constant or a stateless module built in place."""
    if isinstance(value, (ast.List, ast.Tuple, ast.Set)):
        return all(only_stateless(ix, e) for e in value.elts)
    if isinstance(value, ast.Dict):
        return all(only_stateless(ix, v) for v in value.values)
    if isinstance(value, (ast.ListComp, ast.SetComp, ast.GeneratorExp)):
        return only_stateless(ix, value.elt)
    if isinstance(value, ast.DictComp):
        return only_stateless(ix, value.value)
    return isinstance(value, ast.Constant) or _stateless_module(ix, value)
