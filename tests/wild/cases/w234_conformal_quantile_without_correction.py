"""Split-conformal prediction intervals whose quantile of the calibration scores omits the finite-sample
correction: the plain ``(1 - alpha)`` quantile of ``n`` residuals is used instead of the ``ceil((n + 1)(1 -
alpha))``-th smallest, so with a small calibration set the intervals are too narrow and cover less than the
promised ``1 - alpha`` -- with no error.

Source: scikit-learn-contrib/MAPIE#452 (https://github.com/scikit-learn-contrib/MAPIE/issues/452), "Coverage
validity not verified in MapieRegressor when the number of calibration data is very small" (labels: bug): "In
`MapieReggresor`, the quantile calculation does not allow us to check the coverage validity when the number
of calibration data is very small ... Expected behavior: Use the corrected quantile (⌈(n+1)(1−α)⌉/n) to check
the validity of the coverage for any number of calibration data"; fixed by #453 ("FIX bug #452: Quantile
Correction", merged).  Here an MLP regressor is trained on synthetic heteroscedastic data, and 90% intervals
are calibrated on 9 held-out points, 400 times over (fresh calibration points each time), each interval
set scored on 500 test points.  The buggy quantile is ``torch.quantile(scores, 1 - alpha)``, the twin's the
``ceil((n + 1) * (1 - alpha))``-th smallest score.

Metric: mean empirical coverage of the 90% intervals (plain ``python``, CPU, seed 0): bug 0.8330, twin 0.9036
"""

REPORT = "N208"
MECHANISM = "conformal-quantile-without-finite-sample-correction"
SLUGS = ()
METRIC = ("interval_coverage", 0.8330, 0.9036)

_SCRIPT = '''
import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)


def sample(n):
    x = torch.rand(n, 1) * 4 - 2
    return x, torch.sin(2 * x) + (0.1 + 0.2 * x.abs()) * torch.randn(n, 1)


Xtr, Ytr = sample(1000)
model = nn.Sequential(nn.Linear(1, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 1))
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
#@guard
for it in range(500):
    loss = F.mse_loss(model(Xtr), Ytr)
    opt.zero_grad()
    loss.backward()
    opt.step()

alpha, n = 0.1, 9
coverages = []
with torch.no_grad():
    for rep in range(400):
        xc, yc = sample(n)
        scores = (model(xc) - yc).abs().flatten()
        __QUANTILE__
        xt, yt = sample(500)
        coverages.append(((model(xt) - yt).abs() <= q).float().mean().item())
print(f"METRIC {sum(coverages) / len(coverages):.4f}")
'''

_BUG = "q = torch.quantile(scores, 1 - alpha)"
_TWIN = "q = scores.sort().values[int(torch.tensor((n + 1) * (1 - alpha)).ceil()) - 1]"


def script(bug: bool) -> str:
    return _SCRIPT.replace("__QUANTILE__", _BUG if bug else _TWIN)
