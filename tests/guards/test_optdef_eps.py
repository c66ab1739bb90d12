"""optimizer-off-definition, its eps-floor premise (issue 33, round eighteen's w402): a hand-written optimizer of any
name whose update on the step's gradients is far smaller than a denominator floored at its own ``eps`` allows.
Planted bugs on a digits MLP trained on a loss in small units (gradients near ``eps``): ``eps`` added under the
square root and after it, and under it alone.  Clean twins and correct programs near the premise stay silent:
Adam's own denominator, a large ``eps`` chosen on purpose, an Adam without bias correction, an Adadelta whose
numerator grows with ``eps``, and the same buggy class on ordinary gradients (its floor then changes nothing)."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from tests.guards.helpers import batches, guarded_run, mlp, slugs


class AdamLike(torch.optim.Optimizer):
    """Adam's moments; ``denom`` picks how ``eps`` enters the denominator."""

    def __init__(self, params, lr=1e-2, betas=(0.9, 0.999), eps=1e-8, denom="adam", correct=True):
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps))
        self.denom, self.correct = denom, correct

    @torch.no_grad()
    def step(self):
        for group in self.param_groups:
            b1, b2 = group["betas"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                st = self.state[p]
                if not st:
                    st["t"], st["m"], st["v"] = 0, torch.zeros_like(p), torch.zeros_like(p)
                st["t"] += 1
                st["m"].mul_(b1).add_(p.grad, alpha=1 - b1)
                st["v"].mul_(b2).addcmul_(p.grad, p.grad, value=1 - b2)
                c1, c2 = (1 - b1 ** st["t"], 1 - b2 ** st["t"]) if self.correct else (1.0, 1.0)
                v = st["v"] / c2
                if self.denom == "both":
                    d = v.add(group["eps"]).sqrt_().add_(group["eps"])
                elif self.denom == "inside":
                    d = v.add(group["eps"]).sqrt_()
                else:
                    d = v.sqrt().add_(group["eps"])
                p.addcdiv_(st["m"] / c1, d, value=-group["lr"])


class Adadelta(torch.optim.Optimizer):
    """Zeiler's rule: eps in the numerator's root too, so a smaller eps makes the update smaller."""

    def __init__(self, params, lr=1.0, rho=0.9, eps=1e-6):
        super().__init__(params, dict(lr=lr, rho=rho, eps=eps))

    @torch.no_grad()
    def step(self):
        for group in self.param_groups:
            rho, eps = group["rho"], group["eps"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                st = self.state[p]
                if not st:
                    st["v"], st["u"] = torch.zeros_like(p), torch.zeros_like(p)
                st["v"].mul_(rho).addcmul_(p.grad, p.grad, value=1 - rho)
                delta = st["u"].add(eps).sqrt_().div_(st["v"].add(eps).sqrt_()).mul_(p.grad)
                st["u"].mul_(rho).addcmul_(delta, delta, value=1 - rho)
                p.add_(delta, alpha=-group["lr"])


def _run(make_opt, scale: float = 1e-6, steps: int = 6):
    model = mlp(hidden=32)
    opt = make_opt(model.parameters())

    def train():
        torch.manual_seed(1)
        for xb, yb in batches(32, steps):
            loss = scale * F.cross_entropy(model(xb), yb)
            opt.zero_grad()
            loss.backward()
            opt.step()

    return guarded_run(train)


def test_eps_under_and_after_the_root_is_named_at_its_line_and_the_twin_is_silent():
    findings, text = _run(lambda ps: AdamLike(ps, denom="both"))
    assert slugs(findings) == ["optimizer-off-definition"], text
    f = findings[0]
    assert "floor far above its eps" in f.message and "AdamLike" in f.message
    line = open(__file__).read().splitlines()[int(f.where.rsplit(":", 1)[1]) - 1]
    assert 'v.add(group["eps"]).sqrt_().add_(group["eps"])' in line
    findings, text = _run(lambda ps: AdamLike(ps, denom="adam"))
    assert slugs(findings) == [], text


def test_eps_under_the_root_alone_floors_it_at_its_square_root():
    assert "optimizer-off-definition" in slugs(_run(lambda ps: AdamLike(ps, denom="inside"))[0])


def test_correct_programs_near_the_premise_are_silent():
    # a large eps chosen on purpose: its own floor dominates by its own measure
    assert slugs(_run(lambda ps: AdamLike(ps, eps=1e-3, denom="adam"))[0]) == []
    # Adam without bias correction (its root is smaller than |g| on the first steps)
    assert slugs(_run(lambda ps: AdamLike(ps, denom="adam", correct=False))[0]) == []
    # Adadelta: the update grows with eps
    assert slugs(_run(lambda ps: Adadelta(ps))[0]) == []
    # the buggy denominator on ordinary gradients: sqrt(eps) is far below them, nothing to see
    assert slugs(_run(lambda ps: AdamLike(ps, denom="both"), scale=1.0)[0]) == []
