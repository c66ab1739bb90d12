"""A validation loop that draws ``next(iter(val_loader))`` inside its batch loop: every step builds a fresh iterator
over the unshuffled loader and scores its first batch again, so the reported validation accuracy is the accuracy on
the first batch -- with a class-sorted validation set, on one class -- with no error.

Source: wandb/examples#444 (https://github.com/wandb/examples/issues/444): the example's validation loop did
``data = next(iter(val_loader))`` for each of its steps, so "the same (first) batch" is evaluated every time (labels:
bug; maintainer: "we will fix it"). Here an MLP learns 4 overlapping classes of different difficulty, the
validation set is stored sorted by class (as a folder-per-class dataset is) and read by a ``DataLoader`` without
shuffling, and validation accuracy is averaged over the loader's number of steps; the bug draws
``next(iter(val_loader))`` at each step, the twin iterates the loader. The example's model and W&B logging are
replaced by the MLP and a print.

Metric: the reported validation accuracy (plain ``python``, CPU, seed 0): bug 0.5900, twin 0.8680 (the twin's is
the accuracy on the whole validation set)
"""

REPORT = "N297"
MECHANISM = "validation-iterator-recreated-each-step"
SLUGS = ()
METRIC = ("val_accuracy", 0.5900, 0.8680)

_SCRIPT = '''import torch
from torch import nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
CLASSES = 4
centres = torch.tensor([[0.0, 0.0], [0.8, 0.0], [3.0, 3.0], [-3.0, 3.0]])


def sample(n):
    y = torch.randint(0, CLASSES, (n,))
    return centres[y] + 0.6 * torch.randn(n, 2), y


x_val, y_val = sample(2000)
order = y_val.argsort(stable=True)
val_loader = DataLoader(TensorDataset(x_val[order], y_val[order]), batch_size=100, shuffle=False)

model = nn.Sequential(nn.Linear(2, 64), nn.ReLU(), nn.Linear(64, CLASSES))
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
#@guard
for step in range(300):
    x, y = sample(128)
    loss = F.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
correct = 0.0
with torch.no_grad():
    __LOOP__
        correct += (model(x).argmax(1) == y).float().mean().item()
print(f"METRIC {correct / len(val_loader):.4f}")
'''


def script(bug: bool) -> str:
    return _SCRIPT.replace('__LOOP__', """for step in range(len(val_loader)):
        x, y = next(iter(val_loader))""" if bug else 'for x, y in val_loader:')
