"""A sliding-window data loader whose feature window ends one step too early: the window for the
target at time ``i`` covers ``i - horizon - window .. i - horizon - 1`` instead of ending at
``i - horizon``, so the most recent observation the forecaster is allowed to see is left out.

Source: cmf-team/importance-sampling-2022#53 (https://github.com/cmf-team/importance-sampling-2022/issues/53),
"Incorrect sliding window in dataloader": "It should be `feat_idx.append(range(i-self.horizon-self.window_size+1,
i-self.horizon+1))` instead of `feat_idx.append(range(i-self.horizon-self.window_size, i-self.horizon))`
in Dataloader in data.py" (closed by #70).  Here a one-step-ahead forecaster (an MLP over a window of
8 past values) is trained on a noisy AR(2) series (the first 3000 steps) and tested on the next 1000;
the twin's window ends at ``i - horizon``.

Metric: test mean squared error (plain ``python``, CPU, seed 0; lower is better): bug 0.8589, twin 0.243.
"""

REPORT = "N69"
MECHANISM = "window-misses-latest-step"
SLUGS = ()
METRIC = ("test_mse", 0.8589, 0.243)

_SCRIPT = '''
import torch
from torch import nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(0)
g = torch.Generator().manual_seed(1)
series = torch.zeros(4000)
noise = 0.5 * torch.randn(4000, generator=g)
for t in range(2, 4000):
    series[t] = 1.6 * series[t - 1] - 0.8 * series[t - 2] + noise[t]


class Windows(Dataset):
    def __init__(self, data, window_size=8, horizon=1):
        self.data, self.window_size, self.horizon = data, window_size, horizon
        self.feat_idx, self.target_idx = [], []
        for i in range(window_size + horizon, len(data)):
            self.feat_idx.append(__RANGE__)
            self.target_idx.append(i)

    def __len__(self):
        return len(self.target_idx)

    def __getitem__(self, k):
        return self.data[list(self.feat_idx[k])], self.data[self.target_idx[k]]


train_ds, test_ds = Windows(series[:3000]), Windows(series[3000:])
model = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 1))
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
#@guard
loader = DataLoader(train_ds, batch_size=64, shuffle=True)
for epoch in range(8):
    for xb, yb in loader:
        opt.zero_grad()
        F.mse_loss(model(xb).squeeze(1), yb).backward()
        opt.step()
model.eval()
xt, yt = next(iter(DataLoader(test_ds, batch_size=len(test_ds))))
with torch.no_grad():
    mse = F.mse_loss(model(xt).squeeze(1), yt).item()
print(f"METRIC {mse:.4f}")
'''


def script(bug: bool) -> str:
    return _SCRIPT.replace("__RANGE__", "range(i - self.horizon - self.window_size, i - self.horizon)" if bug
                           else "range(i - self.horizon - self.window_size + 1, i - self.horizon + 1)")
