"""optimizer-off-definition at run time (issue 33): a hand-written optimizer named after an algorithm torch ships
computes another update than torch's from the same state, gradients and hyperparameters; an optimizer whose decay
is declared decoupled folds it into the gradient.  Planted bugs (a RAdam writing its bias correction into
``exp_avg``, an Adam whose second moment takes ``1 - beta1``, a Lion and an AdamW with the decay in the gradient),
their clean twins, and correct programs near the premise that must stay silent: an Adam with decoupled decay, an
SGD with momentum in Sutskever's form, an AdamW decaying after its update, a variant with a hyperparameter of its
own.  A guarded run's weights are those of the same run unguarded (the probe works on copies)."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from tests.guards.helpers import batches, guarded_run, mlp, slugs


class RAdam(torch.optim.Optimizer):
    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, in_place=False):
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps))
        self.in_place = in_place

    @torch.no_grad()
    def step(self):
        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            rho_inf = 2 / (1 - beta2) - 1
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if not state:
                    state["step"] = 0
                    state["exp_avg"] = torch.zeros_like(p)
                    state["exp_avg_sq"] = torch.zeros_like(p)
                state["step"] += 1
                t = state["step"]
                m, v = state["exp_avg"], state["exp_avg_sq"]
                m.mul_(beta1).add_(p.grad, alpha=1 - beta1)
                v.mul_(beta2).addcmul_(p.grad, p.grad, value=1 - beta2)
                m_hat = m.div_(1 - beta1 ** t) if self.in_place else m / (1 - beta1 ** t)
                rho_t = rho_inf - 2 * t * beta2 ** t / (1 - beta2 ** t)
                if rho_t > 5:
                    v_hat = (v / (1 - beta2 ** t)).sqrt().add_(group["eps"])
                    r = math.sqrt((rho_t - 4) * (rho_t - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho_t))
                    p.add_(m_hat / v_hat, alpha=-group["lr"] * r)
                else:
                    p.add_(m_hat, alpha=-group["lr"])


class Adam(torch.optim.Optimizer):
    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, v_coef=None,
                 decoupled=False):
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay))
        self.v_coef, self.decoupled = v_coef, decoupled

    @torch.no_grad()
    def step(self):
        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            lr, wd = group["lr"], group["weight_decay"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                grad = p.grad
                if wd and self.decoupled:
                    p.mul_(1 - lr * wd)
                elif wd:
                    grad = grad.add(p, alpha=wd)
                state = self.state[p]
                if not state:
                    state["t"] = 0
                    state["m"] = torch.zeros_like(p)
                    state["v"] = torch.zeros_like(p)
                state["t"] += 1
                t = state["t"]
                state["m"].mul_(beta1).add_(grad, alpha=1 - beta1)
                state["v"].mul_(beta2).addcmul_(grad, grad, value=self.v_coef or 1 - beta2)
                m_hat = state["m"] / (1 - beta1 ** t)
                v_hat = state["v"] / (1 - beta2 ** t)
                p.addcdiv_(m_hat, v_hat.sqrt().add_(group["eps"]), value=-lr)


class AdamW(Adam):
    """The same Adam, named for decoupled decay: ``coupled`` folds it into the gradient, ``after`` decays after the
    update instead of before."""

    def __init__(self, params, coupled=False, after=False, **kw):
        super().__init__(params, decoupled=not coupled and not after, **kw)
        self.after = after

    @torch.no_grad()
    def step(self):
        if not self.after:
            return super().step()
        saved = [g["weight_decay"] for g in self.param_groups]
        for g in self.param_groups:
            g["weight_decay"] = 0.0
        super().step()
        for g, wd in zip(self.param_groups, saved):
            g["weight_decay"] = wd
            for p in g["params"]:
                p.mul_(1 - g["lr"] * wd)


class Lion(torch.optim.Optimizer):
    def __init__(self, params, lr=1e-4, betas=(0.9, 0.99), weight_decay=0.0, coupled=False):
        super().__init__(params, dict(lr=lr, betas=betas, weight_decay=weight_decay))
        self.coupled = coupled

    @torch.no_grad()
    def step(self):
        for group in self.param_groups:
            lr, wd = group["lr"], group["weight_decay"]
            beta1, beta2 = group["betas"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if not state:
                    state["exp_avg"] = torch.zeros_like(p)
                exp_avg, grad = state["exp_avg"], p.grad
                if self.coupled:
                    grad = grad.add(p, alpha=wd)
                else:
                    p.mul_(1 - lr * wd)
                p.add_((exp_avg * beta1 + grad * (1 - beta1)).sign(), alpha=-lr)
                exp_avg.mul_(beta2).add_(grad, alpha=1 - beta2)


class SGD(torch.optim.Optimizer):
    """SGD with momentum in Sutskever's form (v = mu * v + lr * g; p -= v)."""

    def __init__(self, params, lr=0.1, momentum=0.9):
        super().__init__(params, dict(lr=lr, momentum=momentum))

    @torch.no_grad()
    def step(self):
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                v = self.state[p].setdefault("velocity", torch.zeros_like(p))
                v.mul_(group["momentum"]).add_(p.grad, alpha=group["lr"])
                p.sub_(v)


