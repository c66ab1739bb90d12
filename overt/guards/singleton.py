"""A normalisation or selection over an axis of size 1 (slug ``singleton-axis``, issue 33).

A softmax, an argmax, a normalisation exists to compare the elements of one axis with each other.  Over
an axis of one element there is nothing to compare, and the result no longer depends on its input:

- ``softmax``/``softmin`` over it is always 1 and ``log_softmax`` always 0, and no gradient reaches the
  scores (attention scores of shape ``(N, 1)`` softmaxed over the last axis: every weight is 1, the
  "attention" is a plain sum);
- ``argmax``/``argmin`` is always 0 (a regression head of width 1 read by ``argmax``, a binary classifier
  with one logit evaluated with ``argmax(1)``), and so are the indices of ``max``/``min``/``topk``/``sort``
  (judged only when those indices are used afterwards: the values alone are the input itself);
- ``F.normalize`` over it keeps only the sign of each element;
- ``cross_entropy`` (``nn.CrossEntropyLoss``) over one class is always 0: the model learns nothing.

Every correct program makes these calls over an axis with more than one element.  A call site is judged
only on what it did on every call seen: reported when it ran at least :data:`MIN_CALLS` times, each time
over a size-1 axis of a tensor of at least two elements, and never over a longer axis (a batch of one at
the end of an epoch, a sequence that is sometimes one token long, a generation loop whose first step has
one key: such a site is generic, and stays silent).

The calls are seen through :mod:`overt.guards.axes`'s window (its ``TorchFunctionMode``: the first checked
training steps and the start of the first evaluation phase), made from the user's own files: a tensor
method, a ``torch``/``torch.nn.functional`` function, or an ``nn.Softmax``/``nn.LogSoftmax``/``nn.Softmin``
layer called from there; and the ``cross_entropy`` calls of every checked step, whose class axis is dimension 1.
Host metadata only (shapes, identities): no device read.  Judged at the end of
the run.
"""

from __future__ import annotations

import os
import weakref
from typing import Any

import torch
import torch.nn.functional as F

from overt.guards.where import is_overt_file, is_user_file

MIN_CALLS = 3  # calls of a site, every one over a size-1 axis, before it is judged
SITES = 64  # call sites followed per run
PENDING = 8  # indices of max/min/topk/sort over a size-1 axis followed at once, until used
LOSS_LOOKS = 16  # checked cross_entropy calls looked at per run

# what each function does over the axis (the names torch hands a TorchFunctionMode)
_NORM, _INDEX, _PAIR, _SIGN, _LOSS = "normalises", "selects", "selects (indices)", "scales", "loss"
#: the functions judged here (as torch hands them to a TorchFunctionMode) -> (name, what they do over the axis);
#: the axes window looks each call up here (a dict, not a function: it runs on every torch call of the window)
FUNCS: dict[Any, tuple[str, str]] = {}
for _owner, _names, _kind in ((torch, ("softmax", "log_softmax"), _NORM),
                              (torch.Tensor, ("softmax", "log_softmax"), _NORM),
                              (F, ("softmax", "log_softmax", "softmin"), _NORM),
                              (torch, ("argmax", "argmin"), _INDEX), (torch.Tensor, ("argmax", "argmin"), _INDEX),
                              (torch, ("max", "min", "topk", "sort"), _PAIR),
                              (torch.Tensor, ("max", "min", "topk", "sort"), _PAIR),
                              (F, ("normalize",), _SIGN)):
    for _name in _names:
        _f = getattr(_owner, _name, None)
        if _f is not None:
            FUNCS[getattr(_f, "__wrapped__", _f)] = (_name, _kind)
_ACTIVATIONS = ("Softmax", "LogSoftmax", "Softmin")
#: torch frames a call passes through between the user's line and the function itself
_DISPATCH = frozenset({("overrides.py", "handle_torch_function"), ("functional.py", "softmax"),
                       ("functional.py", "log_softmax"), ("functional.py", "softmin"), ("functional.py", "normalize"),
                       ("module.py", "_call_impl"), ("module.py", "_wrapped_call_impl"), ("module.py", "inner")})


#: the inner functions of overt's wrappers of these functions (softmax_dim's, predshape's)
_WRAPPERS = frozenset({"softmax", "produce"})


