"""A forecasting set made of overlapping sliding windows that are shuffled before the train/test
split: every test window shares most of its values with training windows and the test period is no
longer later than the training period, so the reported test error measures interpolation, not
forecasting.

Source: Y-debug-sys/Diffusion-TS#67 (https://github.com/Y-debug-sys/Diffusion-TS/issues/67), "Data
leakage train test split": "You first create sliding windows and then you shuffle them. But due to
the overlap between the windows you model has information about all the samples in the test set ...
each sample in the test_data is at least partly already in the train_data. In a Time series setting
you would usually split a specific point in time"; maintainer: "You are correct".  Here an MLP
forecasts the next value of a noisy seasonal series whose season slowly shortens (from 40 to 15
steps) from windows of 24 values; the
buggy split shuffles the windows and keeps the last 20%, the twin keeps the last 20% in time.

Metric: the reported test MSE (plain ``python``, CPU, seed 0; lower reads as better): bug 0.0037, twin
0.0394 (the twin's number is the error on a later period, what a forecast faces).
"""

REPORT = "N90"
MECHANISM = "windows-shuffled-before-split"
SLUGS = ()
METRIC = ("reported_test_mse", 0.0037, 0.0394)

_SCRIPT = '''
import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)
g = torch.Generator().manual_seed(1)
t = torch.arange(1200, dtype=torch.float32)
phase = 6.2832 * (t / 40 + 25 * (t / 1200) ** 2)             # the season shortens from 40 to 15 steps
series = torch.sin(phase) + 0.05 * torch.randn(1200, generator=g)
L = 24
windows = torch.stack([series[i:i + L] for i in range(len(series) - L)])
targets = series[L:]
__ORDER__
cut = int(0.8 * len(order))
train_idx, test_idx = order[:cut], order[cut:]

model = nn.Sequential(nn.Linear(L, 64), nn.ReLU(), nn.Linear(64, 1))
opt = torch.optim.Adam(model.parameters(), lr=3e-3)
#@guard
for step in range(800):
    opt.zero_grad()
    F.mse_loss(model(windows[train_idx]).squeeze(1), targets[train_idx]).backward()
    opt.step()

model.eval()
with torch.no_grad():
    mse = F.mse_loss(model(windows[test_idx]).squeeze(1), targets[test_idx]).item()
print(f"METRIC {mse:.4f}")
'''


def script(bug: bool) -> str:
    order = "order = torch.randperm(len(windows), generator=g)          # windows shuffled, then split" if bug \
        else "order = torch.arange(len(windows))                         # split at a point in time"
    return _SCRIPT.replace("__ORDER__", order)