class RAdamRectified(RAdam):
    pass


def _train(make_opt, steps: int = 8, guard: bool = True):
    model = mlp(hidden=32)
    opt = make_opt(model.parameters())

    def train():
        torch.manual_seed(1)
        for xb, yb in batches(32, steps):
            loss = F.cross_entropy(model(xb), yb)
            opt.zero_grad()
            loss.backward()
            opt.step()

    if not guard:
        train()
        return model, [], ""
    findings, text = guarded_run(train)
    return model, findings, text


def _slugs(make_opt) -> list[str]:
    return slugs(_train(make_opt)[1])


def test_a_radam_writing_its_bias_correction_into_the_state_is_named_and_its_twin_is_silent():
    model, findings, text = _train(lambda ps: RAdam(ps, lr=3e-3, in_place=True))
    assert "optimizer-off-definition" in slugs(findings), text
    f = next(f for f in findings if f.slug == "optimizer-off-definition")
    assert "torch.optim.RAdam" in f.message and "test_optdef.py" in f.where
    assert _slugs(lambda ps: RAdam(ps, lr=3e-3)) == []


def test_an_adam_whose_second_moment_takes_the_first_moments_coefficient_is_named():
    assert "optimizer-off-definition" in _slugs(lambda ps: Adam(ps, lr=1e-3, v_coef=0.1))
    assert _slugs(lambda ps: Adam(ps, lr=1e-3)) == []


def test_correct_variants_near_the_premise_are_silent():
    # an Adam whose decay is decoupled (AdamW's rule under Adam's name), an Adam with L2 decay
    assert _slugs(lambda ps: Adam(ps, lr=1e-3, weight_decay=0.05, decoupled=True)) == []
    assert _slugs(lambda ps: Adam(ps, lr=1e-3, weight_decay=0.05)) == []
    # SGD with momentum written as v = mu * v + lr * g
    assert _slugs(lambda ps: SGD(ps, lr=0.05, momentum=0.9)) == []
    # an AdamW that decays after its update; a correct Lion
    assert _slugs(lambda ps: AdamW(ps, lr=1e-3, weight_decay=0.1, after=True)) == []
    assert _slugs(lambda ps: Lion(ps, lr=1e-3, weight_decay=1.0)) == []
    # a class named after no algorithm torch ships is not compared with torch
    assert _slugs(lambda ps: RAdamRectified(ps, lr=3e-3, in_place=True)) == []


def test_a_decay_declared_decoupled_and_folded_into_the_gradient_is_named():
    findings = _train(lambda ps: Lion(ps, lr=1e-3, weight_decay=1.0, coupled=True))[1]
    assert slugs(findings) == ["optimizer-off-definition"]
    f = findings[0]
    assert "not decoupled" in f.message and "grad = grad.add(p, alpha=wd)" in open(__file__).read().splitlines()[
        int(f.where.rsplit(":", 1)[1]) - 1]
    assert "optimizer-off-definition" in _slugs(lambda ps: AdamW(ps, lr=1e-3, weight_decay=0.5, coupled=True))


def test_the_probe_leaves_the_run_as_it_was():
    guarded = _train(lambda ps: RAdam(ps, lr=3e-3, in_place=True))[0]
    plain = _train(lambda ps: RAdam(ps, lr=3e-3, in_place=True), guard=False)[0]
    for a, b in zip(guarded.parameters(), plain.parameters()):
        assert torch.equal(a, b)
