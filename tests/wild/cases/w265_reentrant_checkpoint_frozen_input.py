"""Reentrant activation checkpointing of blocks whose input does not require a gradient: with
``use_reentrant=True`` a checkpointed segment's output requires a gradient only if one of its inputs does,
and behind a frozen first layer none does, so the checkpointed blocks get no gradient and stay at their
initialisation while the head trains on their random features -- with a warning at most, no error.

Source: huggingface/transformers#26221 (https://github.com/huggingface/transformers/issues/26221), "Gradient
checkpointing should have no functional impact" (labels: solved): the reporter's notebook trained LoRA with
and without checkpointing and got different results; maintainer: "Let's see the behaviour for
`use_reentrant=True` as mentioned in https://pytorch.org/docs/stable/checkpoint.html: At least one input and
output must have requires_grad=True for the reentrant variant. If this condition is unmet, the checkpointed
part of the model will not have gradients. The non-reentrant version does not have this requirement." (the
Trainer had reset the user's ``use_reentrant=False``).  Here a frozen linear embedding is followed by two
checkpointed ReLU blocks and a head, trained on a synthetic XOR-like task; the buggy script checkpoints with
``use_reentrant=True``, the twin with ``use_reentrant=False``.  The report fine-tunes a language model with
LoRA, whose frozen embeddings play the role of the frozen first layer here.

Metric: test accuracy (plain ``python``, CPU, seed 0): bug 0.5160, twin 0.9300
"""

REPORT = "N239"
MECHANISM = "reentrant-checkpoint-without-grad-input"
SLUGS = ()
METRIC = ("test_accuracy", 0.5160, 0.9300)

_SCRIPT = '''import torch
from torch import nn
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

torch.manual_seed(0)
n = 3000
X = torch.randn(n, 10)
Y = ((X[:, 0] * X[:, 1] > 0) ^ (X[:, 2] > 0.5)).long()
Xtr, Ytr, Xte, Yte = X[:2000], Y[:2000], X[2000:], Y[2000:]


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Linear(10, 32)          # pretrained and frozen
        self.embed.requires_grad_(False)
        self.blocks = nn.ModuleList([nn.Sequential(nn.Linear(32, 32), nn.ReLU()) for _ in range(2)])
        self.head = nn.Linear(32, 2)

    def forward(self, x):
        h = self.embed(x)
        for block in self.blocks:
            h = checkpoint(block, h, use_reentrant=__REENTRANT__)
        return self.head(h)


model = Net()
opt = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=1e-2)
#@guard
for step in range(400):
    i = torch.randint(0, len(Xtr), (128,))
    loss = F.cross_entropy(model(Xtr[i]), Ytr[i])
    opt.zero_grad()
    loss.backward()
    opt.step()
with torch.no_grad():
    acc = (model(Xte).argmax(1) == Yte).float().mean().item()
print(f"METRIC {acc:.4f}")
'''


def script(bug: bool) -> str:
    s = _SCRIPT
    s = s.replace('__REENTRANT__', 'True' if bug else 'False')
    return s
