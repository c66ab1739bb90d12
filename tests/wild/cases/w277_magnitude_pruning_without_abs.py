"""Magnitude pruning that ranks the weights by their signed value instead of their magnitude: the "smallest" weights
are the most negative ones, so the pruner removes the large negative weights and keeps the small positive ones --
with no error.

Source: intel/neural-compressor#592 (https://github.com/intel/neural-compressor/issues/592), the magnitude pruning
criterion scored the weights without ``abs``, so large negative weights were pruned first (fixed by #652, merged).
Here an MLP is trained on digits and then pruned once to 50% sparsity per layer by a magnitude criterion, and
evaluated as pruned (neural-compressor prunes gradually during training, and fine-tuning on digits recovers most
of either pruning: 0.9421 / 0.9496 at 80% sparsity with 50 fine-tuning steps); the buggy score is ``w``, the twin
``w.abs()``.

Metric: validation accuracy after pruning (plain ``python``, CPU, seed 0): bug 0.6373, twin 0.9496
"""

REPORT = "N251"
MECHANISM = "pruning-score-without-magnitude"
SLUGS = ()
METRIC = ("val_accuracy", 0.6373, 0.9496)

_SCRIPT = '''import torch
from torch import nn
import torch.nn.functional as F
from sklearn.datasets import load_digits

torch.manual_seed(0)
d = load_digits()
X = torch.tensor(d.data, dtype=torch.float32) / 16.0
Y = torch.tensor(d.target)
perm = torch.randperm(len(X))
tr, va = perm[:1400], perm[1400:]

model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))
opt = torch.optim.Adam(model.parameters(), lr=3e-3)


def train(steps, masks=None):
    for step in range(steps):
        i = tr[torch.randint(0, len(tr), (64,))]
        loss = F.cross_entropy(model(X[i]), Y[i])
        opt.zero_grad()
        loss.backward()
        opt.step()
        if masks:
            with torch.no_grad():
                for layer, mask in masks.items():
                    layer.weight.mul_(mask)


def magnitude_masks(sparsity=0.5):
    masks = {}
    for layer in model:
        if isinstance(layer, nn.Linear):
            score = __SCORE__
            k = int(sparsity * score.numel())
            threshold = score.flatten().kthvalue(k).values
            masks[layer] = (score > threshold).float()
    return masks


#@guard
train(300)
masks = magnitude_masks()
with torch.no_grad():
    for layer, mask in masks.items():
        layer.weight.mul_(mask)
with torch.no_grad():
    acc = (model(X[va]).argmax(1) == Y[va]).float().mean().item()
print(f"METRIC {acc:.4f}")
'''


def script(bug: bool) -> str:
    return _SCRIPT.replace('__SCORE__', 'layer.weight.detach()' if bug else 'layer.weight.detach().abs()')
