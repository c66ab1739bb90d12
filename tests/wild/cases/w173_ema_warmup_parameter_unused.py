"""A model EMA whose warm-up parameter ``tau`` is stored but never used: the decay is its final value
(0.9998) from the first update, so after a short run the averaged model is still mostly the random
initialisation and evaluates far below the trained model -- with no error.

Source: roboflow/rf-detr#59 (https://github.com/roboflow/rf-detr/pull/59), "ensure tau gets used when
computing decay": "Tau wasn't getting used when computing EMA. Fixed ... verified EMA decay now
changes with tau and seeing much better EMA results, esp early in training".  Here an MLP is trained
on digits for 10 epochs (220 steps) with a ``ModelEMA`` of decay 0.9998 and warm-up ``tau`` 100, and
the EMA model is evaluated, as detection trainers do; the buggy update uses ``self.decay``, the twin
``self.decay * (1 - exp(-updates / tau))``.

Metric: validation accuracy of the EMA model (plain ``python``, CPU, seed 0): bug 0.1134, twin 0.864
"""

REPORT = "N147"
MECHANISM = "ema-warmup-ignored"
SLUGS = ()
METRIC = ("ema_val_accuracy", 0.1134, 0.864)

_SCRIPT = '''
import copy
import math

import torch
from torch import nn
import torch.nn.functional as F
from sklearn.datasets import load_digits

torch.manual_seed(0)
d = load_digits()
X = torch.tensor(d.data, dtype=torch.float32) / 16.0
Y = torch.tensor(d.target)


class ModelEMA:
    def __init__(self, model, decay=0.9998, tau=100):
        self.module = copy.deepcopy(model).eval()
        self.decay, self.tau, self.updates = decay, tau, 0
        for p in self.module.parameters():
            p.requires_grad_(False)

    def update(self, model):
        self.updates += 1
        d = __DECAY__
        with torch.no_grad():
            for e, m in zip(self.module.state_dict().values(), model.state_dict().values()):
                e.mul_(d).add_(m.detach(), alpha=1 - d)


model = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10))
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
ema = ModelEMA(model)
#@guard
for epoch in range(10):
    order = torch.randperm(1400)
    for i in range(0, 1400, 64):
        b = order[i:i + 64]
        loss = F.cross_entropy(model(X[b]), Y[b])
        opt.zero_grad()
        loss.backward()
        opt.step()
        ema.update(model)

with torch.no_grad():
    acc = (ema.module(X[1400:]).argmax(1) == Y[1400:]).float().mean().item()
print(f"METRIC {acc:.4f}")
'''


def script(bug: bool) -> str:
    decay = "self.decay" if bug else "self.decay * (1 - math.exp(-self.updates / self.tau))"
    return _SCRIPT.replace("__DECAY__", decay)
