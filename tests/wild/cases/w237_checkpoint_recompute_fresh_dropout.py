"""Activation checkpointing that does not preserve the RNG state: each checkpointed block is run again in the
backward pass to rebuild its activations, and without the saved RNG state that re-run draws new dropout masks,
so the gradients belong to a different network sample than the loss -- with no error.

Source: allenai/OLMo-core#828 (https://github.com/allenai/OLMo-core/pull/828), "Preserve RNG state across
activation-checkpoint recompute when dropout is active" (merged): "`apply_activation_checkpointing` hardcoded
`preserve_rng_state = False` ... with the RNG state unpreserved, that recompute draws **fresh** dropout masks,
so the gradients are taken with respect to a different sample than the loss was"; turning checkpointing off
moved the cross-entropy at step 150 from 2.495 to 2.195.  Here a residual MLP (four blocks with dropout 0.5)
is trained on scikit-learn's digits with every block wrapped in ``torch.utils.checkpoint.checkpoint(...,
use_reentrant=False)`` during training.  The buggy call passes ``preserve_rng_state=False``, the twin ``True``.
A first trial at the report's dropout rate 0.1 gave validation loss 0.435 / 0.338 and at 0.3 no gap (0.322 /
0.329), so the case uses 0.5.

Metric: validation cross-entropy after training (plain ``python``, CPU, seed 0): bug 1.0583, twin 0.2909 (lower is
better)
"""

REPORT = "N211"
MECHANISM = "checkpoint-recompute-draws-fresh-dropout"
SLUGS = ()
METRIC = ("val_loss", 1.0583, 0.2909)

_SCRIPT = '''
import torch
from torch import nn
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint
from sklearn.datasets import load_digits

torch.manual_seed(0)
d = load_digits()
X = torch.tensor(d.data, dtype=torch.float32) / 16.0
Y = torch.tensor(d.target)
Xtr, Ytr, Xva, Yva = X[:1200], Y[:1200], X[1200:], Y[1200:]


class Block(nn.Module):
    def __init__(self, width, p):
        super().__init__()
        self.fc = nn.Linear(width, width)
        self.drop = nn.Dropout(p)

    def forward(self, x):
        return x + self.drop(F.gelu(self.fc(x)))


class Net(nn.Module):
    def __init__(self, p=0.5):
        super().__init__()
        self.inp = nn.Linear(64, 128)
        self.blocks = nn.ModuleList(Block(128, p) for _ in range(4))
        self.out = nn.Linear(128, 10)

    def forward(self, x):
        h = self.inp(x)
        for block in self.blocks:
            if self.training:
                h = checkpoint(block, h, use_reentrant=False, preserve_rng_state=__PRESERVE__)
            else:
                h = block(h)
        return self.out(h)


model = Net()
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
#@guard
for epoch in range(30):
    model.train()
    perm = torch.randperm(len(Xtr))
    for s in range(0, len(Xtr), 64):
        b = perm[s:s + 64]
        loss = F.cross_entropy(model(Xtr[b]), Ytr[b])
        opt.zero_grad()
        loss.backward()
        opt.step()

model.eval()
with torch.no_grad():
    val_loss = F.cross_entropy(model(Xva), Yva)
print(f"METRIC {val_loss.item():.4f}")
'''


def script(bug: bool) -> str:
    return _SCRIPT.replace("__PRESERVE__", "False" if bug else "True")
