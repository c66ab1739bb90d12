"""A wrapper that steps a OneCycleLR scheduler after each optimizer step, with a guard meant to stop it once the
schedule's total steps are reached, written the wrong way round: the scheduler is stepped only after its last step,
that is never, so the learning rate stays at the cycle's starting value (the peak over ``div_factor`` = 25) for the
whole run -- nothing fails.

Source: huggingface/accelerate#690 (https://github.com/huggingface/accelerate/issues/690): with ``OneCycleLR`` under
``Accelerator``, "the step function of the scheduler is never called" and the rate stays at its initial value
(labels: bug; fixed by #728, merged: "the logic for one-cycle on the scheduler was backwards"). Here a digits MLP
trained 100 steps by Adam under ``OneCycleLR(max_lr=0.01, total_steps=100)`` through a small wrapper written like
``AcceleratedScheduler``; the bug steps the scheduler only when ``total_steps <= last_epoch``, the twin while
``last_epoch < total_steps``. The reproduction has no ``Accelerator`` (one process, no gradient accumulation).

Metric: test accuracy on 497 held-out digits (plain ``python``, CPU, seed 0): bug 0.6559, twin 0.9336
"""

REPORT = "N375"
MECHANISM = "one-cycle-step-guard-inverted"
SLUGS = ()
METRIC = ('test_accuracy', 0.6559, 0.9336)

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


class AcceleratedScheduler:
    """steps the wrapped scheduler once per optimizer step; a OneCycleLR must not step past its total steps"""
    def __init__(self, scheduler):
        self.scheduler = scheduler

    def step(self):
        total = getattr(self.scheduler, 'total_steps', None)
        if total is None:
            self.scheduler.step()
__GUARD__

model = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10))
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
STEPS = 100
sched = AcceleratedScheduler(torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=1e-2, total_steps=STEPS))
#@guard
for step in range(STEPS):
    idx = tr[torch.randint(0, len(tr), (32,))]
    loss = F.cross_entropy(model(X[idx]), y[idx])
    opt.zero_grad()
    loss.backward()
    opt.step()
    sched.step()
with torch.no_grad():
    acc = (model(X[te]).argmax(1) == y[te]).float().mean().item()
print(f"METRIC {acc:.4f}")
'''


def script(bug: bool) -> str:
    guard = ('        elif total <= self.scheduler.last_epoch:\n' if bug
             else '        elif self.scheduler.last_epoch < total:\n')
    return _SCRIPT.replace('__GUARD__', guard + '            self.scheduler.step()\n')
