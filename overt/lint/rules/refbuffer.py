"""A history that keeps, step after step, the one buffer an object overwrites in place (OVT368
``history-holds-one-buffer``, issue 33: memory filled wrongly).

The premise: a program that appends a value to a list in a loop (a replay memory, a rollout, a history of
observations) keeps one entry per step; the entries are the values of their steps.  A method that returns its
own buffer (``return self.buf``, ``return self.obs, rewards``) while its class overwrites that buffer in place
(``self.buf[:] = ...``, ``self.buf[i] = ...``, ``self.buf += ...``, ``np.copyto(self.buf, ...)``,
``self.buf.copy_(...)``) hands out the same array at every call: a list of what it returned holds one array many
times, every entry equal to the latest step, and anything paired with it (the action and reward of that step)
is paired with another step's observation (Farama-Foundation/SuperSuit#116: observations staggered by one
against the actions; w201).

Proven from one file: the class and the method are defined in it; the appended value is a bare name bound,
in the same scope, from a call of that method on an instance of that class (``obs = env.reset()``, ``obs, r =
env.step(a)`` at the buffer's position), directly or through one plain rebinding (``last_obs = new_obs``).
Silent: a copy anywhere on the way (``self.buf.copy()``, ``np.array(obs)``, ``obs.clone()``), a buffer never
written in place, an append of any other expression, instances or methods the file does not define.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from overt.lint.index import SCOPE_TYPES, FileIndex, dotted
from overt.lint.rules.base import Hit, rule

_INPLACE = ("copy_", "fill_", "zero_", "add_", "mul_", "sub_", "div_", "clamp_", "put", "fill", "resize")


def _self_attr(node: ast.AST) -> str | None:
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self":
        return node.attr
    return None


def _written_in_place(cls: ast.ClassDef) -> set[str]:
    out = set()
    for n in ast.walk(cls):
        targets = n.targets if isinstance(n, ast.Assign) else [n.target] if isinstance(n, ast.AugAssign) else []
        for t in targets:
            if isinstance(t, ast.Subscript) and _self_attr(t.value):
                out.add(_self_attr(t.value))
            if isinstance(n, ast.AugAssign) and _self_attr(t):
                out.add(_self_attr(t))
        if isinstance(n, ast.Call):
            if isinstance(n.func, ast.Attribute) and n.func.attr in _INPLACE and _self_attr(n.func.value):
                out.add(_self_attr(n.func.value))
            if dotted(n.func) in ("np.copyto", "numpy.copyto") and n.args and _self_attr(n.args[0]):
                out.add(_self_attr(n.args[0]))
    rebound = {_self_attr(t) for n in ast.walk(cls) if isinstance(n, ast.Assign) for t in n.targets
               if _self_attr(t) and not any(isinstance(f, ast.FunctionDef) and f.name == "__init__"
                                            for f in [_function_of(cls, n)])}
    return out - rebound  # a buffer also rebound outside __init__ is not provably one array


def _function_of(cls: ast.ClassDef, node: ast.AST) -> ast.FunctionDef | None:
    for f in cls.body:
        if isinstance(f, ast.FunctionDef) and any(m is node for m in ast.walk(f)):
            return f
    return None


def _returns_buffer(cls: ast.ClassDef, bufs: set[str]) -> dict[str, tuple[int | None, str]]:
    """method -> (position in the returned tuple or None for the whole value, buffer attribute), when every
    return of the method hands out the same in-place buffer there."""
    out = {}
    for f in cls.body:
        if not isinstance(f, ast.FunctionDef):
            continue
        rets = [n for n in ast.walk(f) if isinstance(n, ast.Return) and n.value is not None]
        found: set[tuple[int | None, str]] = set()
        for r in rets:
            v = r.value
            if _self_attr(v) in bufs:
                found.add((None, _self_attr(v)))
            elif isinstance(v, ast.Tuple):
                hits = [(i, _self_attr(e)) for i, e in enumerate(v.elts) if _self_attr(e) in bufs]
                found.add(hits[0] if len(hits) == 1 else (-1, ""))
            else:
                found.add((-1, ""))
        if len(found) == 1 and next(iter(found))[0] != -1:
            out[f.name] = next(iter(found))
    return out


@rule("history-holds-one-buffer")
def history_holds_one_buffer(ix: FileIndex) -> Iterator[Hit]:
    handing: dict[str, dict[str, tuple[int | None, str]]] = {}
    for name, cls in ix.classes.items():
        bufs = _written_in_place(cls)
        if bufs:
            methods = _returns_buffer(cls, bufs)
            if methods:
                handing[name] = methods
    if not handing:
        return
    instances = {}
    for node in ix.kids:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.value, ast.Call) \
                and isinstance(node.value.func, ast.Name) and node.value.func.id in handing and dotted(node.targets[0]):
            instances[dotted(node.targets[0])] = node.value.func.id
    if not instances:
        return
    for call in ix.calls:
        if not (isinstance(call.func, ast.Attribute) and call.func.attr == "append" and len(call.args) == 1
                and isinstance(call.args[0], ast.Name) and ix.enclosing_loops(call)):
            continue
        name = call.args[0].id
        scope = next((a for a in ix.ancestors(call) if isinstance(a, SCOPE_TYPES)), ix.tree)
        source = _source(ix, scope, name, instances, handing, hops=1)
        if source is None:
            continue
        obj, method, attr, line = source
        yield Hit("history-holds-one-buffer", call,
                  f"`{ix.segment(call)}` keeps `{name}`, which is `{obj}.{method}()`'s `self.{attr}` (line {line}): "
                  f"the class overwrites that buffer in place and returns the buffer itself, so every entry of "
                  f"`{dotted(call.func.value)}` is the same array, equal to the latest step, and whatever is stored "
                  f"beside it (the step's action and reward) is paired with another step's values",
                  fix=f"return a copy from `{method}` (`return self.{attr}.copy()`, `.clone()` for a tensor) or "
                      f"append a copy (`{dotted(call.func.value)}.append({name}.copy())`)")


def _source(ix: FileIndex, scope: ast.AST, name: str, instances: dict[str, str],
            handing: dict[str, dict[str, tuple[int | None, str]]], hops: int):
    """(object, method, buffer attribute, line) when every binding of ``name`` in ``scope`` is a call of a method
    that hands out an in-place buffer (at the unpacked position), or a plain rebinding of such a name."""
    binds = []
    for n in ix.scope_nodes(scope):
        if isinstance(n, ast.Assign):
            for t in n.targets:
                if isinstance(t, ast.Name) and t.id == name:
                    binds.append((None, n.value, n))
                elif isinstance(t, ast.Tuple):
                    for i, e in enumerate(t.elts):
                        if isinstance(e, ast.Name) and e.id == name:
                            binds.append((i, n.value, n))
        elif isinstance(n, (ast.For, ast.AugAssign, ast.AnnAssign, ast.NamedExpr)) and \
                any(isinstance(m, ast.Name) and m.id == name for m in ast.walk(getattr(n, "target", n))):
            return None
    if not binds:
        return None
    found = None
    for pos, value, stmt in binds:
        got = None
        if isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute):
            obj = dotted(value.func.value)
            cls = instances.get(obj or "")
            spec = handing.get(cls or "", {}).get(value.func.attr)
            if spec is not None and spec[0] == pos:
                got = (obj, value.func.attr, spec[1], stmt.lineno)
        elif pos is None and isinstance(value, ast.Name) and hops > 0:
            got = _source(ix, scope, value.id, instances, handing, hops - 1)
        if got is None:
            return None
        found = found or got
    return found
