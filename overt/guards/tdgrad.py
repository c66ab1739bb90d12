"""A value regression does not differentiate its bootstrapped target (slug ``stop-gradient-missing``; issue 33,
session 52, branch rl17).

The premise: a critic regressed onto a bootstrapped target (TD(0), n-step, GAE or lambda returns built from the
critic's own values of later states) is trained by the semi-gradient: the target is a constant of the update, so
the squared error's gradient reaches the critic only through the value it predicts.  Differentiated through the
target as well (``advantages.pow(2).mean()`` with the advantages computed from the values with their gradient,
``F.mse_loss(values[:-1], rewards + gamma * values[1:])`` without ``detach()``), the update minimises the Bellman
residual instead: it pulls each later value towards the earlier one as much as the reverse, and on a stochastic
environment it settles on biased values, while the loss falls as usual.

Observed on autograd's own graph, whatever the code's form: on a checked iteration, the output of a watched module
called in training mode with gradients whose last axis has size 1 (a value head) is noted; while the iteration
runs (the function mode of :mod:`overt.guards.bootshift`) each square of a tensor that carries gradient
(``x ** 2``, ``x.pow(2)``, ``torch.square``, ``x * x``, and ``F.mse_loss`` / ``smooth_l1_loss`` / ``huber_loss`` of
two tensors, as their difference) is a candidate residual.  For up to :data:`ROWS` of its elements the gradient row
with respect to the value head's output is taken (``torch.autograd.grad``, graph retained, no ``.grad`` touched).
A row of a bootstrapped TD error that autograd differentiates through its target has its largest entry at the
predicted value (-1, or a weight) and, of the opposite sign, entries at other states' values summing to at most
the discount times that (``gamma * c`` for TD(0), ``gamma ** n``, ``gamma (1 - lambda) / (1 - gamma lambda)`` for
GAE).  Reported after :data:`AGREE` checked looks at one line where most rows have such entries and every row
with entries off its own value has this form, when the code at the line reads a discount below 0.999.

Silent, each by construction: a detached target (a row with one entry: the prediction's); a plain regression onto
data; value clipping (one entry per row); a batch-centred or pairwise squared loss (other entries as large as the
own one: no discount); a residual with no gradient path to a value head; no discount in reach.  Where the premise
cannot be proven: a residual-gradient method chosen on purpose has the same graph (the message names it).
"""

from __future__ import annotations

from typing import Any

import torch

from overt.guards.discount import discount_at, user_frame
from overt.guards.where import user_location_from

ROWS = 16  # gradient rows taken per look
LOOKS = 3
AGREE = 2
MAX_GAMMA = 0.999
MIN_NUMEL = 8
SQUARES = frozenset(("pow", "__pow__", "square", "mul", "__mul__", "mse_loss", "smooth_l1_loss", "huber_loss"))


def _residual(name: str, args: tuple, kwargs: dict) -> torch.Tensor | None:
    """The tensor a square is taken of, or None when the call is no square of a tensor with gradient."""
    if not args or not isinstance(args[0], torch.Tensor):
        return None
    x = args[0]
    if name in ("pow", "__pow__"):
        exp = args[1] if len(args) > 1 else kwargs.get("exponent")
        return x if isinstance(exp, (int, float)) and not isinstance(exp, bool) and exp == 2 else None
    if name == "square":
        return x
    if name in ("mul", "__mul__"):
        return x if len(args) > 1 and args[1] is x else None
    if len(args) > 1 and isinstance(args[1], torch.Tensor) and args[1].shape == x.shape:
        with torch.enable_grad():
            return x - args[1]
    return None


