"""What a module's own class source proves of a plain tensor attribute, for ``unregistered-tensor``.

The runtime finding says two things of ``self.x = tensor``: ``model.to(device)`` leaves it behind, and a
checkpoint does not hold it.  Two facts of the class's source make both moot, and the run cannot see them
(nothing here runs per step: the class is read once, when the model is first scanned):

* **read only while building**: ``self.W`` is read in ``__init__`` to derive parameters and nowhere else in
  the file (no method, no other object reads ``.W``): no forward meets it, so its device and whether a
  checkpoint holds it change nothing;
* **a constant the module moves itself**: ``self.I = torch.eye(n)``, ``self.mask = torch.tril(torch.ones(n, n))``,
  ``self.U_mask = self.L_mask.t().clone()`` -- values that follow from shapes alone, so every construction
  rebuilds them identically -- and a method outside ``__init__`` re-homes it, ``self.I = self.I.to(...)`` (a
  flow layer's "if my constants are not on my parameters' device, move them" at the top of ``forward``).

A random or data-built tensor (``torch.from_numpy(P)`` of a random factorisation, a mask passed in) is not
proven harmless by either: it stays reported, however it is moved.  Unreadable source: nothing is proven.
"""

from __future__ import annotations

import ast
import inspect
from functools import lru_cache

#: factories whose values follow from their shape arguments (and a constant fill) alone
_SHAPE_ONLY = frozenset({"zeros", "ones", "full", "eye", "arange", "linspace", "logspace"})
#: tensor methods/functions that map a constant to a constant (no randomness, no data)
_CONSTANT_MAPS = frozenset({"float", "double", "half", "bfloat16", "long", "int", "bool", "to", "cuda", "cpu", "clone",
                            "detach", "contiguous", "view", "reshape", "unsqueeze", "squeeze", "t", "tril", "triu",
                            "transpose", "flip", "diag"})
_MOVES = frozenset({"to", "type_as", "cuda"})


def _self_attr(node: ast.AST) -> str | None:
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self":
        return node.attr
    return None


def _func_name(func: ast.AST) -> str:
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""


def _constant(value: ast.AST, built: dict[str, ast.AST], seen: frozenset[str] = frozenset()) -> bool:
    """Does ``value`` follow from shapes and constants alone (``torch.tril(torch.ones(n, n), -1)``, ``self.a.t()``)?"""
    attr = _self_attr(value)
    if attr is not None:  # another attribute built in __init__, constant itself
        return attr in built and attr not in seen and _constant(built[attr], built, seen | {attr})
    if isinstance(value, ast.Constant):  # a number in arithmetic on constants
        return isinstance(value.value, (int, float)) and not isinstance(value.value, bool)
    if isinstance(value, ast.BinOp):
        return _constant(value.left, built, seen) and _constant(value.right, built, seen)
    if isinstance(value, ast.UnaryOp):
        return _constant(value.operand, built, seen)
    if not isinstance(value, ast.Call):
        return False
    name = _func_name(value.func)
    if name in _SHAPE_ONLY and isinstance(value.func, (ast.Attribute, ast.Name)):
        return not isinstance(value.func, ast.Attribute) or not _self_attr(value.func.value)
    if name in _CONSTANT_MAPS:
        if isinstance(value.func, ast.Attribute) and not (isinstance(value.func.value, ast.Name)
                                                          and value.func.value.id == "torch"):
            return _constant(value.func.value, built, seen)  # x.t().clone()
        return bool(value.args) and _constant(value.args[0], built, seen)  # torch.tril(x, -1)
    return False


def _filled_later(init: ast.FunctionDef, attr: str) -> bool:
    """``self.m[i] = ...`` or ``self.m.uniform_()`` in __init__: no longer a constant."""
    for n in ast.walk(init):
        if isinstance(n, ast.Subscript) and isinstance(n.ctx, ast.Store) and _self_attr(n.value) == attr:
            return True
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr.endswith("_") \
                and not n.func.attr.startswith("_") and _self_attr(n.func.value) == attr:
            return True
    return False


def _rehomed(cls: ast.ClassDef, init: ast.FunctionDef, attr: str) -> bool:
    """A method outside __init__ assigns ``self.attr = self.attr.to(...)`` (or ``.type_as``/``.cuda``)."""
    inside = {id(n) for n in ast.walk(init)}
    for n in ast.walk(cls):
        if isinstance(n, ast.Assign) and id(n) not in inside and any(_self_attr(t) == attr for t in n.targets):
            v = n.value
            if isinstance(v, ast.Call) and isinstance(v.func, ast.Attribute) and v.func.attr in _MOVES \
                    and _self_attr(v.func.value) == attr:
                return True
    return False


def _read_only_in_init(tree: ast.Module, cls: ast.ClassDef, init: ast.FunctionDef, attr: str) -> bool:
    """``.attr`` is read in __init__ and nowhere else in the file, except as another class's own ``self.attr``
    (a class that is not this one nor built on it)."""
    inside = {id(n) for n in ast.walk(init)}
    owner = {}
    for c in ast.walk(tree):
        if isinstance(c, ast.ClassDef):
            for n in ast.walk(c):
                owner.setdefault(id(n), c)
    reads = 0
    for n in ast.walk(tree):
        if not (isinstance(n, ast.Attribute) and n.attr == attr and isinstance(n.ctx, ast.Load)):
            continue
        if id(n) in inside:
            reads += 1
            continue
        c = owner.get(id(n))
        other = c is not None and c is not cls and not any(_func_name(b) == cls.name for b in c.bases)
        if not (other and _self_attr(n) == attr):
            return False
    return reads > 0


@lru_cache(maxsize=256)
def harmless_attributes(cls: type) -> frozenset[str]:
    """The plain tensor attributes of ``cls`` that its source proves neither half of the finding holds for."""
    try:
        path = inspect.getsourcefile(cls)
        _, first = inspect.getsourcelines(cls)
        with open(path or "", encoding="utf-8") as f:
            tree = ast.parse(f.read())
    except (OSError, TypeError, SyntaxError, ValueError, UnicodeDecodeError):
        return frozenset()
    node = next((n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == cls.__name__
                 and n.lineno <= first <= (n.end_lineno or n.lineno)), None)
    init = next((f for f in node.body if isinstance(f, ast.FunctionDef) and f.name == "__init__"), None) if node else None
    if node is None or init is None:
        return frozenset()
    built: dict[str, ast.AST] = {}
    counts: dict[str, int] = {}
    for n in ast.walk(init):
        if isinstance(n, ast.Assign):
            for t in n.targets:
                attr = _self_attr(t)
                if attr is not None:
                    built[attr] = n.value
                    counts[attr] = counts.get(attr, 0) + 1
    quiet = set()
    for attr, value in built.items():
        if _read_only_in_init(tree, node, init, attr):
            quiet.add(attr)
        elif counts[attr] == 1 and _constant(value, built) and not _filled_later(init, attr) \
                and _rehomed(node, init, attr):
            quiet.add(attr)
    return frozenset(quiet)
