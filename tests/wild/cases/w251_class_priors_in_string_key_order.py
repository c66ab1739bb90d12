"""Class priors for logit adjustment collected in a dictionary keyed by the labels as strings and read back
in sorted-key order: with more than ten classes the order is '0', '1', '10', '11', ..., '19', '2', ..., so
most classes receive another class's log-prior and the adjustment that should counter the long tail shifts
the logits at random -- with no error.

Source: Chumsy0725/logit-adj-pytorch#2 (https://github.com/Chumsy0725/logit-adj-pytorch/issues/2), "there is
some wrong with the compute_adjustment": "There is no problem with 10 classification, when 100
classification, the order is wrong"; maintainer: "It can be rectified by casting the keys as integers ...
`key = int(j.item())`"; another commenter: "the tensor returned by the above compute_adjustment() method has
the order ['0', '1', '10', '11', ...] instead of ['0', '1', '2', '3', ...]".  Here an MLP is trained with the
logit-adjusted loss (``logits + tau * log(prior)``, tau 1) on a synthetic long-tailed problem of 20 Gaussian
classes (400 down to 5 training samples per class) and evaluated on a balanced test set.  The buggy
``compute_adjustment`` keys the counts by ``str(label)``, the twin by ``int(label)``.

Metric: balanced test accuracy (plain ``python``, CPU, seed 0): bug 0.8295, twin 0.9325
"""

REPORT = "N225"
MECHANISM = "class-priors-ordered-by-string-keys"
SLUGS = ()
METRIC = ("balanced_test_accuracy", 0.8295, 0.9325)

_SCRIPT = '''
import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)
C, DIM = 20, 16
centres = torch.randn(C, DIM) * 1.2
counts = (400 * 0.8 ** torch.arange(C).float()).long().clamp(min=5)
ytr = torch.cat([torch.full((int(n),), c) for c, n in enumerate(counts)])
xtr = centres[ytr] + torch.randn(len(ytr), DIM)
yte = torch.arange(C).repeat_interleave(100)
xte = centres[yte] + torch.randn(len(yte), DIM)


def compute_adjustment(targets, tau=1.0):
    label_freq = {}
    for j in targets:
        key = __KEY__
        label_freq[key] = label_freq.get(key, 0) + 1
    label_freq = dict(sorted(label_freq.items()))
    freq = torch.tensor(list(label_freq.values()), dtype=torch.float)
    return tau * torch.log(freq / freq.sum())


adjustment = compute_adjustment(ytr)
model = nn.Sequential(nn.Linear(DIM, 64), nn.ReLU(), nn.Linear(64, C))
opt = torch.optim.Adam(model.parameters(), lr=3e-3)
#@guard
for epoch in range(30):
    perm = torch.randperm(len(ytr))
    for s in range(0, len(ytr), 128):
        b = perm[s:s + 128]
        loss = F.cross_entropy(model(xtr[b]) + adjustment, ytr[b])
        opt.zero_grad()
        loss.backward()
        opt.step()

with torch.no_grad():
    pred = model(xte).argmax(1)
per_class = torch.stack([(pred[yte == c] == c).float().mean() for c in range(C)])
print(f"METRIC {per_class.mean().item():.4f}")
'''


def script(bug: bool) -> str:
    return _SCRIPT.replace("__KEY__", "str(j.item())" if bug else "int(j.item())")
