"""An InfoNCE loss whose cosine similarities are never divided by the temperature: the logits stay in ``[-1, 1]``,
the soft-max over one positive and 256 negatives is nearly flat, the gradient that separates classes is weak and
the embedding learns far more slowly -- with no error.

Source: huiserwang/ContrastMask#4 (https://github.com/huiserwang/ContrastMask/issues/4), "Code about the INFOloss":
"Did you forget to divide ``tem`` on this line in your code?"; maintainer: "Yes, I forgot it. Meanwhile, it maybe
have minor effect on the final performance." Here an MLP embeds digits (with input noise); each step contrasts 32
anchors of one class with 32 positives of that class and 256 negatives of the others at temperature 0.1, for 60
steps; the bug leaves the logits undivided, the twin divides them by the temperature. ContrastMask contrasts pixel
features with foreground/background queues at temperatures 0.3-0.7; the digits and the shorter run stand in for
that setting.

Metric: nearest-centroid test accuracy of the normalised embeddings (plain ``python``, CPU, seed 0): bug 0.8258, twin
0.9246
"""

REPORT = "N282"
MECHANISM = "contrastive-logits-not-divided-by-temperature"
SLUGS = ()
METRIC = ("test_accuracy", 0.8258, 0.9246)

_SCRIPT = '''import torch
from torch import nn
import torch.nn.functional as F
from sklearn.datasets import load_digits

torch.manual_seed(0)
d = load_digits()
X = torch.tensor(d.data, dtype=torch.float32) / 16.0
Y = torch.tensor(d.target)
perm = torch.randperm(len(X))
tr, te = perm[:1200], perm[1200:]
by_class = [tr[Y[tr] == c] for c in range(10)]
TEM, NEG = 0.1, 256


def infonce(query, pos, neg, tem):
    l_pos = (query * pos).sum(1, keepdim=True)
    l_neg = query @ neg.t()
    logits = torch.cat([l_pos, l_neg], 1)
    __SCALE__
    return F.cross_entropy(logits, torch.zeros(len(query), dtype=torch.long))


model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 16))
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
#@guard
for step in range(60):
    c = torch.randint(0, 10, ())
    a = by_class[c][torch.randint(0, len(by_class[c]), (32,))]
    p = by_class[c][torch.randint(0, len(by_class[c]), (32,))]
    others = tr[Y[tr] != c]
    n = others[torch.randint(0, len(others), (NEG,))]
    q, k, kn = (F.normalize(model(X[i] + 0.1 * torch.randn(len(i), 64)), dim=1) for i in (a, p, n))
    loss = infonce(q, k, kn, TEM)
    opt.zero_grad()
    loss.backward()
    opt.step()
with torch.no_grad():
    e = F.normalize(model(X), dim=1)
    cent = F.normalize(torch.stack([e[by_class[c]].mean(0) for c in range(10)]), dim=1)
    acc = ((e[te] @ cent.t()).argmax(1) == Y[te]).float().mean().item()
print(f"METRIC {acc:.4f}")
'''


def script(bug: bool) -> str:
    return _SCRIPT.replace('__SCALE__', 'pass' if bug else 'logits = logits / tem')