class TdGradient:
    """The squares of one session's checked iterations, judged against its value heads' outputs."""

    def __init__(self, session: Any):
        self.s = session
        self.looks: dict[str, int] = {}
        self.done: set[str] = set()
        self.judged: set[tuple[str, int]] = set()

    def squared(self, name: str, args: tuple, kwargs: dict, seeds: list[tuple[torch.Tensor, str]], window: int) -> None:
        x = args[0] if args and isinstance(args[0], torch.Tensor) else None
        if x is None or not x.requires_grad or not x.is_floating_point() or x.numel() < MIN_NUMEL:
            return
        if name in ("mul", "__mul__") and (len(args) < 2 or args[1] is not x):
            return
        frame = user_frame(2)
        if frame is None:
            return
        loc = user_location_from(frame) or "?"
        if loc in self.done or (loc, window) in self.judged:
            return
        r = _residual(name, args, kwargs)
        if r is None or not r.requires_grad or r.numel() < MIN_NUMEL:
            return
        found = discount_at(frame)
        if found is None or not 0.0 <= found[1] <= MAX_GAMMA:
            self.done.add(loc)  # no discount in reach: a bootstrap is not proven
            return
        for v, what in seeds:
            flags = self._rows(r, v, found[1])
            if flags is not None:
                self.judged.add((loc, window))
                self.s.defer(flags, self._judge(loc, name, found, what))
                return

    def _rows(self, r: torch.Tensor, v: torch.Tensor, gamma: float) -> torch.Tensor | None:
        """[rows with entries off their own value, rows of a discounted bootstrap's form, rows taken] on the
        device, or None when ``r`` has no gradient path to ``v``."""
        n = r.numel()
        k = min(ROWS, n)
        picks = torch.linspace(0, n - 1, k).round().long().tolist()
        rows = []
        with torch.enable_grad():
            for i in picks:
                go = torch.zeros(n, dtype=r.dtype, device=r.device)
                go[i] = 1.0
                g = torch.autograd.grad(r, v, grad_outputs=go.view(r.shape), retain_graph=True, allow_unused=True)[0]
                if g is None:
                    return None
                rows.append(g.reshape(-1))
        j = torch.stack(rows).float()
        mag = j.abs()
        own_idx = mag.argmax(1, keepdim=True)
        own = j.gather(1, own_idx).squeeze(1)
        off = j.sum(1) - own
        tiny = 1e-6 * own.abs()
        n_off = (mag > tiny[:, None]).sum(1) - 1
        has_off = (n_off >= 1) & (off.abs() > 1e-3 * own.abs())
        form = has_off & (off * own < 0) & (off.abs() <= (gamma + 1e-4) * own.abs())
        return torch.stack((has_off.sum(), form.sum(), torch.tensor(k, device=j.device))).float()

    def _judge(self, loc: str, name: str, found: tuple[str, float], what: str):
        def callback(vals: list[float]) -> None:
            if loc in self.done:
                return
            has_off, form, k = vals
            if has_off < k / 2:
                self.done.add(loc)  # the residual follows its own value only: a target that carries no gradient
                return
            if form < has_off:
                self.done.add(loc)  # entries off the own value that are no discounted bootstrap (a pairwise term)
                return
            self.looks[loc] = self.looks.get(loc, 0) + 1
            if self.looks[loc] >= AGREE:
                self.done.add(loc)
                self._report(loc, name, found, what, int(k))

        return callback

    def _report(self, loc: str, name: str, found: tuple[str, float], what: str, k: int) -> None:
        gname, gamma = found
        head = f" of {what}" if what else ""
        msg = (f"the squared error at {loc} is a bootstrapped TD error of the value head{head}, and the loss "
               f"differentiates through its target: on {k} of its elements, over {AGREE} checked steps, autograd "
               "sends each one's gradient to the value it predicts and, with the opposite sign and a discounted "
               f"weight (at most {gname} = {gamma:g} times as large), to the values of the later states its target "
               "was bootstrapped from. A critic is trained by the semi-gradient: its target (r + gamma V(s'), GAE or "
               "lambda returns) is a constant of the update. Differentiated through it, the update minimises the "
               "Bellman residual instead, pulls the later values towards the earlier ones, and on a stochastic "
               "environment settles on biased values while the loss falls as usual (a residual-gradient method "
               "chosen on purpose has this graph too).")
        fix = ("detach the target: loss = (returns.detach() - values).pow(2).mean() with returns = advantages + "
               "values, or compute the advantages and returns under torch.no_grad() from values.detach().")
        self.s.report("stop-gradient-missing", msg, where=f"squared error at {loc}", fix=fix, key=f"tdgrad:{loc}")
