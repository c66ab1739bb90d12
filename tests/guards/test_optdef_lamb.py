"""optimizer-off-definition, LAMB's decay (issue 33, round nineteen's w423): a trust-ratio optimizer adds its weight
decay to the normalised step it scales, never to the gradient its moments see.  Planted bug: a LAMB whose decay is
added to the gradient, Adam-style (named as ``Lamb`` and, under another name, found by its trust ratio); its clean
twin adds it to the step.  Correct variants near the premise stay silent: bias correction on, the weight norm
clamped, the trust ratio clipped and skipped where the decay is 0, a decay applied to the weight after the update,
a LARS (no moments) with its decay in the gradient as its definition has it."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from tests.guards.helpers import batches, guarded_run, mlp, slugs


class Lamb(torch.optim.Optimizer):
    """LAMB written several ways: ``decay`` is where the decay enters ("grad", "step" or "after" the update)."""

    def __init__(self, params, lr=1e-2, betas=(0.9, 0.999), eps=1e-6, weight_decay=0.0, decay="step",
                 bias_correction=False, clamp=None, skip_undecayed=False):
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay))
        self.decay, self.bias_correction = decay, bias_correction
        self.clamp, self.skip_undecayed = clamp, skip_undecayed

    @torch.no_grad()
    def step(self):
        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            wd = group["weight_decay"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                g = p.grad
                if self.decay == "grad" and wd:
                    g = g + wd * p
                st = self.state[p]
                if not st:
                    st["n"] = 0
                    st["exp_avg"] = torch.zeros_like(p)
                    st["exp_avg_sq"] = torch.zeros_like(p)
                st["n"] += 1
                m, v = st["exp_avg"], st["exp_avg_sq"]
                m.lerp_(g, 1 - beta1)
                v.mul_(beta2).add_((1 - beta2) * g * g)
                if self.bias_correction:
                    m_hat, v_hat = m / (1 - beta1 ** st["n"]), v / (1 - beta2 ** st["n"])
                else:
                    m_hat, v_hat = m, v
                update = m_hat / (v_hat.sqrt() + group["eps"])
                if self.decay == "step" and wd:
                    update = update + wd * p
                w_norm, u_norm = p.norm(), update.norm()
                if self.clamp is not None:
                    w_norm = w_norm.clamp(max=self.clamp)
                ratio = torch.where((w_norm > 0) & (u_norm > 0), w_norm / u_norm, torch.ones_like(w_norm))
                if self.clamp is not None:
                    ratio = ratio.clamp(max=self.clamp)
                if self.skip_undecayed and not wd:
                    ratio = torch.ones_like(ratio)
                p.sub_(group["lr"] * ratio * update)
                if self.decay == "after" and wd:
                    p.mul_(1 - group["lr"] * wd)


class LayerwiseAdam(Lamb):
    """The same algorithm under a name of its own: recognised by the trust ratio its step computes."""

    @torch.no_grad()
    def step(self):
        trust_ratio = None  # (the family is read from the step's own source)
        del trust_ratio
        return super().step()


class Lars(torch.optim.Optimizer):
    """LARS: heavy-ball SGD on a trust-ratio-scaled gradient whose decay is, by definition, in the gradient."""

    def __init__(self, params, lr=0.1, momentum=0.9, weight_decay=0.0, eta=1e-3):
        super().__init__(params, dict(lr=lr, momentum=momentum, weight_decay=weight_decay, eta=eta))

    @torch.no_grad()
    def step(self):
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                g = p.grad + group["weight_decay"] * p
                w_norm, g_norm = p.norm(), g.norm()
                trust = torch.where((w_norm > 0) & (g_norm > 0), group["eta"] * w_norm / g_norm,
                                    torch.ones_like(w_norm))
                buf = self.state[p].setdefault("momentum_buffer", torch.zeros_like(p))
                buf.mul_(group["momentum"]).add_(g * trust * group["lr"])
                p.sub_(buf)


def _slugs(make_opt, steps: int = 6) -> tuple[list[str], list]:
    model = mlp(hidden=32)
    opt = make_opt(model.parameters())

    def train():
        torch.manual_seed(1)
        for xb, yb in batches(32, steps):
            loss = F.cross_entropy(model(xb), yb)
            opt.zero_grad()
            loss.backward()
            opt.step()

    findings, _ = guarded_run(train)
    return slugs(findings), findings


def test_a_lamb_adding_its_decay_to_the_gradient_is_named_at_the_line_and_its_twin_is_silent():
    names, findings = _slugs(lambda ps: Lamb(ps, weight_decay=0.1, decay="grad"))
    assert names == ["optimizer-off-definition"], findings
    f = findings[0]
    assert "trust ratio" in f.message and "gradient the moments see" in f.message
    line = open(__file__).read().splitlines()[int(f.where.rsplit(":", 1)[1]) - 1]
    assert "g = g + wd * p" in line, f.where
    assert _slugs(lambda ps: Lamb(ps, weight_decay=0.1, decay="step"))[0] == []


def test_a_trust_ratio_optimizer_under_another_name_is_judged_too():
    assert _slugs(lambda ps: LayerwiseAdam(ps, weight_decay=0.1, decay="grad"))[0] == ["optimizer-off-definition"]
    assert _slugs(lambda ps: LayerwiseAdam(ps, weight_decay=0.1, decay="step"))[0] == []


def test_correct_lamb_variants_and_lars_are_silent():
    assert _slugs(lambda ps: Lamb(ps, weight_decay=0.1, bias_correction=True, clamp=10.0))[0] == []
    assert _slugs(lambda ps: Lamb(ps, weight_decay=0.01, bias_correction=True, skip_undecayed=True))[0] == []
    assert _slugs(lambda ps: Lamb(ps, weight_decay=0.1, decay="after"))[0] == []
    assert _slugs(lambda ps: Lamb(ps, weight_decay=0.0, decay="grad"))[0] == []
    assert _slugs(lambda ps: Lars(ps, weight_decay=5e-4))[0] == []
