"""In-context covariate regression fitted once over the whole batch of forecasting windows: when the windows of
a batch are consecutive stretches of one series, each later window's context contains the earlier windows'
forecast horizons, so the shared regression is fitted on the very values it is asked to forecast for the
earlier windows -- and the reported error reads far better than a forecaster can do, with no error.

Source: google-research/timesfm#338 (https://github.com/google-research/timesfm/issues/338),
"forecast_with_covariates() may have the problem of test data leakage": "when there was a sequence relationship
among the time series in the test set, xreg would leak the context information of the subsequent time series to
the previous one, thereby making the prediction results of the previous time series exceptionally good";
maintainer: "That's a good point. As of now, I can only think of batch_size=1 inference as a quick fix"; fixed by
a pull request that "fits independent ridge regressions per input instead of one across the whole batch".  Here
the series has a price covariate and calendar covariates, the forecast of each window is TimesFM's "xreg +
timesfm" form (a ridge regression of the series on the covariates fitted in context, plus a small MLP's
forecast of the remaining residual, 48 steps of context, 12 of horizon), and 16 consecutive test windows
(stride 12) form one batch.  The buggy forecast fits one ridge on the contexts of all 16 windows, the twin one
per window on its own context.

Metric: mean absolute error on the test horizons (plain ``python``, CPU, seed 0): bug 0.1773, twin 0.8651 (lower is
better; the bug reads better)
"""

REPORT = "N198"
MECHANISM = "covariate-regression-fitted-across-batch-windows"
SLUGS = ()
METRIC = ("reported_test_mae", 0.1773, 0.8651)

_SCRIPT = '''
import math
import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)
g = torch.Generator().manual_seed(1)
N, C, H = 660, 48, 12
t = torch.arange(N, dtype=torch.float32)
price = torch.cumsum(torch.randn(N, generator=g) * 0.1, 0)
calendar = torch.cat([torch.stack([torch.sin(2 * math.pi * k * t / 64), torch.cos(2 * math.pi * k * t / 64)], 1)
                      for k in range(1, 13)], 1)
covariates = torch.cat([price[:, None], calendar], 1)
series = (torch.sin(t / 7) + 0.5 * torch.sin(t / 3.3) + 0.8 * price
          + 0.3 * torch.sin(2 * math.pi * 5 * t / 64 + 1.0) + 0.1 * torch.randn(N, generator=g))


def ridge(x, y, lam=1e-2):
    x1 = torch.cat([x, torch.ones(len(x), 1)], 1)
    return torch.linalg.solve(x1.T @ x1 + lam * torch.eye(x1.shape[1]), x1.T @ y)


def apply(w, x):
    return torch.cat([x, torch.ones(len(x), 1)], 1) @ w


# the forecaster learns the part of the series the covariates do not explain (TimesFM's "xreg + timesfm")
w_train = ridge(covariates[:400], series[:400])
resid = series - apply(w_train, covariates)
train_starts = torch.arange(0, 400 - C - H)
model = nn.Sequential(nn.Linear(C, 64), nn.ReLU(), nn.Linear(64, H))
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
#@guard
for epoch in range(300):
    ctx = torch.stack([resid[s:s + C] for s in train_starts])
    tgt = torch.stack([resid[s + C:s + C + H] for s in train_starts])
    loss = F.mse_loss(model(ctx), tgt)
    opt.zero_grad()
    loss.backward()
    opt.step()

starts = [400 + 12 * i for i in range(16)]  # one batch of consecutive windows
__FIT__
errors = []
with torch.no_grad():
    for i, s in enumerate(starts):
        ctx_resid = series[s:s + C] - apply(weights[i], covariates[s:s + C])
        forecast = apply(weights[i], covariates[s + C:s + C + H]) + model(ctx_resid[None])[0]
        errors.append((forecast - series[s + C:s + C + H]).abs().mean().item())
print(f"METRIC {sum(errors) / len(errors):.4f}")
'''

_BUG = """w = ridge(torch.cat([covariates[s:s + C] for s in starts]), torch.cat([series[s:s + C] for s in starts]))
weights = [w] * len(starts)"""
_TWIN = """weights = [ridge(covariates[s:s + C], series[s:s + C]) for s in starts]"""


def script(bug: bool) -> str:
    return _SCRIPT.replace("__FIT__", _BUG if bug else _TWIN)
