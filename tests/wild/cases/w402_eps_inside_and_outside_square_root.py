"""An Adam-family optimiser written by hand whose denominator adds ``eps`` under the square root and again after it,
``sqrt(v + eps) + eps``: the denominator never falls below ``sqrt(eps)`` (1e-4 for ``eps`` = 1e-8), so where the
gradients are small the steps are thousands of times smaller than Adam's and the model does not train -- nothing
fails and the loss stays where it started.

Source: kozistr/pytorch_optimizer#397 (https://github.com/kozistr/pytorch_optimizer/issues/397), "Eps is applied
incorrectly to exp_avg_sq in apply_ams_bound(...)": where ``ams_bound`` is off, "``de_nom =
exp_avg_sq.add(eps).sqrt_().add_(eps)`` and it should be ``de_nom = exp_avg_sq.sqrt().add_(eps)``. Compared to
default way it is done in Adam, this changes whey way that optimizers performs updates in case where gradient norm
are small" (labels: bug; fixed by #398, merged, "use smaller ``eps`` when adding ``exp_avg_sq``"). Here a digits MLP
trained by a hand-written Adam (lr 0.01, ``eps`` 1e-8) on a cross-entropy scaled by 1e-6 (a loss in small units,
which Adam's steps do not depend on); the bug computes the denominator as the library did, the twin as Adam does.
The reproduction leaves out the library's other options (AMSBound, weight decay, rectification).

Metric: test accuracy on 497 held-out digits (plain ``python``, CPU, seed 0): bug 0.0624, twin 0.9678
"""

REPORT = "N376"
MECHANISM = "eps-added-inside-and-outside-square-root"
SLUGS = ()
METRIC = ('test_accuracy', 0.0624, 0.9678)

_SCRIPT = '''import torch
from torch import nn
import torch.nn.functional as F
from sklearn.datasets import load_digits

torch.manual_seed(0)
X, y = load_digits(return_X_y=True)
X = torch.tensor(X, dtype=torch.float32) / 16.0
y = torch.tensor(y)
perm = torch.randperm(len(y))
tr, te = perm[:1300], perm[1300:]


class AdamLike(torch.optim.Optimizer):
    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8):
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps))

    @torch.no_grad()
    def step(self):
        for group in self.param_groups:
            b1, b2 = group['betas']
            for p in group['params']:
                if p.grad is None:
                    continue
                state = self.state[p]
                if not state:
                    state['step'] = 0
                    state['exp_avg'] = torch.zeros_like(p)
                    state['exp_avg_sq'] = torch.zeros_like(p)
                state['step'] += 1
                exp_avg, exp_avg_sq = state['exp_avg'], state['exp_avg_sq']
                exp_avg.mul_(b1).add_(p.grad, alpha=1 - b1)
                exp_avg_sq.mul_(b2).addcmul_(p.grad, p.grad, value=1 - b2)
                bc1, bc2 = 1 - b1 ** state['step'], 1 - b2 ** state['step']
__DENOM__                p.addcdiv_(exp_avg / bc1, de_nom, value=-group['lr'])


model = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10))
opt = AdamLike(model.parameters(), lr=1e-2)
LOSS_SCALE = 1e-6          # a loss in small units (e.g. one term of a sum over a large dataset)
#@guard
for step in range(300):
    idx = tr[torch.randint(0, len(tr), (64,))]
    loss = LOSS_SCALE * F.cross_entropy(model(X[idx]), y[idx])
    opt.zero_grad()
    loss.backward()
    opt.step()
with torch.no_grad():
    acc = (model(X[te]).argmax(1) == y[te]).float().mean().item()
print(f"METRIC {acc:.4f}")
'''


def script(bug: bool) -> str:
    denom = ("                de_nom = (exp_avg_sq / bc2).add(group['eps']).sqrt_().add_(group['eps'])\n" if bug
             else "                de_nom = (exp_avg_sq / bc2).sqrt().add_(group['eps'])\n")
    return _SCRIPT.replace('__DENOM__', denom)
