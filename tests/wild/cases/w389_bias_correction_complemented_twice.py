"""A hand-written AdamG whose bias corrections take ``1 - debias(beta, step)`` although ``debias`` already returns
``1 - beta ** step``: the "correction" is ``beta ** step``, which shrinks towards zero, so the first-moment term is
divided by an ever smaller number and the updates grow exponentially until the weights blow up -- the loss explodes
and nothing raises.

Source: kozistr/pytorch_optimizer#308 (https://github.com/kozistr/pytorch_optimizer/pull/308), "[Bugfix] Fix AdamG
instability": "AdamG is unstable, and always leads to gradient explosion ... We had accidentally duplicated the
minus-one operation in the bias correction steps. After removing that, the problem was fixed." (closes #305;
maintainer: "wow you nailed it. I have never guessed. thank you!"). Here an MLP learns digits for 600 steps with an
AdamG written after the library's update rule (second moment v, the numerator-function average r, first moment m of
r times the gradient, step size min(lr, 1 / sqrt(step))); the bug computes ``bias_correction = 1.0 -
debias(beta, step)``, the twin ``bias_correction = debias(beta, step)``. The reproduction leaves out weight decay,
complex parameters and closures.

Metric: test accuracy on 497 digits (plain ``python``, CPU, seed 0): bug 0.1046, twin 0.9497
"""

REPORT = "N363"
MECHANISM = "bias-correction-complemented-twice"
SLUGS = ()
METRIC = ('test_accuracy', 0.1046, 0.9497)

_SCRIPT = '''import math
import torch
from torch import nn
import torch.nn.functional as F
from sklearn.datasets import load_digits

torch.manual_seed(0)
X, y = load_digits(return_X_y=True)
X = torch.tensor(X, dtype=torch.float32) / 16.0
y = torch.tensor(y)
perm = torch.randperm(len(y))
tr, te = perm[:1300], perm[1300:]


def debias(beta, step):
    return 1.0 - beta ** step


class AdamG(torch.optim.Optimizer):
    def __init__(self, params, lr=1.0, betas=(0.95, 0.999, 0.95), p=0.2, q=0.24, eps=1e-8):
        super().__init__(params, dict(lr=lr, betas=betas, p=p, q=q, eps=eps))

    @torch.no_grad()
    def step(self):
        for group in self.param_groups:
            group['step'] = group.get('step', 0) + 1
            beta1, beta2, beta3 = group['betas']
__CORRECTION__            step_size = min(group['lr'], 1.0 / math.sqrt(group['step']))
            for p in group['params']:
                if p.grad is None:
                    continue
                state = self.state[p]
                if not state:
                    state['m'], state['v'], state['r'] = (torch.zeros_like(p) for _ in range(3))
                m, v, r = state['m'], state['v'], state['r']
                v.mul_(beta2).addcmul_(p.grad, p.grad, value=1 - beta2)
                r.mul_(beta3).add_(group['p'] * v.pow(group['q']), alpha=1 - beta3)
                m.mul_(beta1).addcmul_(r, p.grad, value=1 - beta1)
                update = (m / bias_correction1) / ((v / bias_correction2).sqrt() + group['eps'])
                p.add_(update, alpha=-step_size)


model = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10))
opt = AdamG(model.parameters())
#@guard
for step in range(600):
    i = tr[torch.randint(0, len(tr), (32,))]
    loss = F.cross_entropy(model(X[i]), y[i])
    opt.zero_grad()
    loss.backward()
    opt.step()
with torch.no_grad():
    acc = (model(X[te]).argmax(1) == y[te]).float().mean().item()
print(f"METRIC {acc:.4f}")
'''


def script(bug: bool) -> str:
    s = _SCRIPT
    lines = [f"            bias_correction{i} = {'1.0 - ' if bug else ''}debias(beta{i}, group['step'])\n"
             for i in (1, 2)]
    s = s.replace('__CORRECTION__', ''.join(lines))
    return s
