"""Regression trained on standardised targets whose predictions are used without undoing the
standardisation: every prediction is in units of standard deviations around zero, not in the
target's units.

Source: CompRhys/aviary#90 (https://github.com/CompRhys/aviary/issues/90), "Normalization during
training, but missing during evaluation / prediction": "The current code normalizes the targets
during training ... but doesn't use the saved normalizer during prediction / evaluation later."
Here an MLP predicts disease progression on scikit-learn's diabetes data (bundled, 442 patients)
from standardised targets; the buggy prediction step returns the network's output, the twin
multiplies by the training targets' standard deviation and adds their mean.

Metric: mean absolute error on held-out patients, in the target's units (lower is better; plain
``python``, CPU, seed 0): bug 153.8501, twin 43.024.
"""

REPORT = "N38"
MECHANISM = "predictions-not-denormalised"
SLUGS = ()
METRIC = ("test_mae", 153.8501, 43.024)

_SCRIPT = '''
import torch
from torch import nn
import torch.nn.functional as F
from sklearn.datasets import load_diabetes
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
data = load_diabetes()
X = torch.tensor(data.data, dtype=torch.float32)
y = torch.tensor(data.target, dtype=torch.float32)
X = (X - X[:350].mean(0)) / X[:350].std(0)
y_mean, y_std = y[:350].mean(), y[:350].std()


class Normalizer:
    def __init__(self, mean, std):
        self.mean, self.std = mean, std

    def norm(self, t):
        return (t - self.mean) / self.std

    def denorm(self, t):
        return t * self.std + self.mean


normalizer = Normalizer(y_mean, y_std)
model = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 1))
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
#@guard
loader = DataLoader(TensorDataset(X[:350], normalizer.norm(y[:350])), batch_size=32, shuffle=True)
for epoch in range(30):
    for xb, yb in loader:
        opt.zero_grad()
        loss = F.mse_loss(model(xb).squeeze(1), yb)
        loss.backward()
        opt.step()


def predict(model, x):
    model.eval()
    with torch.no_grad():
        out = model(x).squeeze(1)
    return __RETURN__


mae = (predict(model, X[350:]) - y[350:]).abs().mean().item()
print(f"METRIC {mae:.4f}")
'''


def script(bug: bool) -> str:
    return _SCRIPT.replace("__RETURN__", "out" if bug else "normalizer.denorm(out)")
