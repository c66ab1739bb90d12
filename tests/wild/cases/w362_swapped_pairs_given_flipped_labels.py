"""A pair classifier whose data augmentation adds every training pair swapped, (B, A), with the label ``1 - y`` instead
of ``y``: interaction is symmetric, so each pair is now labelled both ways, and a model that scores a pair the same
in either order is pulled to 0.5 on every pair and learns nothing -- the loss settles at log 2 without an error.

Source: samsledje/D-SCRIPT#13 (https://github.com/samsledje/D-SCRIPT/issues/13): with ``--augment`` the training set is
extended by the swapped pairs with the labels ``1 - y`` (``train_y`` is the concatenation of ``y`` and ``1 - y``), where
a swapped pair keeps its label; the author fixed it ("fixed inconsistency in data augmentation"). Here 300 synthetic
"proteins" with 16 features interact when a symmetric bilinear form of their features is positive; a model embeds both
members, multiplies the embeddings elementwise and classifies, trained on 4000 pairs plus their swaps; the bug labels
the swaps ``1 - y``, the twin ``y``. The reproduction replaces the sequence language-model features and contact maps by
the feature vectors and the product, and evaluates on new pairs without augmentation.

Metric: accuracy on 2000 new pairs (plain ``python``, CPU, seed 0): bug 0.4925, twin 0.9280
"""

REPORT = "N336"
MECHANISM = "swapped-pair-augmentation-flips-label"
SLUGS = ()
METRIC = ('test_accuracy', 0.4925, 0.928)

_SCRIPT = '''import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)
P, D = 300, 16
feats = torch.randn(P, D)
M = torch.randn(D, D)
M = M + M.T


def pairs(n):
    a, b = torch.randint(0, P, (n,)), torch.randint(0, P, (n,))
    y = ((feats[a] @ M * feats[b]).sum(1) > 0).float()
    return a, b, y


class PairModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Sequential(nn.Linear(D, 64), nn.ReLU(), nn.Linear(64, 64))
        self.head = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 1))

    def forward(self, a, b):
        return self.head(self.embed(feats[a]) * self.embed(feats[b])).squeeze(1)


a, b, y = pairs(4000)
train_a, train_b, train_y = torch.cat([a, b]), torch.cat([b, a]), __AUG__
model = PairModel()
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
#@guard
for epoch in range(30):
    perm = torch.randperm(len(train_y))
    for i in range(0, len(perm), 128):
        j = perm[i:i + 128]
        loss = F.binary_cross_entropy_with_logits(model(train_a[j], train_b[j]), train_y[j])
        opt.zero_grad()
        loss.backward()
        opt.step()
ta, tb, ty = pairs(2000)
with torch.no_grad():
    acc = ((model(ta, tb) > 0).float() == ty).float().mean().item()
print(f"METRIC {acc:.4f}")
'''


def script(bug: bool) -> str:
    return _SCRIPT.replace('__AUG__', 'torch.cat([y, 1 - y])' if bug
                           else 'torch.cat([y, y])')
