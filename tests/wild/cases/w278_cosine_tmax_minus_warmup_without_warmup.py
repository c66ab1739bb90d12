"""A cosine schedule whose ``T_max`` is the total number of steps minus the warmup steps, stepped from the first step
with no warmup in front of it: the learning rate reaches zero before the run ends and then climbs back up, so
training ends at a large learning rate instead of a small one -- with no error.

Source: Tencent-Hunyuan/UniRL#223 (https://github.com/Tencent-Hunyuan/UniRL/pull/223), a fix of the trainer's
schedule: ``CosineAnnealingLR`` was built with ``T_max = total_steps - warmup_steps`` although no warmup scheduler
ran before it, so the learning rate hit zero ``warmup_steps`` before the end and rebounded (merged, with a table
of the learning rates before and after). Here an MLP is trained on digits with 20% of the training labels replaced
at random, by SGD with momentum at a high learning rate for 600 steps with 300 "warmup" steps configured; the
buggy scheduler gets ``T_max = 600 - 300`` and runs for all 600 steps, the twin gets ``T_max = 600``.

Metric: validation accuracy (plain ``python``, CPU, seed 0): bug 0.8111, twin 0.9270
"""

REPORT = "N252"
MECHANISM = "cosine-horizon-shortened-by-absent-warmup"
SLUGS = ()
METRIC = ("val_accuracy", 0.8111, 0.9270)

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
Y_tr = Y.clone()
noisy = tr[torch.rand(len(tr)) < 0.2]
Y_tr[noisy] = torch.randint(0, 10, (len(noisy),))

total_steps, warmup_steps = 600, 300
model = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 10))
opt = torch.optim.SGD(model.parameters(), lr=0.5, momentum=0.9)
sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=__TMAX__)
#@guard
for step in range(total_steps):
    i = tr[torch.randint(0, len(tr), (64,))]
    loss = F.cross_entropy(model(X[i]), Y_tr[i])
    opt.zero_grad()
    loss.backward()
    opt.step()
    sched.step()
with torch.no_grad():
    acc = (model(X[va]).argmax(1) == Y[va]).float().mean().item()
print(f"METRIC {acc:.4f}")
'''


def script(bug: bool) -> str:
    return _SCRIPT.replace('__TMAX__', 'total_steps - warmup_steps' if bug else 'total_steps')
