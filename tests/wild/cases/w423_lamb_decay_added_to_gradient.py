"""LAMB with its weight decay added to the gradient, Adam-style, instead of to the update it scales: the decay term
enters the moment estimates and is normalised away with the gradient, and the trust ratio no longer sees it, so
the layer-wise decay LAMB prescribes is never applied and an overfitting run is not held back -- nothing fails.

Source: cybertronai/pytorch-lamb#3 (https://github.com/cybertronai/pytorch-lamb/issues/3), "Weight decay": "It seems
like you kept the 'original' implementation from `torch.optim.Adam`, adding `decay * params` to the gradients, but
the equations in the paper are adding this `decay * params` to the calculated update (which you call
`adam_step`, used as basis for the update, as well as its norm used for the denominator of the trust ratio. Using
your 'raw' implementation leads to very slow / no learning at all, while changing it to `adam_step += decay *
params` seems to have the expected effect"; maintainer: "Thanks for the catch! I found that weight decay with the
current implementation didn't work well at all on Transformer XL. I'm guessing this is the reason. I'm working on a
fix now." Here LAMB written like the repository's (no bias correction, weight norm clamped at 10) trains a wide MLP
on 200 digits with a fifth of the labels shuffled and weight decay 0.1, and the test digits are classified; the bug
adds the decay to the gradient, the twin to ``adam_step``, as the fix does. The reproduction replaces Transformer-XL
and language modelling by an MLP on noisy digits.

Metric: test accuracy (plain ``python``, CPU, seed 0): bug 0.0982, twin 0.5995
"""

from tests.wild.cases.common import PRELUDE

REPORT = "N397"
MECHANISM = "lamb-decay-added-to-gradient"
SLUGS = ()
METRIC = ("test_accuracy", 0.0982, 0.5995)

_SCRIPT = PRELUDE + '''
from torch.optim import Optimizer


class Lamb(Optimizer):
    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-6, weight_decay=0.0):
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay))

    @torch.no_grad()
    def step(self):
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                grad = p.grad
                state = self.state[p]
                if not state:
                    state["exp_avg"] = torch.zeros_like(p)
                    state["exp_avg_sq"] = torch.zeros_like(p)
                exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
                beta1, beta2 = group["betas"]
__GRAD_DECAY__
                exp_avg.mul_(beta1).add_(grad, alpha=1 - beta1)
                exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
                weight_norm = p.pow(2).sum().sqrt().clamp(0, 10)
                adam_step = exp_avg / exp_avg_sq.sqrt().add(group["eps"])
__STEP_DECAY__
                adam_norm = adam_step.pow(2).sum().sqrt()
                trust_ratio = 1.0 if weight_norm == 0 or adam_norm == 0 else (weight_norm / adam_norm).item()
                p.add_(adam_step, alpha=-group["lr"] * trust_ratio)


g = torch.Generator().manual_seed(0)
y_train = Y[:200].clone()
noisy = torch.randperm(200, generator=g)[:40]
y_train[noisy] = y_train[noisy][torch.randperm(40, generator=g)]
model = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 10))
opt = Lamb(model.parameters(), lr=0.01, weight_decay=0.1)
#@guard
for epoch in range(100):
    for i in torch.randperm(200).split(50):
        loss = F.cross_entropy(model(X[i]), y_train[i])
        opt.zero_grad()
        loss.backward()
        opt.step()
model.eval()
with torch.no_grad():
    acc = (model(X[1400:]).argmax(1) == Y[1400:]).float().mean().item()
print(f"METRIC {acc:.4f}")
'''

_IN_GRAD = '''                if group["weight_decay"] != 0:
                    grad = grad.add(p, alpha=group["weight_decay"])'''
_IN_STEP = '''                if group["weight_decay"] != 0:
                    adam_step.add_(p, alpha=group["weight_decay"])'''


def script(bug: bool) -> str:
    return (_SCRIPT.replace("__GRAD_DECAY__", _IN_GRAD if bug else "")
            .replace("__STEP_DECAY__", "" if bug else _IN_STEP))
