"""Guard on a model whose weight matrices are all frozen (slug ``weights-frozen``).

Judged once per (optimizer, model) pair, at the first checked step at which the session knows
both: a model found later is judged at the next checked step (a Lightning module discovered in
its first forward, which Lightning runs inside ``optimizer.step(closure)``, is known by then: a
closure step is checked after the closure's first call).  For each watched model whose parameters the
optimizer holds, if the model has weight matrices (parameters with two or more dimensions)
and none of them trains -- only biases and normalisation scales/shifts do -- the model can hardly
learn.  It is how a freezing loop that matches too much (``if "bn" not in name:
p.requires_grad = False``) shows up.  Linear probes (a trainable head), LoRA and adapters (trainable
matrices) and prompt tuning (a trainable embedding) keep a trainable matrix and stay quiet;
bias-only fine-tuning (BitFit) is reported and silenced with ``ignore=[weights-frozen]``.
No device value is read.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from overt.guards.check import Check
from overt.text import first_names

if TYPE_CHECKING:
    from overt.guards.watched import OptInfo


class FrozenChecks(Check):
    name = "frozen"

    def __init__(self, session):
        super().__init__(session)
        self.judged: set[tuple[int, int]] = set()  # (id(OptInfo), id(ModelInfo)): judged pairs

    def before_checked_step(self, oi: OptInfo, closure: bool) -> None:
        models = [info for info in self.s.models.values() if (id(oi), id(info)) not in self.judged]
        if not models:  # nothing new since this optimizer's last checked step: no work
            return
        held = {id(p) for p in oi.params}
        for info in models:
            params = list(info.module.named_parameters())
            if not any(id(p) in held for _, p in params):
                continue  # not (yet) this optimizer's model: judged if it ever is
            self.judged.add((id(oi), id(info)))
            matrices = [(n, p) for n, p in params if p.dim() >= 2]
            trainable = [(n, p) for n, p in params if p.requires_grad]
            if not matrices or not trainable or any(p.dim() >= 2 for _, p in trainable):
                continue
            total = sum(p.numel() for _, p in params)
            share = sum(p.numel() for _, p in trainable) / max(total, 1)
            self.s.report(
                "weights-frozen",
                f"every weight matrix of {info.name} is frozen (requires_grad=False on {len(matrices)} of them, e.g. "
                f"{info.name}.{matrices[0][0]}); only {len(trainable)} bias/normalisation tensor(s) train "
                f"({first_names([f'{info.name}.{n}' for n, _ in trainable], 3)}: {share:.2%} of the weights), so "
                "the model can barely learn.",
                fix="check the loop that sets requires_grad=False (it likely matches "
                "more than meant) and unfreeze the layers that should train; if bias-only training is intended, "
                f"{self.s.options.silence('weights-frozen')}.",
                where=f"{info.name}.{matrices[0][0]}", key=info.name,
            )
