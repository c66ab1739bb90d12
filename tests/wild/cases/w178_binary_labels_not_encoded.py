"""A binary classifier fitted on labels that are not coded 0 and 1: the class codes 5 and 7 go
straight into ``binary_cross_entropy_with_logits`` as targets 5.0 and 7.0, whose loss keeps falling
as the logit grows for both classes, so every prediction ends on the same class and the accuracy is
the share of that class -- with no error and a loss that goes down.

Source: OpenTabular/DeepTab#409 (https://github.com/OpenTabular/DeepTab/issues/409), "[BUG] Classifier
labels are never encoded to 0..K-1 -- crashes on string labels, silently wrong on non-contiguous
integers": "Binary labels other than {0,1} (e.g. ``{5, 7}``): BCEWithLogitsLoss silently ..." (labels:
bug); the fix (https://github.com/OpenTabular/DeepTab/pull/434): "BCE trains against targets 5.0/7.0 --
perfectly separable data reached **47.75%** accuracy vs 100% with ``{0,1}``".  Here an MLP learns a
separable synthetic table whose classes are coded 5 and 7; predictions are mapped back through the
sorted classes, as the library does.  The buggy script passes the raw codes as targets, the twin their
indices (``np.searchsorted(classes, y)``).

Metric: validation accuracy (plain ``python``, CPU, seed 0): bug 0.5, twin 0.992
"""

REPORT = "N152"
MECHANISM = "labels-not-encoded-as-indices"
SLUGS = ()
METRIC = ("val_accuracy", 0.5, 0.992)

_SCRIPT = '''
import numpy as np
import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)
rng = np.random.default_rng(0)


def make(n):  # a tabular task with two separable classes coded 5 and 7 (e.g. grades read from a CSV)
    x = rng.normal(size=(n, 8)).astype(np.float32)
    y = np.where(x[:, 0] + 0.5 * x[:, 1] - 0.3 * x[:, 2] > 0, 7, 5)
    return x, y


x_train, y_train = make(2000)
x_val, y_val = make(500)
classes = np.unique(y_train)  # array([5, 7]): predictions are mapped back through it


def targets(y):
    return __TARGETS__


model = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 1))
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
xt, yt = torch.tensor(x_train), targets(y_train)
#@guard
for epoch in range(20):
    for i in range(0, 2000, 100):
        loss = F.binary_cross_entropy_with_logits(model(xt[i:i + 100]).squeeze(1), yt[i:i + 100])
        opt.zero_grad()
        loss.backward()
        opt.step()

with torch.no_grad():
    prob = torch.sigmoid(model(torch.tensor(x_val)).squeeze(1)).numpy()
pred = classes[(prob > 0.5).astype(int)]
print(f"METRIC {(pred == y_val).mean():.4f}")
'''


def script(bug: bool) -> str:
    return _SCRIPT.replace("__TARGETS__", "torch.tensor(y, dtype=torch.float32)" if bug
                           else "torch.tensor(np.searchsorted(classes, y), dtype=torch.float32)")
