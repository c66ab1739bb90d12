"""A RAdam whose first-moment bias correction is written in place into ``exp_avg``: each step divides the stored
moment by ``1 - beta1 ** t`` again, so the corrections compound over the first steps, the moment grows to hundreds
of times the gradient and the early updates throw the weights far off -- with no error.

Source: frgfm/holocron#1 (https://github.com/frgfm/holocron/issues/1), holocron's RAdam applied the bias
correction with an in-place division of the optimizer state ``exp_avg`` instead of to a copy, so that the
correction accumulates from step to step; maintainer: "Agreed, this is a good catch!". Here an MLP is trained on
digits for 300 steps with a hand-written RAdam (the rectified update of Liu et al., as holocron writes it); the
buggy step divides ``exp_avg`` itself by the correction, the twin a copy of it.

Metric: validation accuracy (plain ``python``, CPU, seed 0): bug 0.6625, twin 0.9345
"""

REPORT = "N249"
MECHANISM = "bias-correction-written-into-optimizer-state"
SLUGS = ()
METRIC = ("val_accuracy", 0.6625, 0.9345)

_SCRIPT = '''import math
import torch
from torch import nn
import torch.nn.functional as F
from sklearn.datasets import load_digits

torch.manual_seed(0)
d = load_digits()
X = torch.tensor(d.data, dtype=torch.float32) / 16.0
Y = torch.tensor(d.target)
perm = torch.randperm(len(X))
tr, va = perm[:1400], perm[1400:]


class RAdam(torch.optim.Optimizer):
    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8):
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps))

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
                exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
                exp_avg.mul_(beta1).add_(p.grad, alpha=1 - beta1)
                exp_avg_sq.mul_(beta2).addcmul_(p.grad, p.grad, value=1 - beta2)
                m_hat = __CORRECT__
                rho_t = rho_inf - 2 * t * beta2 ** t / (1 - beta2 ** t)
                if rho_t > 4:
                    v_hat = (exp_avg_sq / (1 - beta2 ** t)).sqrt().add_(group["eps"])
                    r = math.sqrt((rho_t - 4) * (rho_t - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho_t))
                    p.add_(m_hat / v_hat, alpha=-group["lr"] * r)
                else:
                    p.add_(m_hat, alpha=-group["lr"])


model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))
opt = RAdam(model.parameters(), lr=3e-3)
#@guard
for step in range(300):
    i = tr[torch.randint(0, len(tr), (64,))]
    loss = F.cross_entropy(model(X[i]), Y[i])
    opt.zero_grad()
    loss.backward()
    opt.step()
with torch.no_grad():
    acc = (model(X[va]).argmax(1) == Y[va]).float().mean().item()
print(f"METRIC {acc:.4f}")
'''


def script(bug: bool) -> str:
    return _SCRIPT.replace('__CORRECT__', 'exp_avg.div_(1 - beta1 ** t)' if bug else 'exp_avg / (1 - beta1 ** t)')
