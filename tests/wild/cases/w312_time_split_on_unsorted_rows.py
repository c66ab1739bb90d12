"""A per-series train/test split that takes each series' last rows as the test window without sorting by time: on a
frame whose rows are not in time order, the "test" rows are random time steps inside the training period, the
model interpolates instead of forecasting, and the reported error is far below the true forecasting error -- with
no error.

Source: autogluon/autogluon#4257 (https://github.com/autogluon/autogluon/issues/4257), "TimeSeriesDataFrame
.train_test_split produces incorrect split when unsorted in time": "The ``TimeSeriesDataFrame.train_test_split``
method produces train sets which may include test set timestamps when the dataframe is unsorted in time" (labels:
bug, module: timeseries). Here 20 noisy sinusoids with trends (60 steps each) sit in a shuffled ``pandas`` frame;
``train_test_split`` keeps ``groupby(item_id).tail(8)`` as the test set, unsorted in the bug and after sorting by
``(item_id, timestamp)`` in the twin; an MLP on (item embedding, time) is fitted and scored. AutoGluon's
``TimeSeriesDataFrame`` is replaced by the plain frame.

Metric: the reported test mean absolute error (plain ``python``, CPU, seed 0): bug 0.1095, twin 0.7050 (the bug's
number is an interpolation error; the true forecasting error is the twin's)
"""

REPORT = "N286"
MECHANISM = "series-split-by-row-order-not-time"
SLUGS = ()
METRIC = ("test_mae", 0.1095, 0.7050)

_SCRIPT = '''import numpy as np
import pandas as pd
import torch
from torch import nn

torch.manual_seed(0)
rng = np.random.default_rng(0)
ITEMS, STEPS, HORIZON = 20, 60, 8
rows = []
for item in range(ITEMS):
    phase, slope = rng.uniform(0, 6.28), rng.uniform(-0.05, 0.05)
    for t in range(STEPS):
        rows.append((item, t, np.sin(0.3 * t + phase) + slope * t + 0.05 * rng.normal()))
df = pd.DataFrame(rows, columns=["item_id", "timestamp", "target"]).sample(frac=1.0, random_state=0)


def train_test_split(frame, prediction_length):
    __ORDER__
    test = frame.groupby("item_id").tail(prediction_length)
    train = frame.drop(test.index)
    return train, test


train, test = train_test_split(df, HORIZON)


def tensors(frame):
    item = torch.tensor(frame["item_id"].values)
    t = torch.tensor(frame["timestamp"].values, dtype=torch.float32)[:, None] / STEPS
    return item, t, torch.tensor(frame["target"].values, dtype=torch.float32)


class Forecaster(nn.Module):
    def __init__(self):
        super().__init__()
        self.item = nn.Embedding(ITEMS, 8)
        self.net = nn.Sequential(nn.Linear(9, 64), nn.Tanh(), nn.Linear(64, 64), nn.Tanh(), nn.Linear(64, 1))

    def forward(self, item, t):
        return self.net(torch.cat([self.item(item), t], 1)).squeeze(1)


model = Forecaster()
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
item, t, y = tensors(train)
#@guard
for step in range(600):
    loss = ((model(item, t) - y) ** 2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
with torch.no_grad():
    item, t, y = tensors(test)
    mae = (model(item, t) - y).abs().mean().item()
print(f"METRIC {mae:.4f}")
'''


def script(bug: bool) -> str:
    return _SCRIPT.replace('__ORDER__', 'pass' if bug else 'frame = frame.sort_values(["item_id", "timestamp"])')
