"""A warmup schedule whose "still warming up" test compares the last learning rate with 1: with any peak
learning rate below 1 the scheduler believes it is warming up forever, so after the warmup steps the rate
stays at its peak instead of decaying -- with no error.

Source: facebookresearch/ParlAI#4384 (https://github.com/facebookresearch/ParlAI/pull/4384), "Warmup updates
bug for LR < 1" (merged): "#4242 introduced a bug in which `_is_warming_up` returns True if the last LR is < 1.
This will introduce a bug for all initial LRs != 1. In particular, for models with initial learning rate < 1,
the model will be 'warming up' forever, and the LR will remain constant after the warmup updates have finished
rather than starting to decay according to the provided schedule".  Here an MLP is trained on scikit-learn's
digits with Adam in small batches (peak rate 0.01, 50 warmup updates, then a linear decay to zero over 1200
updates), the rate set each step by a scheduler written like ParlAI's: warmup (rate ``peak * min(1, step /
warmup)``) while ``_is_warming_up()``, the decay after.  The buggy test is ``last_lr < 1``, the twin's ``step <
warmup``.

Metric: validation cross-entropy after training (plain ``python``, CPU, seed 0): bug 0.4819, twin 0.3149 (lower is
better)
"""

REPORT = "N222"
MECHANISM = "warmup-test-compares-rate-with-one"
SLUGS = ()
METRIC = ("val_loss", 0.4819, 0.3149)

_SCRIPT = '''
import torch
from torch import nn
import torch.nn.functional as F
from sklearn.datasets import load_digits

torch.manual_seed(0)
d = load_digits()
X = torch.tensor(d.data, dtype=torch.float32) / 16.0
Y = torch.tensor(d.target)
Xtr, Ytr, Xva, Yva = X[:1200], Y[:1200], X[1200:], Y[1200:]
model = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 10))
opt = torch.optim.Adam(model.parameters(), lr=0.0)
PEAK, WARMUP, TOTAL = 0.01, 50, 1200


class Scheduler:
    def __init__(self):
        self.step_num, self.last_lr = 0, 0.0

    def _is_warming_up(self):
        return __WARM__

    def step(self):
        self.step_num += 1
        if self._is_warming_up():
            lr = PEAK * min(1.0, self.step_num / WARMUP)
        else:
            lr = PEAK * max(0.0, (TOTAL - self.step_num) / (TOTAL - WARMUP))
        for group in opt.param_groups:
            group["lr"] = lr
        self.last_lr = lr


sched = Scheduler()
#@guard
while sched.step_num < TOTAL:
    b = torch.randint(0, len(Xtr), (16,))
    sched.step()
    loss = F.cross_entropy(model(Xtr[b]), Ytr[b])
    opt.zero_grad()
    loss.backward()
    opt.step()

with torch.no_grad():
    val_loss = F.cross_entropy(model(Xva), Yva)
print(f"METRIC {val_loss.item():.4f}")
'''


def script(bug: bool) -> str:
    return _SCRIPT.replace("__WARM__", "self.last_lr < 1" if bug else "self.step_num < WARMUP")
