"""A recursive forecast that builds its lag vector in the opposite order to the training rows: the features
were written most recent first, the forecast slices its chronological history oldest first, so every
coefficient multiplies the wrong lag -- with no error.

Source: rohitg00/ai-engineering-from-scratch#351 (https://github.com/rohitg00/ai-engineering-from-scratch/pull/351),
"fix(phase-02/15): forecast fed the lag vector in reverse order": "`make_lag_features` writes `X[lag:, lag -
1] = series[:-lag]`, so a row is most-recent-first ... `forecast` keeps `history` chronological
(`history.append(pred)`) and sliced it without reversing, so the lag-1 coefficient multiplied the oldest value
and lag-10 the newest. Result: forecast MSE `116.3491` -> `54.5676`" (merged).  Here a linear AR model with 8
lags (an ``nn.Linear`` trained with Adam) is fitted on a noisy sum of two sines and forecasts 10 steps
ahead, recursively, from each of 29 origins in the held-out part of the series; the buggy forecast feeds
``history[-LAGS:]``, the twin flips it.  The lesson fits its AR model in closed form on a synthetic series.

Metric: mean 10-step forecast MSE over the held-out windows (plain ``python``, CPU, seed 0): bug 1.1389, twin
0.3631 (lower is better)
"""

REPORT = "N240"
MECHANISM = "forecast-lag-order-reversed"
SLUGS = ()
METRIC = ("forecast_mse", 1.1389, 0.3631)

_SCRIPT = '''import math
import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)
T, LAGS = 1200, 8
t = torch.arange(T, dtype=torch.float32)
series = torch.sin(2 * math.pi * t / 37) + 0.5 * torch.sin(2 * math.pi * t / 11) + 0.1 * torch.randn(T)
train, test = series[:900], series[900:]


def make_lag_features(y, lags):
    # row t: [y[t-1], y[t-2], ..., y[t-lags]] (most recent first), target y[t]
    X = torch.stack([y[lags - k:len(y) - k] for k in range(1, lags + 1)], dim=1)
    return X, y[lags:]


X, target = make_lag_features(train, LAGS)
model = nn.Linear(LAGS, 1)
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
#@guard
for step in range(1500):
    loss = F.mse_loss(model(X).squeeze(1), target)
    opt.zero_grad()
    loss.backward()
    opt.step()


def forecast(history, steps):
    history = list(history)
    preds = []
    with torch.no_grad():
        for _ in range(steps):
            row = torch.tensor(history[-LAGS:])__ORDER__
            pred = model(row[None]).item()
            preds.append(pred)
            history.append(pred)
    return preds


errors = []
for start in range(0, len(test) - 10, 10):
    hist = torch.cat([train, test[:start]])
    pred = torch.tensor(forecast(hist, 10))
    errors.append(F.mse_loss(pred, test[start:start + 10]).item())
print(f"METRIC {sum(errors) / len(errors):.4f}")
'''


def script(bug: bool) -> str:
    s = _SCRIPT
    s = s.replace('__ORDER__', '' if bug else '.flip(0)')
    return s
