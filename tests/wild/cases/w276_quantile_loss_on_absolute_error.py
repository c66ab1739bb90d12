"""A quantile (pinball) loss computed on the absolute error: ``max(q * |e|, (q - 1) * |e|)`` is always ``q * |e|``,
so the evaluation scores a 0.9-quantile forecast as if every miss were an under-forecast and reports a loss
several times the true one -- with no error.

Source: Nixtla/utilsforecast#63 (https://github.com/Nixtla/utilsforecast/pull/63), a fix of the library's
``quantile_loss``, which took the absolute value of the error before the two-sided maximum, so that the loss no
longer depends on the side of the miss (merged). Here an MLP forecasts the next value of noisy sine series from a
window of 24 past values and is trained with a correct pinball loss at ``q = 0.9``; the test windows are then
scored by a ``quantile_loss`` like the library's: the buggy one takes ``abs`` of the error before the maximum, the
twin does not. The training is the same in both; only the reported number differs. utilsforecast works on pandas
frames; the metric is written in torch.

Metric: the reported test quantile loss at q = 0.9 (plain ``python``, CPU, seed 0): bug 0.4372, twin 0.0625
"""

REPORT = "N250"
MECHANISM = "pinball-loss-on-absolute-error"
SLUGS = ()
METRIC = ("test_quantile_loss", 0.4372, 0.0625)

_SCRIPT = '''import math
import torch
from torch import nn

torch.manual_seed(0)
W, Q = 24, 0.9


def series(n, length=200):
    t = torch.arange(length, dtype=torch.float32)
    period = 12 + 12 * torch.rand(n, 1)
    phase = 2 * math.pi * torch.rand(n, 1)
    return torch.sin(2 * math.pi * t / period + phase) + 0.3 * torch.randn(n, length)


def windows(s):
    x = s.unfold(1, W + 1, 1).reshape(-1, W + 1)
    return x[:, :W], x[:, W]


x_tr, y_tr = windows(series(40))
x_te, y_te = windows(series(10))


def pinball(pred, y, q):
    e = y - pred
    return torch.maximum(q * e, (q - 1) * e).mean()


def quantile_loss(pred, y, q):
    e = y - pred
    e = __ERR__
    return torch.maximum(q * e, (q - 1) * e).mean()


model = nn.Sequential(nn.Linear(W, 64), nn.ReLU(), nn.Linear(64, 1))
opt = torch.optim.Adam(model.parameters(), lr=3e-3)
#@guard
for step in range(300):
    i = torch.randint(0, len(x_tr), (256,))
    loss = pinball(model(x_tr[i]).squeeze(1), y_tr[i], Q)
    opt.zero_grad()
    loss.backward()
    opt.step()
with torch.no_grad():
    ql = quantile_loss(model(x_te).squeeze(1), y_te, Q).item()
print(f"METRIC {ql:.4f}")
'''


def script(bug: bool) -> str:
    return _SCRIPT.replace('__ERR__', 'e.abs()' if bug else 'e')
