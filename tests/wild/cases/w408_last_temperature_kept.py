"""Temperature scaling that keeps the temperature the optimiser ended on rather than the best one it saw: on a
validation set the classifier separates perfectly, the likelihood keeps improving as the temperature goes to zero,
LBFGS (no line search) steps past zero, and the calibrated model divides its logits by a large negative temperature,
reversing its ranking -- nothing fails.

Source: autogluon/autogluon#4396 (https://github.com/autogluon/autogluon/pull/4396): temperature scaling keeps the
last temperature of the optimiser rather than the best one; the failure shown: "Temp After Tuning: -1242.18", ROC
AUC 0.915 -> 0.099 (labels: bug, priority 0; merged: the fix keeps the temperature of the lowest loss). Here an MLP
separates the digits 3 and 8 (150 training digits), a temperature is fitted by ``torch.optim.LBFGS`` (its default
step size 1, 50 iterations) on the logits of 100 validation digits, and the test digits are scored with the
calibrated probabilities; the bug uses the temperature LBFGS ends on, the twin the one of the lowest validation loss.
The reproduction replaces AutoGluon's tabular models by an MLP on digits.

Metric: ROC AUC of the calibrated probability of an 8 on the 107 test digits (plain ``python``, CPU, seed 0): bug
0.0, twin 1.0
"""

REPORT = "N382"
MECHANISM = "last-temperature-kept-not-best"
SLUGS = ()
METRIC = ('test_auc', 0.0, 1.0)

_SCRIPT = '''import torch
from torch import nn
import torch.nn.functional as F
from sklearn.datasets import load_digits

torch.manual_seed(0)
X, y = load_digits(return_X_y=True)
X = torch.tensor(X, dtype=torch.float32) / 16.0
keep = (torch.tensor(y) == 3) | (torch.tensor(y) == 8)
X, y = X[keep], (torch.tensor(y)[keep] == 8).long()
perm = torch.randperm(len(y))
tr, va, te = perm[:150], perm[150:250], perm[250:]
model = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 2))
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
#@guard
for step in range(300):
    loss = F.cross_entropy(model(X[tr]), y[tr])
    opt.zero_grad()
    loss.backward()
    opt.step()
with torch.no_grad():
    val_logits, test_logits = model(X[va]), model(X[te])
temperature = nn.Parameter(torch.ones(1))
t_opt = torch.optim.LBFGS([temperature], max_iter=50)
best = {'loss': float('inf'), 't': 1.0}


def closure():
    t_opt.zero_grad()
    loss = F.cross_entropy(val_logits / temperature, y[va])
    loss.backward()
    if loss.item() < best['loss']:
        best['loss'], best['t'] = loss.item(), temperature.item()
    return loss


t_opt.step(closure)
__T__probs = F.softmax(test_logits / t, 1)[:, 1]
pos, neg = probs[y[te] == 1], probs[y[te] == 0]
auc = (pos[:, None] > neg[None, :]).float().mean().item()
print(f"METRIC {auc:.4f}")
'''


def script(bug: bool) -> str:
    t = 't = temperature.item()\n' if bug else "t = best['t']\n"
    return _SCRIPT.replace('__T__', t)
