"""Feature files and label files listed independently, in two different orders: each input is
paired with another sample's label.

Source: chuanyangjin/fast-DiT#4 (https://github.com/chuanyangjin/fast-DiT/issues/4): the feature
files and the label files were each obtained with ``os.listdir``, which "does not guarantee the
returned list the be sorted. Wouldn't this cause mismatch between the feature files and label
files?"; the author added sorting.  Here the shards are written as ``x_00.pt ...`` and
``y_0.pt ...`` and both listings are ``sorted``, which orders ``y_10`` before ``y_2``; the twin
pairs the shards by their number.

Metric: validation accuracy (plain ``python``, CPU, seed 0): bug 0.0882, twin 0.8589.
"""

from tests.wild.cases.common import ACCURACY, FIT, NET, PRELUDE

REPORT = "N23"
MECHANISM = "labels-misaligned"
SLUGS = ()
METRIC = ("val_accuracy", 0.0882, 0.8589)

_SCRIPT = PRELUDE + NET + ACCURACY + FIT + '''
import os
import tempfile

root = tempfile.mkdtemp()
for i, part in enumerate(torch.arange(len(X)).chunk(18)):   # 18 shards of features and labels
    torch.save(X[part].clone(), os.path.join(root, f"x_{{i:02d}}.pt"))
    torch.save(Y[part].clone(), os.path.join(root, f"y_{{i}}.pt"))

x_files = sorted(f for f in os.listdir(root) if f.startswith("x_"))
y_files = {ylist}
Xs = torch.cat([torch.load(os.path.join(root, f), weights_only=True) for f in x_files])
Ys = torch.cat([torch.load(os.path.join(root, f), weights_only=True) for f in y_files])
train_ds = TensorDataset(Xs[:1400], Ys[:1400])
val_ds = TensorDataset(Xs[1400:], Ys[1400:])

model = Net()
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
loss_fn = nn.CrossEntropyLoss()
train_loader = DataLoader(train_ds, batch_size=64, shuffle=True)
val_loader = DataLoader(val_ds, batch_size=128)
fit(model, opt, train_loader, 3, loss_fn)
print(f"METRIC {{accuracy(model, val_loader):.4f}}")
'''


def script(bug: bool) -> str:
    ylist = ('sorted(f for f in os.listdir(root) if f.startswith("y_"))' if bug else
             '[f"y_{int(f[2:4])}.pt" for f in x_files]  # paired by shard number')
    return _SCRIPT.format(ylist=ylist)
