"""An initialisation loop over a module's ``children()`` that selects layers its children only contain (OVT456
``init-loop-misses-nested-layers``; issue 33, branch features19, w413).

The premise: an initialisation pass that picks layers by type (``isinstance(m, nn.Conv2d)`` then ``nn.init.*`` on
``m``) means every layer of that type in the model.  ``children()`` (and ``named_children()``) yields a module's
immediate submodules only: layers built inside a container (an ``nn.ModuleList`` of blocks, an ``nn.Sequential``,
a block class of the same file) are never visited, the type test never matches them, and they keep PyTorch's
default initialisation -- a deep network meant to be initialised for its depth trains from a vanishing signal, a
detector's heads start from another scale, and nothing fails (pytorch/vision#2326: ``FeaturePyramidNetwork``).

Proven from the code: a loop ``for m in self.children()`` (``self.named_children()``) in a method of a class of the
file whose body tests ``isinstance(m, T)`` and initialises ``m`` (``nn.init.*`` on ``m``'s parameters,
``m.reset_parameters()``), with no recursion (the loop neither calls a function or method with ``m`` nor walks
``m.modules()``/``m.children()``/``m.apply``), while the class's ``__init__`` builds a ``T`` inside the value of an
attribute rather than as the attribute itself: ``self.blocks = nn.ModuleList([nn.Sequential(T(...), ...)])``, a
list built with ``T`` and wrapped, ``self.blocks.append(T(...))``, or an instance of a class of the file whose own
``__init__`` builds a ``T``.

Silent: ``modules()``, ``apply``; a class whose ``T`` layers are all its direct attributes (``self.fc = nn.Linear``:
``children()`` reaches them); a type the class never builds here; a loop that recurses.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from overt.lint.index import FileIndex, dotted
from overt.lint.rules.base import Hit, rule

_CHILDREN = ("children", "named_children")
_WALKS = ("modules", "named_modules", "children", "named_children", "apply")


def _loop_var(loop: ast.For) -> str | None:
    """The name bound to each child: ``m`` in ``for m in ...`` and ``for name, m in ...named_children()``."""
    t = loop.target
    if isinstance(t, ast.Name):
        return t.id
    if isinstance(t, ast.Tuple) and len(t.elts) == 2 and isinstance(t.elts[1], ast.Name):
        return t.elts[1].id
    return None


def _types(ix: FileIndex, body: list[ast.stmt], var: str) -> list[str]:
    """The layer types ``isinstance(var, T)`` tests for in ``body`` (as written: ``nn.Linear``)."""
    found: list[str] = []
    for node in ast.walk(ast.Module(body=body, type_ignores=[])):
        if isinstance(node, ast.Call) and dotted(node.func) == "isinstance" and len(node.args) == 2 \
                and isinstance(node.args[0], ast.Name) and node.args[0].id == var:
            spec = node.args[1]
            for t in (spec.elts if isinstance(spec, ast.Tuple) else [spec]):
                name = dotted(t)
                if name and name not in found:
                    found.append(name)
    return found


def _initialises(ix: FileIndex, body: list[ast.stmt], var: str) -> bool:
    """Whether ``body`` initialises ``var``: ``nn.init.*(var...)`` or ``var.reset_parameters()``."""
    for node in ast.walk(ast.Module(body=body, type_ignores=[])):
        if not isinstance(node, ast.Call):
            continue
        q = ix.qualname(node.func) or ""
        if ".init." in f".{q}" and node.args and (dotted(node.args[0]) or "").split(".")[0] == var:
            return True
        if isinstance(node.func, ast.Attribute) and node.func.attr == "reset_parameters" \
                and dotted(node.func.value) == var:
            return True
    return False


def _recurses(ix: FileIndex, body: list[ast.stmt], var: str) -> bool:
    """Whether ``body`` hands ``var`` to a function or walks its submodules (the pass then reaches them)."""
    for node in ast.walk(ast.Module(body=body, type_ignores=[])):
        if not isinstance(node, ast.Call):
            continue
        q = ix.qualname(node.func) or ""
        if isinstance(node.func, ast.Attribute) and node.func.attr in _WALKS and dotted(node.func.value) == var:
            return True
        if ".init." in f".{q}" or dotted(node.func) == "isinstance":
            continue
        if any(isinstance(a, ast.Name) and a.id == var for a in list(node.args) + [k.value for k in node.keywords]):
            return True
    return False


def _builds(ix: FileIndex, node: ast.AST, tail: str, seen: set[str], names: frozenset[str] = frozenset()) -> bool:
    """Whether ``node`` constructs a layer whose class name is ``tail``, directly, through a local name of
    ``names`` (bound to such a layer) or through a class of the file."""
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name) and sub.id in names:
            return True
        if not isinstance(sub, ast.Call):
            continue
        name = (dotted(sub.func) or "").rsplit(".", 1)[-1]
        if name == tail:
            return True
        if name in ix.classes and name not in seen:
            seen.add(name)
            init = _init_of(ix.classes[name])
            if init is not None and _builds(ix, init, tail, seen):
                return True
    return False


def _init_of(cls: ast.ClassDef) -> ast.FunctionDef | None:
    return next((f for f in cls.body if isinstance(f, ast.FunctionDef) and f.name == "__init__"), None)


def _nested(ix: FileIndex, cls: ast.ClassDef, tail: str) -> tuple[str, int] | None:
    """(attribute, line) of an attribute of ``cls`` whose value holds a ``tail`` layer below its top, or None."""
    init = _init_of(cls)
    if init is None:
        return None
    # local names bound to a layer (``conv = nn.Conv2d(...)`` then ``self.blocks.append(conv)``)
    names = frozenset(t.id for n in ast.walk(init)
                      if isinstance(n, ast.Assign) and _builds(ix, n.value, tail, {cls.name})
                      for t in n.targets if isinstance(t, ast.Name))
    for node in ast.walk(init):
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target, value = node.targets[0], node.value
            attr = dotted(target) or ""
            if not attr.startswith("self."):
                continue
            top = (dotted(value.func) or "").rsplit(".", 1)[-1] if isinstance(value, ast.Call) else ""
            if top == tail:
                continue  # the layer itself: a direct child
            if _builds(ix, value, tail, {cls.name}):
                return attr, node.lineno
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and node.func.attr in ("append", "extend", "add_module", "insert") \
                and (dotted(node.func.value) or "").startswith("self.") \
                and any(_builds(ix, a, tail, {cls.name}, names) for a in node.args):
            return dotted(node.func.value) or "", node.lineno
    return None


@rule("init-loop-misses-nested-layers")
def init_loop_misses_nested_layers(ix: FileIndex) -> Iterator[Hit]:
    """``for m in self.children(): if isinstance(m, T): nn.init...`` where ``T`` layers are nested deeper."""
    for loop in ast.walk(ix.tree):
        if not isinstance(loop, ast.For) or not isinstance(loop.iter, ast.Call):
            continue
        it = loop.iter.func
        if not isinstance(it, ast.Attribute) or it.attr not in _CHILDREN or dotted(it.value) != "self":
            continue
        var = _loop_var(loop)
        cls = ix.enclosing_class(loop)
        if var is None or cls is None:
            continue
        if not _initialises(ix, loop.body, var) or _recurses(ix, loop.body, var):
            continue
        for t in _types(ix, loop.body, var):
            nested = _nested(ix, cls, t.rsplit(".", 1)[-1])
            if nested is None:
                continue
            attr, line = nested
            yield Hit("init-loop-misses-nested-layers", loop.iter,
                      f"`for {ix.segment(loop.target)} in {ix.segment(loop.iter)}` initialises the `{t}` layers of "
                      f"`{cls.name}`, but children() yields only its immediate submodules, and `{attr}` (line {line}) "
                      f"holds `{t}` layers inside a container: isinstance({var}, {t}) never matches them, so they "
                      "keep PyTorch's default initialisation while the code reads as if every one were initialised",
                      fix=f"iterate `self.modules()` (every nested module, the class itself included) or call "
                      f"`self.apply(init_fn)`, so that every `{t}` is reached")
            break
