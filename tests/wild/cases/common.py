"""Shared pieces of the wild cases' scripts: the digits data and a plain training loop.

Each case writes its own script from these pieces, changing only what its report is about,
so that the buggy script and its correct twin differ in the bug and nothing else.
"""

from __future__ import annotations

PRELUDE = '''
import torch
from torch import nn
import torch.nn.functional as F
from sklearn.datasets import load_digits
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
_digits = load_digits()
X = torch.tensor(_digits.data, dtype=torch.float32) / 16.0
Y = torch.tensor(_digits.target)
train_ds = TensorDataset(X[:1400], Y[:1400])
val_ds = TensorDataset(X[1400:], Y[1400:])
'''

#: the head of the two-process DDP cases (w05, w06): a gloo group and digits sharded by a
#: DistributedSampler; the case adds its model, optimizer and loop
DDP_PRELUDE = '''
import torch
import torch.distributed as dist
from torch import nn
from sklearn.datasets import load_digits
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

if not dist.is_initialized():
    dist.init_process_group("gloo")
torch.manual_seed(0)
d = load_digits()
ds = TensorDataset(torch.tensor(d.data, dtype=torch.float32) / 16.0, torch.tensor(d.target))
sampler = DistributedSampler(ds, shuffle=True, seed=0)
loader = DataLoader(ds, batch_size=64, sampler=sampler)
'''

NET = '''
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(64, 64)
        self.drop = nn.Dropout(0.2)
        self.fc2 = nn.Linear(64, 10)

    def forward(self, x):
        return self.fc2(self.drop(F.relu(self.fc1(x))))
'''

SETUP = '''
model = Net()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
loss_fn = nn.CrossEntropyLoss()
train_loader = DataLoader(train_ds, batch_size=64, shuffle=True)
val_loader = DataLoader(val_ds, batch_size=128)
#@guard
'''

STEP = '''
        opt.zero_grad()
        loss = loss_fn(model(xb), yb)
        loss.backward()
        opt.step()
'''

EVALUATE = '''
    model.eval()
    correct = 0
    with torch.no_grad():
        for xb, yb in val_loader:
            correct += (model(xb).argmax(1) == yb).sum().item()
    model.train()
    print(f"epoch {epoch}: val accuracy {correct / len(val_ds):.3f}")
'''


def loop(*, net: str = NET, setup: str = SETUP, step: str = STEP, evaluate: str = EVALUATE, epochs: int = 3,
         before_epoch: str = "", tail: str = "") -> str:
    """A whole script: data, model, the epoch loop (``before_epoch`` at each epoch's start,
    ``step`` per batch, ``evaluate`` after each epoch), then ``tail``."""
    return (PRELUDE + net + setup + f"\nfor epoch in range({epochs}):\n" + before_epoch
            + "    for xb, yb in train_loader:\n" + step.strip("\n") + "\n" + evaluate + tail)


def digits_sets(n_train: int = 1400):
    """(train, val) TensorDatasets of digits for the engine and doctor faces."""
    import torch
    from sklearn.datasets import load_digits
    from torch.utils.data import TensorDataset

    d = load_digits()
    x = torch.tensor(d.data, dtype=torch.float32) / 16.0
    y = torch.tensor(d.target)
    return TensorDataset(x[:n_train], y[:n_train]), TensorDataset(x[n_train:], y[n_train:])