def caller(frame: Any, own: Any) -> str | None:
    """``"file.py:LINE"`` of the user's own line that made the call seen at ``frame`` (the frame a
    ``TorchFunctionMode`` is called from), through torch's dispatch frames, ``torch.nn.functional``'s
    softmax/normalize, an ``nn.Softmax``-like layer's forward and overt's own wrappers of the function; None
    when the call comes from other torch code (a library layer's internals), overt's own code or an installed
    package.  ``own(frame)`` is
    the location when the frame is the user's own file."""
    for _ in range(12):
        if frame is None:
            return None
        code = frame.f_code
        filename = code.co_filename
        if is_overt_file(filename):
            if code.co_name not in _WRAPPERS:
                return None  # overt's own code (an engine, a recipe), not the user's
            frame = frame.f_back
            continue
        if is_user_file(filename):
            return own(frame)
        if code.co_name == "forward" and type(frame.f_locals.get("self")).__name__ in _ACTIVATIONS:
            frame = frame.f_back
            continue
        if (os.path.basename(filename), code.co_name) not in _DISPATCH:
            return None
        frame = frame.f_back
    return None


def _dim_of(name: str, x: torch.Tensor, args: tuple, kwargs: dict) -> int | None:
    """The dimension the call works over (non-negative), or None (no dim: the whole tensor; a named
    dimension; ``max(a, b)`` of two tensors)."""
    if name == "topk":
        dim = kwargs.get("dim", args[2] if len(args) > 2 else -1)
    elif name == "normalize":
        dim = kwargs.get("dim", args[2] if len(args) > 2 else 1)
    elif name == "sort":
        dim = kwargs.get("dim", args[1] if len(args) > 1 and not isinstance(args[1], bool) else -1)
    else:
        dim = kwargs.get("dim", args[1] if len(args) > 1 else None)
        if dim is None and name in ("softmax", "log_softmax", "softmin"):  # PyTorch's legacy implicit dim
            dim = 0 if x.dim() in (0, 1, 3) else 1
    if isinstance(dim, bool) or not isinstance(dim, int) or x.dim() == 0:
        return None
    dim = dim + x.dim() if dim < 0 else dim
    return dim if 0 <= dim < x.dim() else None


class _Site:
    __slots__ = ("name", "kind", "dim", "shape", "single", "generic", "used")

    def __init__(self, name: str, kind: str, dim: int, shape: tuple[int, ...]):
        self.name, self.kind, self.dim, self.shape = name, kind, dim, shape
        self.single = 0  # calls over a size-1 axis (of a tensor of two elements or more)
        self.generic = False  # some call was over a longer axis
        self.used = kind != _PAIR  # max/min/topk/sort: whether the indices were read afterwards


