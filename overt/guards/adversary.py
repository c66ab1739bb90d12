"""Guard on a generator trained in the critic's direction (slug ``generator-agrees-with-critic``;
issue 33).

An invariant of adversarial training (GANs of every loss: the original minimax, the non-saturating
loss, WGAN, hinge): the generator and the critic pull the critic's score of a generated sample in
opposite directions.  The critic's update pushes it towards "fake", the generator's towards "real".
A generator loss written with the critic's sign (``g_cost.backward(one)`` where the critic used
``one`` for its fakes: pytorch-wgan#51), with the fake label (``bce(D(G(z)), zeros)``), or with the
critic's own loss reused breaks it: the generator is trained to look fake, the two players
cooperate, and the losses still move and nothing fails.

What is proven, on checked steps, with no host read between them (the signs are read with the
session's deferred reads):

- a watched model ``D`` runs a training forward on a generated batch: its first argument is the
  output of another watched model ``G`` that is still alive (the same memory, as ``.detach()`` keeps
  it; a weak reference proves the memory was not reused), and ``D``'s output has one score per
  sample (or per patch);
- a gradient hook on ``D``'s output takes the sum of the gradient that the backward gives that output
  (the direction the loss pushes the scores of the generated samples: negative = up);
- the next optimizer step attributes it: an optimizer that holds ``D``'s parameters and none of
  ``G``'s, on samples that were detached from ``G``, makes it the critic's push; one that holds
  ``G``'s and none of ``D``'s, on samples attached to ``G``, the generator's (a pipeline of two models
  trained on one loss has only the second kind and is never judged);
- after at least :data:`MIN_EACH` pushes of each kind, every one of them non-zero and all with one sign,
  the generator and the critic agree.  One sign change among them (a least-squares GAN's critic
  pushes towards its target 0 from both sides) and nothing is said.
"""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING, Any

import torch

from overt.guards import probing
from overt.guards.check import Check
from overt.guards.where import user_location

if TYPE_CHECKING:
    from overt.guards.watched import ModelInfo, OptInfo

MIN_EACH = 3  # pushes of the critic and of the generator compared
MAX_PAIRS = 4  # (critic, generator) pairs followed
MAX_KEEP = 12  # pushes kept per pair and side


class _Pair:
    __slots__ = ("pushes", "where", "done")

    def __init__(self) -> None:
        # the gradient sums on the critic's scores: of its own loss on generated (detached) samples and on
        # other (real) samples, and of the generator's loss on generated samples
        self.pushes: dict[str, list[float]] = {"fake": [], "real": [], "generator": []}
        self.where: dict[str, str | None] = {"fake": None, "real": None, "generator": None}
        self.done = False


