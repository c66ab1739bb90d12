"""A recurrent forecaster whose input at step t pairs the previous target value y[t - 1] with the known covariate of
step t + 1 instead of step t: the covariate that drives y[t] arrives one step early, so the network has to carry it
in its state to the next step, and at the first step of every window it never sees it -- the forecasts are worse
and nothing fails.

Source: awslabs/gluonts#2616 (https://github.com/awslabs/gluonts/issues/2616), "Off-by-one bug in PyTorch DeepAR
implementation": "What should happen is that ``time_feat`` at time step **t** should be concatenated with ``target``
at time step **t-1.** But because lags is taken as the input without concatenating the target itself, what is
happening is that ``time_feat`` **t+1** is concatenated with ``target`` **t-1**."; maintainer: "Hi @gorold I think
you're right, thanks for the deep dive!" (labels: bug; fixed by #2618, merged). Here a series follows y[t] = 0.6
y[t - 1] + 2 f[t] + noise with a known noisy weekly covariate f; a GRU reads windows of 24 steps of (y[t - 1],
f[t + shift]) and predicts y[t]; the bug uses shift 1, the twin shift 0. The reproduction replaces DeepAR's lags,
likelihood and sampling by a GRU with a point forecast trained with the squared error, and gives one covariate.

Metric: mean absolute error of the one-step predictions in 8 test windows of 24 steps after step 1000 (plain
``python``, CPU, seed 0, lower is better): bug 0.1795, twin 0.1464
"""

REPORT = "N361"
MECHANISM = "covariate-one-step-ahead-of-lagged-target"
SLUGS = ()
METRIC = ('test_mae', 0.1795, 0.1464)

_SCRIPT = '''import math
import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)
T = 1200
feat = torch.sin(2 * math.pi * torch.arange(T + 1) / 7.0) + 0.8 * torch.randn(T + 1)
y = torch.zeros(T)
for t in range(1, T):
    y[t] = 0.6 * y[t - 1] + 2.0 * feat[t] + 0.2 * torch.randn(())
__SHIFT__C = 24


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = nn.GRU(2, 32, batch_first=True)
        self.out = nn.Linear(32, 1)

    def forward(self, prev_y, f):
        h, _ = self.rnn(torch.stack([prev_y, f], -1))
        return self.out(h).squeeze(-1)


def window(t0):
    ts = torch.arange(t0, t0 + C)
    return y[ts - 1], feat[ts + shift], y[ts]


model = Net()
opt = torch.optim.Adam(model.parameters(), lr=5e-3)
#@guard
for step in range(400):
    starts = torch.randint(1, 1000 - C, (32,))
    py, f, tgt = map(torch.stack, zip(*[window(s) for s in starts.tolist()]))
    loss = F.mse_loss(model(py, f), tgt)
    opt.zero_grad()
    loss.backward()
    opt.step()
with torch.no_grad():
    starts = list(range(1000, T - C, C))
    py, f, tgt = map(torch.stack, zip(*[window(s) for s in starts]))
    mae = (model(py, f) - tgt).abs().mean().item()
print(f"METRIC {mae:.4f}")
'''


def script(bug: bool) -> str:
    s = _SCRIPT
    s = s.replace('__SHIFT__', 'shift = 1\n' if bug
                  else 'shift = 0\n')
    return s
