"""Does code wrap its inputs in ``Variable(..., volatile=True)``, itself or through a helper of the project?

Up to torch 0.3, ``Variable(x, volatile=True)`` was how autograd was switched off for a forward pass
(torch 0.4 replaced it with ``torch.no_grad()`` and ignores the flag).  Code of that era often builds its
batches in a helper that takes the flag as a parameter, ``get_batch(source, i, evaluation=True)`` whose
body is ``Variable(source[i:j], volatile=evaluation)``: the evaluation asks for a volatile input by that
argument, not by a ``Variable`` call of its own.  Whether the torch the project runs on honours the
flag is not decided here (see :mod:`overt.lint.analysis.torchera`).
"""

from __future__ import annotations

import ast

from overt.lint.analysis.values import resolve_in
from overt.lint.index import FileIndex, FuncNode, dotted


def _is_true(node: ast.AST | None) -> bool:
    return isinstance(node, ast.Constant) and node.value is True


def _variables(node: ast.AST) -> list[ast.Call]:
    """The ``Variable(...)`` calls under ``node``."""
    return [n for n in ast.walk(node) if isinstance(n, ast.Call)
            and (dotted(n.func) or "").rsplit(".", 1)[-1] == "Variable"]


def wraps_volatile(node: ast.AST) -> bool:
    """Does ``node`` hold ``Variable(..., volatile=<anything but False>)``?"""
    return any(k.arg == "volatile" and not (isinstance(k.value, ast.Constant) and k.value.value is False)
               for n in _variables(node) for k in n.keywords)


def _argument(call: ast.Call, func: FuncNode, param: str) -> ast.AST | None:
    """The value ``call`` gives ``func``'s parameter ``param`` (its default when the call passes none);
    None when it cannot be told (``*args``/``**kwargs`` in the call, an unknown parameter)."""
    for k in call.keywords:
        if k.arg == param:
            return k.value
        if k.arg is None:
            return None
    positional = [a.arg for a in (*func.args.posonlyargs, *func.args.args)]
    if param in positional:
        at = positional.index(param)
        if any(isinstance(a, ast.Starred) for a in call.args):
            return None
        if at < len(call.args):
            return call.args[at]
        defaults = func.args.defaults
        first_default = len(positional) - len(defaults)
        return defaults[at - first_default] if at >= first_default else None
    kwonly = [a.arg for a in func.args.kwonlyargs]
    if param in kwonly:
        return func.args.kw_defaults[kwonly.index(param)]
    return None


def _helper_volatile(ix: FileIndex, call: ast.Call) -> bool:
    """Is ``call`` a call of a plain function of the project (this file or one it imports) whose body wraps
    values in ``Variable(..., volatile=True)``, or in ``Variable(..., volatile=p)`` with ``p`` a parameter
    that this call sets to ``True`` (by argument or by its default)?"""
    text = dotted(call.func)
    if not text or "." in text and text.split(".", 1)[0] == "self":
        return False
    ref = resolve_in(ix, text)
    if not isinstance(ref, tuple):
        return False
    _, func = ref
    params = {a.arg for a in (*func.args.posonlyargs, *func.args.args, *func.args.kwonlyargs)}
    for var in _variables(func):
        for k in var.keywords:
            if k.arg != "volatile":
                continue
            if _is_true(k.value):
                return True
            if isinstance(k.value, ast.Name) and k.value.id in params \
                    and _is_true(_argument(call, func, k.value.id)):
                return True
    return False


def volatile_in(ix: FileIndex, region: ast.AST) -> bool:
    """Does ``region`` wrap values in a volatile ``Variable``, itself or by a call of a project helper
    that does it for the arguments it is given (``get_batch(..., evaluation=True)``)?"""
    if wraps_volatile(region):
        return True
    return any(isinstance(n, ast.Call) and _helper_volatile(ix, n) for n in ast.walk(region))
