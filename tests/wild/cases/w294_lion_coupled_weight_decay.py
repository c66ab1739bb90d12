"""Lion with coupled weight decay: ``wd * p`` is added to the gradient before the sign of the update is taken, where
Lion decays the parameter directly. With Lion's usual decay (ten times AdamW's), the decay term outweighs most
gradients, the sign follows the weight's own sign, and the weights are marched towards zero at the full learning
rate every step -- with no error.

Source: bitsandbytes-foundation/bitsandbytes#1992
(https://github.com/bitsandbytes-foundation/bitsandbytes/issues/1992), "Lion applies coupled (L2) weight decay
instead of decoupled in 32-bit CUDA, Triton, and the default backend": "coupled decay changes what `sign()` sees
(`sign(momentum_of(g + wd*p))` vs. the intended `sign(momentum_of(g))`), so it alters the direction of the update,
not merely its magnitude" (fixed by #1993, merged after review). Here an MLP is trained on digits with a
hand-written Lion (lr 1e-3, betas 0.9 and 0.99, weight decay 1.0); the buggy step folds ``wd * p`` into the
gradient, the twin multiplies ``p`` by ``1 - lr * wd`` before the sign update.

Metric: validation accuracy (plain ``python``, CPU, seed 0): bug 0.1033, twin 0.9421
"""

REPORT = "N268"
MECHANISM = "decoupled-decay-folded-into-sign-update"
SLUGS = ()
METRIC = ("val_accuracy", 0.1033, 0.9421)

_SCRIPT = '''import torch
from torch import nn
import torch.nn.functional as F
from sklearn.datasets import load_digits

torch.manual_seed(0)
d = load_digits()
X = torch.tensor(d.data, dtype=torch.float32) / 16.0
Y = torch.tensor(d.target)
perm = torch.randperm(len(X))
tr, va = perm[:1400], perm[1400:]


class Lion(torch.optim.Optimizer):
    def __init__(self, params, lr=1e-4, betas=(0.9, 0.99), weight_decay=0.0):
        super().__init__(params, dict(lr=lr, betas=betas, weight_decay=weight_decay))

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
                exp_avg = state["exp_avg"]
                grad = p.grad
                __DECAY__
                update = (exp_avg * beta1 + grad * (1 - beta1)).sign()
                p.add_(update, alpha=-lr)
                exp_avg.mul_(beta2).add_(grad, alpha=1 - beta2)


model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))
opt = Lion(model.parameters(), lr=1e-3, weight_decay=1.0)
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
    return _SCRIPT.replace('__DECAY__', 'grad = grad.add(p, alpha=wd)' if bug else 'p.mul_(1 - lr * wd)')
