"""Datasets merged for training by shifting labels, with the shift added to the concatenation instead of to the new
dataset's labels: every label already merged moves up while the new dataset's labels land on the old ones, so
classes of different datasets share an id and the network learns to map them together -- with no error.

Source: DagnyT/hardnet#25 (https://github.com/DagnyT/hardnet/issues/25): the patch datasets are merged with
``labels = torch.cat([labels, datasets[i][1]]) + torch.max(labels) + 1``; maintainer: "yes, it's a bug ... should
have been labels = torch.cat([labels, datasets[i][1]+torch.max(labels)+1]". Here three datasets of ten classes
each (Gaussian clusters in 16 dimensions, every class its own centre) are merged with the bug's and the twin's
expression, an MLP descriptor is trained with a normalised-softmax (proxy) loss on the merged labels, and held-out
samples are classified by their nearest proxy, each proxy read as the true class most of its training samples
have. HardNet's patch descriptor network, triplet margin loss and pair-matching evaluation are replaced by the MLP,
the proxy loss and this classification (a label shared by two datasets' classes can name only one of them).

Metric: test accuracy over the 30 true classes (plain ``python``, CPU, seed 0): bug 0.6622,
twin 0.9778
"""

REPORT = "N290"
MECHANISM = "merge-offset-added-to-concatenation"
SLUGS = ()
METRIC = ("test_accuracy", 0.6622, 0.9778)

_SCRIPT = '''import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)
DIM, PER = 16, 10
centres = torch.randn(3, PER, DIM) * 1.5


def sample(d, n):
    y = torch.randint(0, PER, (n,))
    return centres[d, y] + torch.randn(n, DIM), y


datasets = [sample(d, 600) for d in range(3)]
data = datasets[0][0]
labels = datasets[0][1]
for i in range(1, 3):
    data = torch.cat([data, datasets[i][0]])
    labels = __MERGE__

model = nn.Sequential(nn.Linear(DIM, 64), nn.ReLU(), nn.Linear(64, 32))
proxies = nn.Parameter(torch.randn(int(labels.max()) + 1, 32))
opt = torch.optim.Adam(list(model.parameters()) + [proxies], lr=3e-3)
#@guard
for step in range(300):
    idx = torch.randint(0, len(data), (128,))
    logits = 10 * F.normalize(model(data[idx]), dim=1) @ F.normalize(proxies, dim=1).T
    loss = F.cross_entropy(logits, labels[idx])
    opt.zero_grad()
    loss.backward()
    opt.step()
true = torch.cat([datasets[d][1] + PER * d for d in range(3)])
to_true = torch.zeros(len(proxies), dtype=torch.long)
for k in labels.unique():
    to_true[k] = true[labels == k].mode().values
with torch.no_grad():
    hits = 0
    for d in range(3):
        x, y = sample(d, 300)
        pred = (F.normalize(model(x), dim=1) @ F.normalize(proxies, dim=1).T).argmax(1)
        hits += (to_true[pred] == y + PER * d).sum().item()
print(f"METRIC {hits / 900:.4f}")
'''


def script(bug: bool) -> str:
    return _SCRIPT.replace('__MERGE__', 'torch.cat([labels, datasets[i][1]]) + torch.max(labels) + 1' if bug
                           else 'torch.cat([labels, datasets[i][1] + torch.max(labels) + 1])')