class AdversaryChecks(Check):
    name = "adversary"

    def __init__(self, session: Any):
        super().__init__(session)
        self.outputs: dict[int, tuple[int, Any]] = {}  # data_ptr -> (id(G info), weak reference to its storage)
        # id(D info) -> (id G, whether its input is attached to G (None: not G's output), line)
        self.open: dict[int, tuple[int, bool | None, str | None]] = {}
        self.pending: list[tuple[int, int, bool | None, str | None, torch.Tensor]] = []  # (D, G, attached, line, sum)
        self.pairs: dict[tuple[int, int], _Pair] = {}
        self.watching = False

    # -- forwards: who feeds whom ---------------------------------------------------------------
    def on_checked_forward(self, info: ModelInfo, args: tuple, light: bool) -> None:
        if not args or not isinstance(args[0], torch.Tensor) or len(self.s.models) < 2 or not self.outputs:
            return
        x = args[0]
        try:
            ptr = x.data_ptr()
        except Exception:  # a tensor without storage (fake, functional): nothing to match
            return
        src = self.outputs.get(ptr)
        made = src[1]() if src is not None and src[0] != id(info) else None
        if made is None or made.data_ptr() != x.untyped_storage().data_ptr():
            # not a generated batch (or the output it was is gone and the memory holds something else): a
            # critic's forward on other samples, the real ones
            for (d, g), pair in self.pairs.items():
                if d == id(info) and not pair.done:
                    self.open[id(info)] = (g, None, user_location(skip=2))
                    break
            return
        key = (id(info), src[0])
        pair = self.pairs.get(key)
        if pair is None:
            if len(self.pairs) >= MAX_PAIRS:
                return
            pair = self.pairs[key] = _Pair()
        if not pair.done:
            self.open[id(info)] = (src[0], bool(x.requires_grad), user_location(skip=2))

    def on_forward_end(self, info: ModelInfo, output: Any, failed: bool) -> None:
        if failed or not isinstance(output, torch.Tensor):
            self.open.pop(id(info), None)
            return
        fed = self.open.pop(id(info), None)
        if fed is not None:
            g, attached, where = fed
            if output.requires_grad and output.dim() >= 1 and output.shape[1:].numel() == 1 \
                    or output.requires_grad and output.dim() == 4 and output.shape[1] == 1:
                output.register_hook(self._on_grad(id(info), g, attached, where))  # one score per sample (or patch)
            return
        if output.requires_grad and len(self.s.models) >= 2:
            try:
                # the storage (not the tensor: ``G(z).detach()`` drops the output tensor at once) lives as long as
                # the samples' memory; a weak reference to it proves the memory was not reused
                self.outputs[output.data_ptr()] = (id(info), weakref.ref(output.untyped_storage()))
            except Exception:  # no storage, no weak reference: nothing to match later
                return
            while len(self.outputs) > 16:
                self.outputs.pop(next(iter(self.outputs)))

    def _on_grad(self, d: int, g: int, attached: bool | None, where: str | None):
        def hook(grad: torch.Tensor) -> None:
            if probing.ACTIVE:  # a check's own backward, not the step's
                return
            try:
                self.pending.append((d, g, attached, where, grad.detach().float().sum()))
                if not self.watching:
                    self.watching = True
                    self.s.watch_steps(self, True)
            except Exception as exc:  # never break the user's backward
                self.s.check_failed(self, exc)
        return hook

    # -- steps: whose push it was ---------------------------------------------------------------
    def on_step(self, oi: OptInfo) -> None:
        pending, self.pending = self.pending, []
        if not pending:
            self.watching = False
            self.s.watch_steps(self, False)
            return
        held = {id(p) for p in oi.params}
        models = {id(m): m for m in self.s.models.values()}
        for d, g, attached, where, total in pending:
            pair = self.pairs.get((d, g))
            if pair is None or pair.done or d not in models or g not in models:
                continue
            holds_d = any(id(p) in held for p in models[d].module.parameters())
            holds_g = any(id(p) in held for p in models[g].module.parameters())
            if holds_d and not holds_g and attached is None:
                side = "real"  # the critic's step on other samples
            elif holds_d and not holds_g and not attached:
                side = "fake"  # the critic's step on detached generated samples
            elif holds_g and not holds_d and attached:
                side = "generator"  # the generator's step through the critic
            else:
                continue  # one optimizer for both (a gradient-reversal layer), a pipeline of two models: no sides
            if pair.where[side] is None:
                pair.where[side] = where
            self.s.defer(total.reshape(1), self._judge(d, g, side))

    def _judge(self, d: int, g: int, side: str):
        def callback(vals: list[float]) -> None:
            pair = self.pairs.get((d, g))
            if pair is None or pair.done:
                return
            if len(pair.pushes[side]) < MAX_KEEP:
                pair.pushes[side].append(vals[0])
            if all(len(v) >= MIN_EACH for v in pair.pushes.values()):
                self._decide(d, g, pair)
        return callback

    def _decide(self, d: int, g: int, pair: _Pair) -> None:
        pair.done = True
        fake, real, gen = pair.pushes["fake"], pair.pushes["real"], pair.pushes["generator"]
        if any(not v == v or v == 0 for v in fake + real + gen):  # NaN or no push: nothing proven
            return
        sign = 1.0 if gen[0] > 0 else -1.0
        if not (all(v * sign > 0 for v in gen + fake) and all(v * sign < 0 for v in real)):
            return  # the generator pulls the way the critic pulls real samples: quiet
        models = {id(m): m for m in self.s.models.values()}
        dn = models[d].name if d in models else "the critic"
        gn = models[g].name if g in models else "the generator"
        way = "down" if sign > 0 else "up"
        g_at = f" at {pair.where['generator']}" if pair.where["generator"] else ""
        d_at = f" ({pair.where['fake']})" if pair.where["fake"] else ""
        self.s.report(
            "generator-agrees-with-critic",
            f"The generator's loss{g_at} pushes {dn}'s scores of {gn}'s samples {way}, the way {dn}'s own loss "
            f"pushes them{d_at} and against the way it pushes the real samples' scores: on {len(gen)} checked "
            f"generator steps and {len(fake)} and {len(real)} critic steps every gradient on those scores had "
            f"that sign. In adversarial training the generator pulls its samples' scores towards the real "
            f"ones; here {gn} is trained to look fake to a critic that learns the same thing, so the players "
            "cooperate and the samples do not approach the data while both losses still move.",
            fix="give the generator the opposite objective of the critic on generated samples: with WGAN, "
            "critic loss D(fake) - D(real) and generator loss -D(fake) (backward(mone) where the critic used "
            "one); with BCE or least squares, the critic labels fakes 0 and the generator's loss labels them 1.",
            where=f"{gn}'s loss", key=f"{dn}:{gn}",
        )

    def remove_hooks(self) -> None:
        if self.watching:
            self.s.watch_steps(self, False)
            self.watching = False
