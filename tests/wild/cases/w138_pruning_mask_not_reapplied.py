"""Magnitude pruning whose masks are applied once and not after the optimizer steps of the
fine-tuning that follows: gradients and momentum bring the pruned weights back, the fine-tuned
network comes to rely on them, and the sparse model that is finally exported (only the surviving
weights) loses much of its accuracy -- with no error.

Source: IntelLabs/distiller#55 (https://github.com/IntelLabs/distiller/pull/55), "Fix Issue #53":
"When using a schedule with epochs that have nothing scheduled for them, apply_mask() is not
invoked at the end of mini-batches, and pruned weights might be unmasked by the optimizer weight
updates" (the maintainers then always mask at the end of each mini-batch, #63: "weights may be
updated by SGD+momentum, even for weights that are masked").  Here an MLP is trained on digits, 95%
of each hidden weight matrix is pruned by magnitude, and the network is fine-tuned for 8 epochs
with the same SGD+momentum optimizer; the export keeps only the unpruned weights.  The buggy
fine-tuning never re-applies the masks; the twin multiplies each weight by its mask after every
``opt.step()``.

Metric: validation accuracy of the exported 95%-sparse model (plain ``python``, CPU, seed 0): bug
0.8438, twin 0.9043.
"""

from tests.wild.cases.common import PRELUDE

REPORT = "N112"
MECHANISM = "pruning-mask-not-reapplied"
SLUGS = ()
METRIC = ("sparse_val_accuracy", 0.8438, 0.9043)

_SCRIPT = PRELUDE + '''
model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 128), nn.ReLU(), nn.Linear(128, 10))
opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
#@guard
loader = DataLoader(train_ds, batch_size=64, shuffle=True)


def train(epochs, masks=None):
    for epoch in range(epochs):
        for xb, yb in loader:
            opt.zero_grad()
            F.cross_entropy(model(xb), yb).backward()
            opt.step()
            if masks is not None:
                with torch.no_grad():
                    for layer, mask in masks.items():
                        layer.weight.mul_(mask)


train(10)
pruned = [model[0], model[2]]
masks = {}
with torch.no_grad():
    for layer in pruned:
        threshold = layer.weight.abs().flatten().kthvalue(int(0.95 * layer.weight.numel())).values
        masks[layer] = (layer.weight.abs() > threshold).float()
        layer.weight.mul_(masks[layer])
train(8, __MASKS__)

with torch.no_grad():  # export: only the unpruned weights are kept
    for layer in pruned:
        layer.weight.mul_(masks[layer])
model.eval()
with torch.no_grad():
    acc = (model(X[1400:]).argmax(1) == Y[1400:]).float().mean().item()
print(f"METRIC {acc:.4f}")
'''


def script(bug: bool) -> str:
    return _SCRIPT.replace("__MASKS__", "None" if bug else "masks")