class SingletonAxes:
    """The call sites seen, and their judgement (owned by :class:`overt.guards.axes.AxisChecks`)."""

    def __init__(self, session: Any):
        self.s = session
        self.sites: dict[tuple[str, str], _Site] = {}  # (location, function) -> what its calls did
        self.pending: list[tuple[Any, _Site]] = []  # indices over a size-1 axis, until used
        self.loss_looks = 0

    def call(self, name: str, kind: str, args: tuple, kwargs: dict, out: Any, loc: str) -> None:
        """The user's line ``loc`` called ``name`` on ``args[0]`` (``out``: its result)."""
        x = args[0]
        dim = _dim_of(name, x, args, kwargs)
        if dim is None:
            return
        site = self.sites.get((loc, name))
        if site is None:
            if len(self.sites) >= SITES:
                return
            site = self.sites[(loc, name)] = _Site(name, kind, dim, tuple(x.shape))
        if x.shape[dim] != 1:
            site.generic = True
            return
        if x.numel() < 2:
            return  # one sample, one element: nothing to tell
        site.single += 1
        site.dim, site.shape = dim, tuple(x.shape)
        if not site.used and not site.generic:
            index = out[1] if isinstance(out, tuple) and len(out) == 2 else getattr(out, "indices", None)
            if isinstance(index, torch.Tensor):
                self.pending = self.pending[-(PENDING - 1):] + [(weakref.ref(index), site)]

    def wants_loss(self) -> bool:
        """Whether the next checked ``cross_entropy`` call is looked at (the first :data:`LOSS_LOOKS`)."""
        return self.loss_looks < LOSS_LOOKS

    def loss(self, inp: Any, loc: str | None) -> None:
        """A checked ``cross_entropy`` call at ``loc`` on the scores ``inp`` (classes on dimension 1)."""
        self.loss_looks += 1
        if loc is None or not isinstance(inp, torch.Tensor) or inp.dim() < 2:
            return
        site = self.sites.get((loc, "cross_entropy"))
        if site is None:
            if len(self.sites) >= SITES:
                return
            site = self.sites[(loc, "cross_entropy")] = _Site("cross_entropy", _LOSS, 1, tuple(inp.shape))
        if inp.shape[1] != 1:
            site.generic = True
        elif inp.numel() >= 2:
            site.single += 1
            site.shape = tuple(inp.shape)

    def seen(self, args: tuple, kwargs: dict) -> None:
        """Some torch call of the window: does it read indices of a size-1 axis?"""
        for a in (*args, *kwargs.values()):
            for t in (a if isinstance(a, (list, tuple)) else (a,)):
                if isinstance(t, torch.Tensor):
                    for i, (ref, site) in enumerate(self.pending):
                        if ref() is t:
                            site.used = True
                            del self.pending[i]
                            break

    def judge(self) -> None:
        """Report every site that, on each of its calls, worked over an axis of size 1."""
        for (loc, name), site in self.sites.items():
            if site.generic or site.single < MIN_CALLS or not site.used:
                continue
            self._report(loc, site)
        self.sites, self.pending = {}, []

    def _report(self, loc: str, site: _Site) -> None:
        name, dim, shape = site.name, site.dim, site.shape
        calls = f"on each of the {site.single} calls seen"
        head = f"{name} at {loc} works over dimension {dim} of a {shape} tensor, an axis of size 1 {calls}"
        if site.kind == _NORM:
            value = "0" if name == "log_softmax" else "1"
            why = (f"a {name} over one element is always {value}, whatever the scores, so the result carries "
                   "nothing of its input and no gradient reaches the scores (attention weights that are all 1 make "
                   "the pooling a plain sum; probabilities that are all 1 score nothing)")
            fix = ("normalise over the axis that holds the alternatives: put them on one axis first "
                   "(scores.view(batch, seq_len).softmax(dim=1) for attention over a sequence) or name the right "
                   "dim; for one logit per sample use torch.sigmoid (or BCEWithLogitsLoss), not a softmax.")
        elif site.kind == _LOSS:
            why = ("a cross-entropy over one class is always 0 (the softmax of a single score is 1 whatever it is), so "
                   "the loss is 0 for every sample, no gradient reaches the model and it learns nothing (one output "
                   "unit trained with CrossEntropyLoss)")
            fix = ("for one logit per sample use BCEWithLogitsLoss (binary_cross_entropy_with_logits) with float "
                   "targets of the same shape; or give the head one output per class (nn.Linear(h, 2)) and "
                   "class-index targets.")
        elif site.kind == _SIGN:
            why = ("F.normalize over one element divides it by its own absolute value, so only its sign "
                   "(+1 or -1) is left: the magnitudes the model learned are thrown away")
            fix = "normalise over the feature axis (the one with more than one element), or reshape first."
        else:
            what = "index" if site.kind == _INDEX else "indices"
            why = (f"the {what} of the {'largest' if name in ('argmax', 'max', 'topk', 'sort') else 'smallest'} "
                   "of one element is always 0, so every prediction read from it is 0 whatever the model "
                   "outputs (a regression output of width 1 read by argmax, a binary classifier with one logit "
                   "evaluated with argmax) and the metric scores a constant")
            fix = ("for one output per sample, read it directly: a regression prediction is out.squeeze(-1); a "
                   "binary classifier with one logit predicts (out.squeeze(-1) > 0), i.e. sigmoid(out) > 0.5; "
                   "otherwise take the argmax over the class axis (the one with more than one element).")
        self.s.report("singleton-axis", f"{head}: {why}.", fix=fix, where=f"{name} at {loc}",
                      key=f"singleton:{loc}:{name}")
