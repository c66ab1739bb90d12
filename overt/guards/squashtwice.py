"""A squashing function applied to a value the same function already squashed (slug ``squashed-twice``; issue 33,
session 56).

The premise, true of every correct program: a ``tanh`` (or a ``sigmoid``) is applied to an unbounded input -- it
is what maps a real number into the range.  Applied to the output of another ``tanh`` (``tanh(tanh(x))``), or to
that output plus zero-mean noise or a constant (a squashed Gaussian policy whose mean the network already passed
through ``tanh``: ``tanh(tanh(mu) + std * eps)``), its input is confined to (-1, 1) (or centred there), so the
outer output without the added term can never leave (-0.762, 0.762) (``sigmoid(sigmoid(x))``: (0.5, 0.731)): mean
actions near the bounds, probabilities below one half, are out of the model's reach (only wide noise carries a sample
there), the model settles short of them and nothing fails.

Seen through :mod:`overt.guards.axes`'s window (the first checked training steps and the first evaluation
forwards): every ``torch.tanh``/``torch.sigmoid`` call (function, tensor method, ``torch.nn.functional``'s, an
``nn.Tanh``/``nn.Sigmoid`` layer) made from the user's own files is recorded by its output's autograd node (or the
output itself when no graph is built).  A call whose input *is* such an output of the same function, or whose
input's node is an addition/subtraction of such an output and of a term that carries no gradient (a constant, a
noise tensor) or is a product with one (``std * eps``), is reported at once with both lines.  Host metadata only
(node identities): no device read.

Silent near the premise: an LSTM cell (``o * tanh(c)`` with ``c = f * c + i * tanh(g)``: the inner ``tanh`` is
multiplied before it is added), a recurrent ``tanh(W h + U x)`` (a matrix product between the two), a ``tanh``
scaled before the next one (``tanh(2 * tanh(x))`` reaches 0.96), a ``tanh`` of a ``sigmoid`` or the other way
round, and calls made from library code.
"""

from __future__ import annotations

import os
import weakref
from typing import Any

import torch
import torch.nn.functional as F

from overt.guards.where import is_overt_file, is_user_file

#: the functions seen (as torch hands them to a TorchFunctionMode) -> the squashing they compute
FUNCS: dict[Any, str] = {}
for _owner in (torch, torch.Tensor, F):
    for _name in ("tanh", "sigmoid"):
        _f = getattr(_owner, _name, None)
        if _f is not None:
            FUNCS[getattr(_f, "__wrapped__", _f)] = _name
_NODES = {"tanh": "TanhBackward0", "sigmoid": "SigmoidBackward0"}
#: the outer function's output range when its input is the same function's output
_RANGE = {"tanh": "(-0.762, 0.762)", "sigmoid": "(0.5, 0.731)"}
_FULL = {"tanh": "(-1, 1)", "sigmoid": "(0, 1)"}
_LAYERS = ("Tanh", "Sigmoid")
_DISPATCH = frozenset({("overrides.py", "handle_torch_function"), ("functional.py", "tanh"),
                       ("functional.py", "sigmoid"), ("module.py", "_call_impl"), ("module.py", "_wrapped_call_impl"),
                       ("module.py", "inner"), ("container.py", "forward")})
KEEP = 256  # squash outputs remembered at once (cleared after each checked step)


def caller(frame: Any, own: Any) -> str | None:
    """The user's own line that made the call seen at ``frame``, through torch's dispatch frames, an
    ``nn.Tanh``/``nn.Sigmoid`` layer's forward and the ``nn.Sequential`` holding it; None for a call from library
    code or overt's own."""
    for _ in range(16):
        if frame is None:
            return None
        code = frame.f_code
        if is_overt_file(code.co_filename):
            return None
        if is_user_file(code.co_filename):
            return own(frame)
        if code.co_name == "forward" and type(frame.f_locals.get("self")).__name__ in _LAYERS:
            frame = frame.f_back
            continue
        if (os.path.basename(code.co_filename), code.co_name) not in _DISPATCH:
            return None
        frame = frame.f_back
    return None


def _constant(node: Any) -> bool:
    """A term that carries no gradient (None: a constant or noise tensor), or a product with one (``std * eps``)."""
    if node is None:
        return True
    if type(node).__name__ not in ("MulBackward0", "DivBackward0"):
        return False
    return any(n is None for n, _ in node.next_functions)


class SquashTwice:
    """The squash calls of the window, and the finding (owned by :class:`overt.guards.axes.AxisChecks`)."""

    def __init__(self, session: Any):
        self.s = session
        self.nodes: dict[Any, str] = {}  # autograd node of a squash output -> the user's line that made it
        self.outs: dict[int, tuple[Any, str, str]] = {}  # id of a squash output without a graph -> (ref, kind, line)
        self.reported: set[str] = set()

    def call(self, kind: str, x: Any, out: Any, loc: str) -> None:
        """The user's line ``loc`` computed ``out = kind(x)``."""
        if not isinstance(x, torch.Tensor) or not isinstance(out, torch.Tensor) or not x.is_floating_point():
            return
        inner = self._inner(kind, x)
        if inner is not None:
            self._report(kind, inner[0], inner[1], loc, x)
        if len(self.nodes) + len(self.outs) >= KEEP:
            return
        node = out.grad_fn
        if node is not None:
            self.nodes[node] = loc
        else:
            self.outs[id(out)] = (weakref.ref(out), kind, loc)

    def _inner(self, kind: str, x: torch.Tensor) -> tuple[str, str] | None:
        """(the inner squash's line, how the outer input is made of it) when ``x`` is that squash's output."""
        known = self.outs.get(id(x))
        if known is not None and known[0]() is x and known[1] == kind:
            return known[2], "that output itself"
        node = x.grad_fn
        if node is None:
            return None
        if type(node).__name__ == _NODES[kind] and node in self.nodes:
            return self.nodes[node], "that output itself"
        if type(node).__name__ not in ("AddBackward0", "SubBackward0"):
            return None
        nexts = [n for n, _ in node.next_functions]
        if len(nexts) != 2:
            return None
        for i, n in enumerate(nexts):
            if n is not None and type(n).__name__ == _NODES[kind] and n in self.nodes and _constant(nexts[1 - i]):
                return self.nodes[n], "that output plus a term that carries no gradient: noise or a constant"
        return None

    def step_done(self) -> None:
        """A checked step (or an evaluation phase) is over: forget its outputs."""
        self.nodes, self.outs = {}, {}

    def _report(self, kind: str, inner: str, how: str, loc: str, x: torch.Tensor) -> None:
        key = f"squashed:{loc}"
        if key in self.reported:
            return
        self.reported.add(key)
        self.s.report(
            "squashed-twice",
            f"{kind} at {loc} is applied to a value already squashed by the {kind} at {inner} (its input, of "
            f"shape {tuple(x.shape)}, is {how}): the inner {kind} keeps it in {_FULL[kind]}, so the outer one's output "
            f"without the added term stays in {_RANGE[kind]} and never reaches the range's ends; only the noise, "
            "if any, carries it further -- a squashed Gaussian policy whose mean is already a tanh cannot aim its "
            "mean action near its bounds, a sigmoid of probabilities never predicts below one half -- while "
            "training runs as usual.",
            fix=(f"squash once: drop the {kind} at {inner} (return the unbounded mean or logit from the network) "
                 f"and keep the one at {loc}, or the other way round."),
            where=f"{kind} at {loc}", key=key)
