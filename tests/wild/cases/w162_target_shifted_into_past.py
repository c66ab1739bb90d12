"""A forecasting target built with ``shift(1)`` instead of ``shift(-1)``: the label of each window is
the value just before its end, which is already one of the window's inputs, so the model learns to
copy an input and the reported test error is near zero while nothing about the future is predicted
-- with no error.

Source: KIC/pandas-ml-quant#25 (https://github.com/KIC/pandas-ml-quant/issues/25), "Target variable
is shifted in the wrong direction (example notebook)": "you shift a target variable forward. That
means you predict previous, not future, values ... Adding windows will just include your target value
in the input features, making prediction as simple as just repeating one of the inputs"; maintainer:
"Wow, I can not believe that I have made such a silly mistake".  Here a noisy two-period series of
3000 steps is cut into windows of its last 10 values, the target column is the series shifted, an
MLP is trained on the first 80% of the windows and evaluated on the last 20% (in time order);
the buggy script shifts by 1 (the previous value), the twin by -1 (the next value).

Metric: the reported test mean squared error (plain ``python``, CPU, seed 0): bug 0.0001, twin 0.1172
(the bug reads better: the twin is the error of a real one-step forecast).
"""

REPORT = "N136"
MECHANISM = "target-shifted-into-past"
SLUGS = ()
METRIC = ("reported_test_mse", 0.0001, 0.1172)

_SCRIPT = '''
import numpy as np
import pandas as pd
import torch
from torch import nn

torch.manual_seed(0)
rng = np.random.default_rng(0)
t = np.arange(3000)
df = pd.DataFrame({"value": np.sin(t / 8.0) + 0.5 * np.sin(t / 29.0) + 0.3 * rng.standard_normal(3000)})
for lag in range(10):
    df[f"lag{lag}"] = df["value"].shift(lag)  # the window: the current value and the 9 before it
df["target"] = df["value"].shift(__SHIFT__)
df = df.dropna()
features = torch.tensor(df[[f"lag{lag}" for lag in range(10)]].values, dtype=torch.float32)
target = torch.tensor(df["target"].values, dtype=torch.float32).unsqueeze(1)
cut = int(0.8 * len(df))
x_train, y_train, x_test, y_test = features[:cut], target[:cut], features[cut:], target[cut:]

model = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 1))
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
#@guard
for epoch in range(30):
    perm = torch.randperm(len(x_train))
    for i in range(0, len(perm), 64):
        b = perm[i:i + 64]
        loss = nn.functional.mse_loss(model(x_train[b]), y_train[b])
        opt.zero_grad()
        loss.backward()
        opt.step()

with torch.no_grad():
    mse = nn.functional.mse_loss(model(x_test), y_test).item()
print(f"METRIC {mse:.4f}")
'''


def script(bug: bool) -> str:
    return _SCRIPT.replace("__SHIFT__", "1" if bug else "-1")
