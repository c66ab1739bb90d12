"""Two per-series scalers built with no argument share one default statistics object (a mutable default argument
evaluated once), so fitting the second scaler overwrites the first one's minimum and maximum: the first series is
scaled back with the second series' range, and its forecasts come out in the wrong units -- without an error.

Source: unit8co/darts#314 (https://github.com/unit8co/darts/issues/314), "Bug when using multiple Scalers constructed
with no arguments": "After learning and transforming multiple time series data by using the fit_transform function
of multiple Scaler objects constructed with no arguments, if we try to restore each time series by using the
inverse_transform function, the original time series will not be restored except for the last learned time series"
(the reporter's reproduction with two series and two `Scaler()`s; closed). Here two series of very different levels
(about 0-10 and about 1000-5000) are min-max scaled by one scaler each, a small MLP learns one-step forecasts from
windows of 12 scaled values of both series, and series 1's last 50 steps are forecast from its scaled past and
scaled back; in the bug ``Scaler.__init__`` takes ``stats=RangeStats()`` as a default argument, in the twin it
builds a new ``RangeStats()`` per scaler. The reproduction writes the scaler in a few lines in place of darts'
``Scaler`` and sklearn's ``MinMaxScaler`` and replaces darts' models by the MLP.

Metric: mean absolute error of series 1's one-step forecasts in its own units (plain ``python``, CPU, seed 0, lower
is better): bug 1497.7992, twin 0.3294
"""

REPORT = "N356"
MECHANISM = "scalers-share-default-statistics-object"
SLUGS = ()
METRIC = ('test_mae_series_one', 1497.7992, 0.3294)

_SCRIPT = '''import math
import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)
t = torch.arange(600, dtype=torch.float32)
series_1 = 5 + 4 * torch.sin(2 * math.pi * t / 25) + 0.3 * torch.randn(600)
series_2 = 3000 + 1500 * torch.sin(2 * math.pi * t / 40 + 1) + 100 * torch.randn(600)


class RangeStats:
    def fit(self, x):
        self.low, self.high = x.min(), x.max()

    def transform(self, x):
        return (x - self.low) / (self.high - self.low)

    def inverse(self, x):
        return x * (self.high - self.low) + self.low


class Scaler:
__INIT__

    def fit_transform(self, x):
        self.stats.fit(x)
        return self.stats.transform(x)

    def transform(self, x):
        return self.stats.transform(x)

    def inverse_transform(self, x):
        return self.stats.inverse(x)


W = 12
scaler_1, scaler_2 = Scaler(), Scaler()
train_1 = scaler_1.fit_transform(series_1[:550])
train_2 = scaler_2.fit_transform(series_2[:550])


def windows(s):
    idx = torch.arange(len(s) - W)
    return torch.stack([s[i:i + W] for i in idx]), s[idx + W]


x1, y1 = windows(train_1)
x2, y2 = windows(train_2)
X, Y = torch.cat([x1, x2]), torch.cat([y1, y2])
model = nn.Sequential(nn.Linear(W, 64), nn.ReLU(), nn.Linear(64, 1))
opt = torch.optim.Adam(model.parameters(), lr=3e-3)
#@guard
for step in range(1500):
    i = torch.randint(0, len(Y), (64,))
    loss = F.mse_loss(model(X[i]).squeeze(1), Y[i])
    opt.zero_grad()
    loss.backward()
    opt.step()
with torch.no_grad():
    scaled = scaler_1.transform(series_1)
    ctx = torch.stack([scaled[i - W:i] for i in range(550, 600)])
    pred = scaler_1.inverse_transform(model(ctx).squeeze(1))
    mae = (pred - series_1[550:600]).abs().mean().item()
print(f"METRIC {mae:.4f}")
'''


def script(bug: bool) -> str:
    init = ('    def __init__(self, stats=RangeStats()):\n        self.stats = stats' if bug
            else '    def __init__(self, stats=None):\n'
                 '        self.stats = stats if stats is not None else RangeStats()')
    return _SCRIPT.replace('__INIT__', init)
