"""Reversible instance normalisation whose partially-observed branch only centres the series but whose
inverse still multiplies by the standard deviation: the network sees every sensor at its own raw
scale yet its outputs are stretched by each series' spread, so it can only guess how much to shrink
them, and the forecasts of quiet and loud sensors are both off -- with no error.

Source: WenjieDu/PyPOTS#453 (https://github.com/WenjieDu/PyPOTS/issues/453), "Bug in RevIN for POTS
data": "As shown below, for POTS data case, ``x = x / self.stdev`` is not applied ... Normalization
process has not been finished for POTS data case" (labels: bug; filed by the maintainer).  Here an MLP
forecasts 12 steps of sinusoidal sensor series whose levels and scales differ by orders of magnitude,
from 48 context steps with 20% of the readings missing (statistics over observed values, the mask fed
to the model).  The buggy ``normalize`` lacks the ``x = x / self.stdev`` line, the twin has it;
``denormalize`` is the same in both.

Metric: validation forecast MSE in units of each series' standard deviation (plain ``python``, CPU,
seed 0; lower is better): bug 0.2756, twin 0.045
"""

REPORT = "N160"
MECHANISM = "normalisation-not-mirrored-by-inverse"
SLUGS = ()
METRIC = ("val_scaled_mse", 0.2756, 0.045)

_SCRIPT = '''
import math

import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)
g = torch.Generator().manual_seed(1)
CTX, H = 48, 12


def sensors(n):
    """Series of very different levels and scales, 20% of the context readings missing."""
    t = torch.arange(CTX + H, dtype=torch.float32)
    level = 50 * torch.randn(n, 1, generator=g)
    scale = torch.exp(torch.empty(n, 1).uniform_(math.log(0.2), math.log(10.0), generator=g))
    freq = 0.1 + 0.3 * torch.rand(n, 1, generator=g)
    y = level + scale * (torch.sin(freq * t) + 0.1 * torch.randn(n, CTX + H, generator=g))
    observed = (torch.rand(n, CTX, generator=g) > 0.2).float()
    return y[:, :CTX], observed, y[:, CTX:]


class RevIN(nn.Module):
    """Reversible instance normalisation for partially observed series (statistics of observed values)."""

    def normalize(self, x, mask):
        n = mask.sum(1, keepdim=True)
        self.mean = (x * mask).sum(1, keepdim=True) / n
        self.stdev = (((x - self.mean) * mask) ** 2).sum(1, keepdim=True).div(n).add(1e-5).sqrt()
        x = x - self.mean
        __SCALE__
        return x * mask

    def denormalize(self, y):
        return y * self.stdev + self.mean


revin = RevIN()
model = nn.Sequential(nn.Linear(2 * CTX, 128), nn.ReLU(), nn.Linear(128, H))
x_train, m_train, y_train = sensors(4000)
x_val, m_val, y_val = sensors(500)
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
#@guard
for epoch in range(15):
    for i in range(0, 4000, 100):
        x, m = x_train[i:i + 100], m_train[i:i + 100]
        pred = revin.denormalize(model(torch.cat([revin.normalize(x, m), m], 1)))
        loss = F.mse_loss(pred / revin.stdev, y_train[i:i + 100] / revin.stdev)  # scale-free training loss
        opt.zero_grad()
        loss.backward()
        opt.step()

with torch.no_grad():
    pred = revin.denormalize(model(torch.cat([revin.normalize(x_val, m_val), m_val], 1)))
    nmse = (((pred - y_val) / revin.stdev) ** 2).mean().item()
print(f"METRIC {nmse:.4f}")
'''


def script(bug: bool) -> str:
    return _SCRIPT.replace("        __SCALE__\n", "" if bug else "        x = x / self.stdev\n")
