"""Monte Carlo dropout sampled after ``model.eval()``: every dropout layer is off, the T stochastic
passes are T copies of one deterministic pass, and the uncertainty (their variance) is zero for every
input, so it cannot tell a likely error from a sure answer -- with no error.

Source: TiagoCortinhal/SalsaNext#40 (https://github.com/TiagoCortinhal/SalsaNext/issues/40), "Set
dropout to training in monte-carlo mode while inference": "if you don't do dropout in inference, the
result will stay the same right? Then the variance will always be 0."; maintainer: "Oh yes! I see
what you mean. I lapse from my side. Same for the issue (both fixed)".  Here an MLP with dropout is
trained on 300 digits and evaluated on the 397 held-out ones with 20 Monte Carlo passes; the
uncertainty of a prediction is the variance of the predicted class's probability over the passes.
The buggy script samples in eval mode, the twin switches the dropout layers back to training mode
for the passes (as the fix does).

Metric: how well the uncertainty ranks wrong predictions above right ones, the area under the ROC
curve of error detection (plain ``python``, CPU, seed 0): bug 0.5, twin 0.8269
"""

REPORT = "N140"
MECHANISM = "mc-dropout-sampled-in-eval-mode"
SLUGS = ()
METRIC = ("error_detection_auroc", 0.5, 0.8269)

_SCRIPT = '''
import torch
from torch import nn
import torch.nn.functional as F
from sklearn.datasets import load_digits
from sklearn.metrics import roc_auc_score

torch.manual_seed(0)
d = load_digits()
X = torch.tensor(d.data, dtype=torch.float32) / 16.0
Y = torch.tensor(d.target)
x_train, y_train, x_test, y_test = X[:300], Y[:300], X[1400:], Y[1400:]

model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Dropout(0.5), nn.Linear(128, 128), nn.ReLU(),
                      nn.Dropout(0.5), nn.Linear(128, 10))
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
#@guard
for epoch in range(60):
    perm = torch.randperm(300)
    for i in range(0, 300, 32):
        b = perm[i:i + 32]
        loss = F.cross_entropy(model(x_train[b]), y_train[b])
        opt.zero_grad()
        loss.backward()
        opt.step()

model.eval()
__MC_MODE__
with torch.no_grad():
    probs = torch.stack([F.softmax(model(x_test), dim=1) for _ in range(20)])  # (T, N, classes)
mean = probs.mean(0)
pred = mean.argmax(1)
uncertainty = probs[:, torch.arange(len(pred)), pred].var(0)
wrong = (pred != y_test).long()
print(f"METRIC {roc_auc_score(wrong.numpy(), uncertainty.numpy()):.4f}")
'''

_DROPOUT_ON = """for m in model.modules():
    if isinstance(m, nn.Dropout):
        m.train()  # Monte Carlo dropout: sample the dropout masks at inference"""


def script(bug: bool) -> str:
    return _SCRIPT.replace("__MC_MODE__", "" if bug else _DROPOUT_ON)
