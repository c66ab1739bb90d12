"""A tensor's element kept under a name, then written in place before the name is read (OVT825
``kept-view-overwritten``, issue 33: a recorded value is the value it had when it was recorded).

The premise: a program that binds ``kept = t[i]`` and later writes ``t[i] = ...`` means to keep the value
``t[i]`` had at the binding -- a finished hypothesis' score before its beam is retired, the old value of a
swap, a previous estimate to compare with.  For a PyTorch tensor, indexing with integers and slices returns a
*view* of the same storage, not a copy: the write changes what ``kept`` holds, and every later read sees the
new value (speechbrain/speechbrain#2253: a retired beam's recorded score became ``-inf`` with its beam, every
finished hypothesis tied at ``-inf`` and the search returned the first to finish, not the best).

Proven from the code of one scope: ``kept = T[idx]`` is a plain assignment whose index is basic (integer
constants, slices, or names bound only by a loop over ``range``/``enumerate`` or to an integer constant, so
never a tensor that would make a copy); every binding of ``T`` in the scope makes a torch tensor (a
``torch.*`` call, or a chain ending in a tensor method such as ``.clone()``, ``.detach()``); a later statement
of the same block writes ``T`` at the same index (an assignment, an augmented assignment, or an in-place
method of ``T[idx]``) with neither ``kept``, ``T`` nor the index's names bound in between; and a statement
after that write reads ``kept`` before binding it again.  A copy (``T[idx].clone()``, ``.item()``,
``float(...)``) is not a view and is silent, as are numpy arrays and lists (whose element reads copy).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from overt.lint.index import SCOPE_TYPES, FileIndex, dotted
from overt.lint.rules.base import Hit, rule

#: methods that return a (new) torch tensor: a name bound to a chain ending in one of them is a tensor
_TENSOR_METHODS = frozenset({"clone", "detach", "float", "double", "half", "cuda", "contiguous", "new_zeros",
                             "new_ones", "new_full", "new_empty", "new_tensor", "log_softmax", "softmax"})
#: in-place methods that write a tensor (an element's view written through them writes the element)
_INPLACE = frozenset({"fill_", "zero_", "copy_", "add_", "sub_", "mul_", "div_", "clamp_", "masked_fill_",
                      "neg_", "abs_", "exp_", "log_", "pow_", "sqrt_", "normal_", "uniform_"})
#: torch.* calls that make no tensor
_NOT_TENSOR = frozenset({"torch.Size", "torch.device", "torch.dtype", "torch.no_grad", "torch.is_tensor",
                         "torch.numel", "torch.get_default_dtype", "torch.Generator"})


def _bindings(ix: FileIndex, scope: ast.AST, name: str) -> list[ast.AST]:
    """Every node of ``scope`` (no nested scope) that binds ``name``: assignment targets and their values are
    returned as ``(target, value)`` pairs' values, other bindings (loops, ``with``, augmented assignments,
    imports, deletions) as the statement itself."""
    out: list[ast.AST] = []
    for n in ix.scope_nodes(scope):
        if isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, (ast.Store, ast.Del)):
            out.append(n)
        elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n is not scope and n.name == name:
            out.append(n)
    if isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
        args = scope.args
        for a in args.posonlyargs + args.args + args.kwonlyargs + [args.vararg, args.kwarg]:
            if a is not None and a.arg == name:
                out.append(a)
    return out


def _binding_value(ix: FileIndex, target: ast.AST) -> ast.AST | None:
    """The value a ``Name`` store is bound to when it is the whole target of a plain assignment, else None."""
    parent = ix.parents.get(target)
    if isinstance(parent, ast.Assign) and any(t is target for t in parent.targets):
        return parent.value
    if isinstance(parent, ast.AnnAssign) and parent.target is target:
        return parent.value
    return None


def _makes_tensor(ix: FileIndex, value: ast.AST | None) -> bool:
    """``value`` is a torch tensor: a ``torch.*`` call that makes one, or a chain ending in a tensor method."""
    if not isinstance(value, ast.Call):
        return False
    func = value.func
    name = dotted(func) or ""
    qual = ix.qualname(func) or name
    if qual.startswith("torch.") and qual not in _NOT_TENSOR and not qual.startswith(("torch.nn.", "torch.optim.",
                                                                                       "torch.utils.")):
        return True
    return isinstance(func, ast.Attribute) and func.attr in _TENSOR_METHODS


def _is_tensor_name(ix: FileIndex, scope: ast.AST, name: str) -> bool:
    binds = _bindings(ix, scope, name)
    return bool(binds) and all(_makes_tensor(ix, _binding_value(ix, b)) for b in binds)


def _int_name(ix: FileIndex, scope: ast.AST, name: str) -> bool:
    """Every binding of ``name`` in ``scope`` makes a Python int: a loop over ``range``/``enumerate`` (its
    counter) or an integer constant."""
    binds = _bindings(ix, scope, name)
    if not binds:
        return False
    for b in binds:
        value = _binding_value(ix, b)
        if value is not None:
            if not (isinstance(value, ast.Constant) and type(value.value) is int):
                return False
            continue
        parent = ix.parents.get(b)
        loop = parent
        if isinstance(parent, ast.Tuple):
            loop = ix.parents.get(parent)
        if not isinstance(loop, (ast.For, ast.comprehension)) or not isinstance(loop.iter, ast.Call):
            return False
        it = dotted(loop.iter.func)
        if it == "range" and loop.target is b:
            continue
        if it == "enumerate" and isinstance(loop.target, ast.Tuple) and loop.target.elts and loop.target.elts[0] is b:
            continue
        return False
    return True


def _basic_index(ix: FileIndex, scope: ast.AST, idx: ast.AST) -> bool:
    """``idx`` indexes by integers and slices only (the result is a view, not a copy)."""
    parts = idx.elts if isinstance(idx, ast.Tuple) else [idx]
    for p in parts:
        if isinstance(p, ast.UnaryOp) and isinstance(p.op, ast.USub):
            p = p.operand
        if isinstance(p, ast.Constant) and type(p.value) is int:
            continue
        if isinstance(p, ast.Slice):
            if all(b is None or isinstance(b, ast.Constant) for b in (p.lower, p.upper, p.step)):
                continue
            return False
        if isinstance(p, ast.Name) and _int_name(ix, scope, p.id):
            continue
        return False
    return True


def _names(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def _binds_any(ix: FileIndex, stmt: ast.stmt, names: set[str]) -> bool:
    return any(isinstance(n, ast.Name) and n.id in names and isinstance(n.ctx, (ast.Store, ast.Del))
               for n in ix.scope_nodes(stmt))


def _reads(ix: FileIndex, stmt: ast.stmt, name: str) -> ast.Name | None:
    for n in ix.scope_nodes(stmt):
        if isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Load):
            return n
    return None


def _writes(ix: FileIndex, stmt: ast.stmt, base: str, key: str) -> ast.AST | None:
    """A node of ``stmt`` that writes ``base[idx]`` in place (``key`` is the index's dump)."""

    def same(node: ast.AST) -> bool:
        return isinstance(node, ast.Subscript) and dotted(node.value) == base and ast.dump(node.slice) == key

    for n in ix.scope_nodes(stmt):
        if isinstance(n, ast.Subscript) and isinstance(n.ctx, ast.Store) and same(n):
            return n
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in _INPLACE \
                and same(n.func.value):
            return n
    return None


def _blocks(node: ast.AST) -> Iterator[list[ast.stmt]]:
    for field in ("body", "orelse", "finalbody"):
        block = getattr(node, field, None)
        if isinstance(block, list) and block and isinstance(block[0], ast.stmt):
            yield block
    for handler in getattr(node, "handlers", ()) or ():
        yield handler.body
    for case in getattr(node, "cases", ()) or ():
        yield case.body


def _kept_views(ix: FileIndex, scope: ast.AST, block: list[ast.stmt]) -> Iterator[Hit]:
    for i, stmt in enumerate(block):
        if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name)):
            continue
        value = stmt.value
        if not isinstance(value, ast.Subscript) or not isinstance(value.value, ast.Name):
            continue
        kept, base = stmt.targets[0].id, value.value.id
        if kept == base or not _basic_index(ix, scope, value.slice) or not _is_tensor_name(ix, scope, base):
            continue
        key = ast.dump(value.slice)
        guarded = {kept, base} | _names(value.slice)
        write_at: ast.AST | None = None
        for later in block[i + 1:]:
            if write_at is None:
                write_at = _writes(ix, later, base, key)
                if write_at is None and _binds_any(ix, later, guarded):
                    break
                if write_at is not None and _binds_any(ix, later, {kept}):
                    break
                continue
            read = _reads(ix, later, kept)
            if read is not None:
                element = ix.segment(value)
                yield Hit(
                    "kept-view-overwritten", stmt.targets[0],
                    f"`{kept} = {element}` (line {stmt.lineno}) keeps a view of the tensor `{base}`'s element, not "
                    f"a copy; line {write_at.lineno} writes `{element}` in place, so when line {read.lineno} reads "
                    f"`{kept}` it holds the new value, not the one kept (a score recorded before its slot is "
                    f"retired, the old value of a swap, a previous estimate: all read the overwritten value, "
                    f"with no error)",
                    fix=f"keep a copy: `{kept} = {element}.clone()` (or `.item()` for a number)")
                break
            if _binds_any(ix, later, {kept}):
                break


@rule("kept-view-overwritten")
def kept_view_overwritten(ix: FileIndex) -> Iterator[Hit]:
    scopes = [ix.tree] + [n for n in ix.kids if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    for scope in scopes:
        for node in ix.scope_nodes(scope):
            if isinstance(node, SCOPE_TYPES) and node is not scope:
                continue
            for block in _blocks(node):
                yield from _kept_views(ix, scope, block)
