"""A tabular model trained through a loader with ``drop_last=True`` and a batch size larger than
the training set: the only batch is incomplete and dropped, every epoch runs zero steps, and the
"trained" model is the initial one -- with no error.

Source: dreamquark-ai/tabnet#537 (https://github.com/dreamquark-ai/tabnet/issues/537), "Maybe
`drop_last` should be set as False in default?": "the training process behave really weird, showing
that the loss is 0.0, and the weights are unchanged since epoch 1 ... I have a small dataset size,
which is smaller than default batch_size (1024). And, you also set the `drop_last` to True in
default, resulting dropping the only batch I had. No error was showing when I encountered this
issue."  Here an MLP is trained for 60 epochs on the 142 training rows of scikit-learn's wine data
(standardised) with the library-style default ``batch_size=1024``; the twin's loader keeps the last
batch.

Metric: validation accuracy (plain ``python``, CPU, seed 0): bug 0.4167, twin 0.9444.
"""

REPORT = "N85"
MECHANISM = "loader-drops-every-batch"
SLUGS = ()
METRIC = ("val_accuracy", 0.4167, 0.9444)

_SCRIPT = '''
import torch
from torch import nn
import torch.nn.functional as F
from sklearn.datasets import load_wine
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
wine = load_wine()
X = torch.tensor(wine.data, dtype=torch.float32)
Y = torch.tensor(wine.target)
perm = torch.randperm(len(X), generator=torch.Generator().manual_seed(1))
X, Y = X[perm], Y[perm]
mean, std = X[:142].mean(0), X[:142].std(0)
X = (X - mean) / std
train_ds = TensorDataset(X[:142], Y[:142])

model = nn.Sequential(nn.Linear(13, 32), nn.ReLU(), nn.Linear(32, 3))
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
#@guard
loader = DataLoader(train_ds, batch_size=1024, shuffle=True, drop_last=__DROP__)
for epoch in range(60):
    for xb, yb in loader:
        opt.zero_grad()
        F.cross_entropy(model(xb), yb).backward()
        opt.step()

model.eval()
with torch.no_grad():
    acc = (model(X[142:]).argmax(1) == Y[142:]).float().mean().item()
print(f"METRIC {acc:.4f}")
'''


def script(bug: bool) -> str:
    return _SCRIPT.replace("__DROP__", "True" if bug else "False")
