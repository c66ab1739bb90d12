"""A model's forward arguments as one positional tuple, however the model was called.

The checks that read a forward's inputs (token ids, attention masks, labels) look at its positional
arguments.  A model called with keywords (``model(input_ids=ids, attention_mask=mask, labels=y)``, as
Hugging Face models are) has none, so those checks saw nothing of it.  :func:`as_positional` binds the
keywords to the forward's signature and returns the tuple the equivalent positional call would pass:
a parameter left out before the last one given takes its declared default, so that a check that
re-runs the model with the tuple calls it exactly as the user did.  When the keywords cannot be made
positional (a keyword-only or ``**kwargs`` parameter, a required parameter left out, a signature that
cannot be read) the call's own positional arguments are returned unchanged, as before.
"""

from __future__ import annotations

import inspect
from typing import Any

from torch import nn

# forward function -> names of its leading positional parameters with their defaults (None: not bindable)
_PARAMS: dict[Any, tuple[tuple[str, Any], ...] | None] = {}
_REQUIRED = inspect.Parameter.empty


def _params(module: nn.Module) -> tuple[tuple[str, Any], ...] | None:
    """``((name, default), ...)`` of ``module.forward``'s positional-or-keyword parameters after ``self``, in
    order, up to the first that is not one (cached per forward function)."""
    fwd = getattr(module, "forward", None)
    key = getattr(fwd, "__func__", fwd)
    if key in _PARAMS:
        return _PARAMS[key]
    try:
        sig = inspect.signature(fwd)
    except (TypeError, ValueError):
        _PARAMS[key] = None
        return None
    out = []
    for p in sig.parameters.values():
        if p.kind not in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            break
        out.append((p.name, p.default))
    _PARAMS[key] = tuple(out)
    return _PARAMS[key]


def as_positional(module: nn.Module, args: tuple, kwargs: dict | None) -> tuple:
    """The positional arguments of the call ``module(*args, **kwargs)`` made with no keywords, when that is
    possible; else ``args``.  Costs nothing for a call without keywords."""
    if not kwargs:
        return args
    params = _params(module)
    if params is None:
        return args
    names = [n for n, _ in params]
    if any(k not in names or names.index(k) < len(args) for k in kwargs):
        return args  # a keyword with no positional slot after the given arguments
    last = max(names.index(k) for k in kwargs)
    out = list(args)
    for name, default in params[len(args):last + 1]:
        if name in kwargs:
            out.append(kwargs[name])
        elif default is _REQUIRED:
            return args
        else:
            out.append(default)
    return tuple(out)
