"""An Adam optimizer constructed anew at the start of every epoch: its moment estimates and step count are
thrown away each time, so every epoch opens with Adam's bias-corrected first steps (about ``lr`` per weight,
in the sign of the gradient) and training never settles -- with no error.

Source: alan-turing-institute/deepsensor#47 (https://github.com/alan-turing-institute/deepsensor/issues/47),
"Maintain optimiser object during training": "Currently, `deepsensor.train.train_epoch` re-instantiates the
Adam optimiser object at the start of each epoch. This is sub-optimal because it loses the momentum
information gathered from previous training epochs"; the maintainer's fix (a `Trainer` class that keeps the
optimizer): "Using `Trainer` improves the training loss and also decreases the spread of the loss after the
initial epochs by ~20%".  Here an MLP is trained on scikit-learn's digits with a ``train_epoch(model, data,
lr)`` helper written like the report's (two large batches per epoch, 80 epochs).  The buggy helper builds
``torch.optim.Adam`` inside, the twin receives the optimizer built once.

Metric: validation cross-entropy after training (plain ``python``, CPU, seed 0): bug 2.5901, twin 0.4364 (lower
is better)
"""

REPORT = "N200"
MECHANISM = "optimizer-rebuilt-every-epoch"
SLUGS = ()
METRIC = ("val_loss", 2.5901, 0.4364)

_SCRIPT = '''
import torch
from torch import nn
import torch.nn.functional as F
from sklearn.datasets import load_digits

torch.manual_seed(0)
d = load_digits()
X = torch.tensor(d.data, dtype=torch.float32) / 16.0
Y = torch.tensor(d.target)
Xtr, Ytr, Xva, Yva = X[:1400], Y[:1400], X[1400:], Y[1400:]
model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))
opt = torch.optim.Adam(model.parameters(), lr=5e-2)


def train_epoch(model, opt, lr=5e-2, batch_size=700):
    __OPT__
    perm = torch.randperm(len(Xtr))
    for i in range(0, len(Xtr), batch_size):
        b = perm[i:i + batch_size]
        loss = F.cross_entropy(model(Xtr[b]), Ytr[b])
        opt.zero_grad()
        loss.backward()
        opt.step()


#@guard
for epoch in range(80):
    train_epoch(model, opt)

with torch.no_grad():
    val_loss = F.cross_entropy(model(Xva), Yva)
print(f"METRIC {val_loss.item():.4f}")
'''


def script(bug: bool) -> str:
    line = "opt = torch.optim.Adam(model.parameters(), lr=lr)" if bug else "pass"
    return _SCRIPT.replace("__OPT__", line)
