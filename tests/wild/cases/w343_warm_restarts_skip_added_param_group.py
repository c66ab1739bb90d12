"""A cosine warm-restarts scheduler that keeps the base learning rates it read when it was built: a parameter group
added later with ``add_param_group`` (a backbone unfrozen part-way) is never annealed, so it trains at its
initial learning rate to the end while the rest of the model anneals -- with no error.

Source: pytorch/pytorch#79888 (https://github.com/pytorch/pytorch/issues/79888), "`CosineAnnealingWarmRestarts`
does not update parameters added with `add_param_group`": "The ``torch.optim.Optimizer.add_param_group`` method is
often used with transfer learning in order to unfreeze layers during training ... When using the
``torch.optim.lr_scheduler.CosineAnnealingWarmRestarts`` learning rate scheduler, any parameter groups that are
added during training are not updated by the learning rate scheduler." (the reporter's minimal reproduction;
open). Current PyTorch (2.13) raises on this form (``zip(..., strict=True)``), so the scheduler is written by hand
as the reported version behaves: base rates read at construction, the groups zipped with the rates without
``strict``. A digits MLP (20% of the training labels replaced at random) trains its head from the start with
SGD (one cosine cycle over 20 epochs) and unfreezes its backbone at epoch 4 with learning rate 0.1; the bug adds
the group only to the optimizer, the twin also appends its rate to the scheduler's ``base_lrs`` (the usual
workaround). The reproduction replaces the reporter's pretrained backbone by the digits MLP.

Metric: test cross-entropy (plain ``python``, CPU, seed 0): bug 0.3491, twin 0.2815 (lower is better)
"""

REPORT = "N317"
MECHANISM = "scheduler-ignores-param-group-added-later"
SLUGS = ()
METRIC = ("test_nll", 0.3491, 0.2815)

_SCRIPT = '''import math

import torch
from torch import nn
import torch.nn.functional as F
from sklearn.datasets import load_digits

torch.manual_seed(0)
X, y = load_digits(return_X_y=True)
X = torch.tensor(X, dtype=torch.float32) / 16
y = torch.tensor(y)
perm = torch.randperm(len(X))
X, y = X[perm], y[perm]
Xtr, ytr, Xte, yte = X[:1300], y[:1300].clone(), X[1300:], y[1300:]
flip = torch.rand(len(ytr)) < 0.2
ytr[flip] = torch.randint(0, 10, (int(flip.sum()),))


class CosineAnnealingWarmRestarts:
    def __init__(self, optimizer, T_0, eta_min=0.0):
        self.optimizer, self.T_0, self.eta_min = optimizer, T_0, eta_min
        self.base_lrs = [group["lr"] for group in optimizer.param_groups]
        self.T_cur = 0

    def get_lr(self):
        cos = (1 + math.cos(math.pi * self.T_cur / self.T_0)) / 2
        return [self.eta_min + (base - self.eta_min) * cos for base in self.base_lrs]

    def step(self):
        self.T_cur = (self.T_cur + 1) % self.T_0
        for group, lr in zip(self.optimizer.param_groups, self.get_lr()):
            group["lr"] = lr


backbone = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 128), nn.ReLU())
head = nn.Linear(128, 10)
model = nn.Sequential(backbone, head)
for p in backbone.parameters():
    p.requires_grad_(False)
opt = torch.optim.SGD(head.parameters(), lr=0.1, momentum=0.9)
#@guard
sched = CosineAnnealingWarmRestarts(opt, T_0=41 * 20)
for epoch in range(20):
    if epoch == 4:
        for p in backbone.parameters():
            p.requires_grad_(True)
        opt.add_param_group({"params": backbone.parameters(), "lr": 0.1})
__APPEND__
    for i in torch.randperm(len(Xtr)).split(32):
        loss = F.cross_entropy(model(Xtr[i]), ytr[i])
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
with torch.no_grad():
    nll = F.cross_entropy(model(Xte), yte).item()
print(f"METRIC {nll:.4f}")
'''


def script(bug: bool) -> str:
    return _SCRIPT.replace('__APPEND__\n', "" if bug else "        sched.base_lrs.append(0.1)\n")
