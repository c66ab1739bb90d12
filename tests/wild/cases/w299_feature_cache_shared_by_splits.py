"""A feature cache keyed without the split: the training features are cached first, and loading the validation split
later finds the same file and returns the training features, so the model is "validated" on what it was trained on
and reports a near-perfect accuracy -- with no error.

Source: Yale-LILY/DYLE#1 (https://github.com/Yale-LILY/DYLE/pull/1), "fix cached bug": "Only one cached file, so
only training file is cached. When validating or testing, it will use training data"; maintainers: "We also fixed
the bugs in the other two data loaders" (merged). Here an MLP is trained on 300 digits (15% of all labels noisy,
as annotation noise) and evaluated on a validation split read through ``load_features(split)``, which caches to
``cache/cached_features.pt`` in the bug and to a per-split file in the twin. DYLE caches tokenised dialogue
features; the digits stand in for them.

Metric: the reported validation accuracy (plain ``python``, CPU, seed 0): bug 0.9367, twin 0.6986 (the bug's number
is the training accuracy; the true validation accuracy is the twin's)
"""

REPORT = "N273"
MECHANISM = "split-cache-key-ignores-split"
SLUGS = ()
METRIC = ("val_accuracy", 0.9367, 0.6986)

_SCRIPT = '''import os
import torch
from torch import nn
import torch.nn.functional as F
from sklearn.datasets import load_digits

torch.manual_seed(0)
d = load_digits()
X_all = torch.tensor(d.data, dtype=torch.float32) / 16.0
Y_all = torch.tensor(d.target)
noisy = torch.rand(len(Y_all)) < 0.15
Y_all[noisy] = torch.randint(0, 10, (int(noisy.sum()),))
perm = torch.randperm(len(X_all))
splits = {"train": perm[:300], "validation": perm[300:1000]}


def load_features(split, cache_dir="cache"):
    os.makedirs(cache_dir, exist_ok=True)
    path = os.path.join(cache_dir, __CACHE_NAME__)
    if os.path.exists(path):
        return torch.load(path)
    idx = splits[split]
    feats = (X_all[idx], Y_all[idx])
    torch.save(feats, path)
    return feats


x_tr, y_tr = load_features("train")
model = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 10))
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
#@guard
for epoch in range(300):
    loss = F.cross_entropy(model(x_tr), y_tr)
    opt.zero_grad()
    loss.backward()
    opt.step()
x_va, y_va = load_features("validation")
with torch.no_grad():
    acc = (model(x_va).argmax(1) == y_va).float().mean().item()
print(f"METRIC {acc:.4f}")
'''


def script(bug: bool) -> str:
    return _SCRIPT.replace('__CACHE_NAME__', '"cached_features.pt"' if bug else 'f"cached_{split}_features.pt"')
