"""Guard on two "views" that are one view (slug ``loss-compares-itself``; issue 33).

An invariant of training on pairs (contrastive and siamese objectives: SimCLR's NT-Xent, InfoNCE,
a triplet's anchor and positive): the two forwards of a pair see two *different* inputs -- two
draws of a random augmentation, two samples of a pair.  When one call of the random transform is
applied to both views (``view = augment(x); return view, view``, a transform whose random state is
shared by both keys), the model is run twice on the same tensor: with no dropout to tell the two
forwards apart, both outputs are the same vector, every positive pair is trivially aligned, and the
loss compares a quantity with itself while it falls.  Nothing the augmentation was meant to teach
is learned.

Seen on checked steps: a watched model run in training mode, with gradients, twice within one
optimizer step from two different call expressions of the user's code (one call run again by a loop
-- a policy sampled for several episodes on the same states -- is not a pair), on tensor arguments of
the same shapes that carry no gradient (data, not an intermediate); the model has no active dropout
(with dropout, two forwards of one input differ on purpose: SimCSE); and autograd went through
*both* outputs before the step (both reached the loss: a second forward kept only for a metric is not
a pair), with the same gradient (the loss treats the two alike, as the two sides of a symmetric
comparison do at equal inputs; two separate terms -- ``ce(model(x), y) + mse(model(x).softmax(1), t)``,
wasteful, not wrong -- give the two outputs different gradients).  On the device: whether the two
forwards' tensor arguments differ anywhere (all of them: a matrix factorisation scored on one user
and two items is two different inputs) and how far apart the two gradients are.  Reported, once per
call site, when the inputs were equal on ``SAME_STEPS`` checked steps spanning at least ``SPAN``
optimizer steps; one checked step with different inputs silences the site for good.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

import torch

from overt.guards.check import Check
from overt.guards.watched import _DROPOUT, output_tensors
from overt.guards.where import _IS_USER, is_user_file, short_location

if TYPE_CHECKING:
    from overt.guards.session import GuardSession
    from overt.guards.watched import ModelInfo, OptInfo

SAME_STEPS = 3
SPAN = 8
GRAD_TOL = 1e-3  # relative difference of the two outputs' gradients that still counts as the same gradient
MAX_FORWARDS = 4  # forwards of one model looked at per step: a pair, a triplet


class _Forward:
    """One training forward of a checked step: its tensor arguments, where it was called, whether backward went
    through its output."""

    __slots__ = ("xs", "loc", "site", "reached", "grad", "handle")

    def __init__(self, xs: tuple[torch.Tensor, ...], loc: str | None, site: tuple | None):
        self.xs = xs
        self.loc = loc
        self.site = site  # (file, line, bytecode offset) of the user's call: one call expression
        self.reached = False
        self.grad: torch.Tensor | None = None  # the gradient that reached the output (all its uses summed)
        self.handle: Any = None

    def mark(self, grad_outputs: tuple) -> None:
        self.reached = True
        g = grad_outputs[0] if grad_outputs else None
        self.grad = g.detach() if isinstance(g, torch.Tensor) else None


def _call_site() -> tuple[str | None, tuple | None]:
    """``("file.py:LINE", (file, line, bytecode offset))`` of the innermost frame of the user's code: two
    forwards from one call expression (a loop running it again) share all three."""
    frame = sys._getframe(2)
    known = _IS_USER
    while frame is not None:
        code = frame.f_code
        user = known.get(code.co_filename)  # (is_user_file's answer, read inline: a dozen frames per forward)
        if user is None:
            user = is_user_file(code.co_filename)
        if user:
            site = (code.co_filename, frame.f_lineno, frame.f_lasti)
            return short_location(code.co_filename, frame.f_lineno), site
        frame = frame.f_back
    return None, None


def _alike(xs: tuple[torch.Tensor, ...], ys: tuple[torch.Tensor, ...]) -> bool:
    return len(xs) == len(ys) and all(x.shape == y.shape and x.dtype == y.dtype and x.device == y.device
                                      for x, y in zip(xs, ys))


def _same_memory(x: torch.Tensor, y: torch.Tensor) -> bool:
    return x is y or (x.data_ptr() == y.data_ptr() and x.stride() == y.stride())


class SameViewsChecks(Check):
    name = "sameviews"

    def __init__(self, session: GuardSession):
        super().__init__(session)
        self.seen: dict[int, tuple[int, list[_Forward]]] = {}  # model id -> (step, this step's forwards)
        self.same: dict[str, list[int]] = {}  # call site -> steps whose pair had equal inputs
        self.done: set[str] = set()

    @staticmethod
    def _dropout_on(info: ModelInfo) -> bool:
        return any(m.training and isinstance(m, _DROPOUT) for m in info.dropbn)

    def on_checked_forward(self, info: ModelInfo, args: tuple, light: bool) -> None:
        xs = tuple(a for a in args if isinstance(a, torch.Tensor))
        if not xs or any(x.requires_grad or not x.numel() for x in xs) or self._dropout_on(info):
            return
        step, forwards = self.seen.get(id(info), (-1, []))
        if step != self.s.step:
            self._drop(forwards)
            forwards = []
            self.seen[id(info)] = (self.s.step, forwards)
        if len(forwards) < MAX_FORWARDS:
            forwards.append(_Forward(xs, *_call_site()))

    def on_forward_end(self, info: ModelInfo, output: Any, failed: bool) -> None:
        step, forwards = self.seen.get(id(info), (-1, []))
        if failed or step != self.s.step or not forwards or forwards[-1].handle is not None:
            return
        out = next((t for t in output_tensors(output) if t.grad_fn is not None), None)
        if out is None:
            forwards.pop()  # nothing to backward through: not one side of a trained pair
            return
        fwd = forwards[-1]
        fwd.handle = out.grad_fn.register_prehook(fwd.mark)

    def before_checked_step(self, oi: OptInfo, closure: bool) -> None:
        for key, (_, forwards) in list(self.seen.items()):
            done = [f for f in forwards if f.handle is not None and f.reached]
            self._drop(forwards)
            del self.seen[key]
            for a, b in zip(done, done[1:]):
                if a.site is None or a.site == b.site or not _alike(a.xs, b.xs):
                    continue  # one call expression run again (a loop: repeated sampling, episodes) is not a pair
                if a.grad is None or b.grad is None or a.grad.shape != b.grad.shape:
                    continue
                site = b.loc or "a forward"
                if site in self.done:
                    continue
                if all(_same_memory(x, y) for x, y in zip(a.xs, b.xs)):
                    differ = torch.zeros((), device=a.grad.device)
                else:
                    differ = torch.stack([(x != y).any() for x, y in zip(a.xs, b.xs)]).any().float().to(a.grad.device)
                # the loss treats the two outputs alike (the same gradient reaches both: two sides of one symmetric
                # comparison), not as two separate terms (`ce(model(x), y) + mse(model(x).softmax(1), t)`)
                ga, gb = a.grad.float(), b.grad.to(a.grad.device).float()
                gdiff, gscale = (ga - gb).abs().amax(), torch.maximum(ga.abs().amax(), gb.abs().amax())
                self.s.defer(torch.stack((differ, gdiff, gscale)), self._judge(site, a.loc, self.s.step))

    @staticmethod
    def _drop(forwards: list[_Forward]) -> None:
        for f in forwards:
            if f.handle is not None:
                f.handle.remove()
                f.handle = None

    def _judge(self, site: str, first: str | None, step: int):
        def callback(vals: list[float]) -> None:
            if site in self.done:
                return
            differ, gdiff, gscale = vals
            if differ or not gdiff <= GRAD_TOL * gscale:
                self.done.add(site)  # two different inputs (a real pair), or two outputs the loss uses differently
                return
            steps = self.same.setdefault(site, [])
            steps.append(step)
            if len(steps) >= SAME_STEPS and steps[-1] - steps[0] >= SPAN:
                self.done.add(site)
                self._report(site, first, len(steps))

        return callback

    def _report(self, site: str, first: str | None, n: int) -> None:
        msg = (f"the model is run at {site} on an input identical to the one of its previous forward in the same "
               f"training step{f' (at {first})' if first and first != site else ''}, on each of {n} checked "
               "steps, and the model has no dropout: both forwards give the same output, both reach the loss, "
               "and a loss that compares them (the two views of a contrastive or siamese pair) compares a "
               "quantity with itself: every positive pair is aligned before training starts and nothing the "
               "views were meant to teach is learned, while the loss falls. One draw of a random augmentation "
               "applied to both views does this.")
        fix = ("draw the random augmentation once per view (call the transform separately for each view, or give "
               "each view its own random state); if both forwards are meant to see one input, run the model once "
               "and reuse its output.")
        self.s.report("loss-compares-itself", msg, where=f"forward at {site}", fix=fix, key=site)

    def remove_hooks(self) -> None:
        for _, forwards in self.seen.values():
            self._drop(forwards)
        self.seen.clear()
