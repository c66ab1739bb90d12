"""A positional encoding whose forward computes ``x + self.pe[...]`` and throws the sum away: the statement has no
effect, the module returns its input unchanged, and a transformer encoder, which is permutation-equivariant without
positions, cannot learn a task that depends on where a token is -- while it trains without an error.

Source: Lightning-AI/pytorch-lightning#19138 (https://github.com/Lightning-AI/pytorch-lightning/issues/19138): in the
demo Transformer of ``lightning.pytorch.demos``, ``PositionalEncoding.forward`` evaluates ``x + self.pe[: x.size(0)]``
without assigning it, so no positional information reaches the model (labels: bug; fixed by #20099, merged: "Thank you
for the quick fix"). Here a one-layer transformer encoder with sinusoidal positions learns to output, at each of 8
positions, the token one position earlier (cyclically); the bug leaves the sum unassigned, the twin assigns ``x = x +
self.pe[...]``. The reproduction replaces the demo's language model and WikiText by the shift task, uses batch-first
tensors, and does not multiply the embeddings by ``sqrt(dim)`` (in both scripts).

Metric: per-token accuracy on 500 new sequences (plain ``python``, CPU, seed 0): bug 0.3165, twin 1.0000
"""

REPORT = "N341"
MECHANISM = "positional-encoding-sum-not-assigned"
SLUGS = ()
METRIC = ('test_token_accuracy', 0.3165, 1.0)

_SCRIPT = '''import math
import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)
V, L, D = 10, 8, 32


class PositionalEncoding(nn.Module):
    def __init__(self, dim, max_len=64):
        super().__init__()
        pos = torch.arange(max_len)[:, None]
        div = torch.exp(torch.arange(0, dim, 2) * (-math.log(10000.0) / dim))
        pe = torch.zeros(max_len, dim)
        pe[:, 0::2] = torch.sin(pos * div)
        pe[:, 1::2] = torch.cos(pos * div)
        self.register_buffer("pe", pe)

    def forward(self, x):
        __ADD__
        return x


class Reverser(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(V, D)
        self.pos = PositionalEncoding(D)
        layer = nn.TransformerEncoderLayer(D, 4, 128, dropout=0.0, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, 1)
        self.out = nn.Linear(D, V)

    def forward(self, t):
        return self.out(self.encoder(self.pos(self.embed(t))))


model = Reverser()
opt = torch.optim.Adam(model.parameters(), lr=3e-3)
#@guard
for step in range(600):
    t = torch.randint(0, V, (64, L))
    loss = F.cross_entropy(model(t).reshape(-1, V), t.roll(1, 1).reshape(-1))
    opt.zero_grad()
    loss.backward()
    opt.step()
model.eval()
with torch.no_grad():
    t = torch.randint(0, V, (500, L))
    acc = (model(t).argmax(-1) == t.roll(1, 1)).float().mean().item()
print(f"METRIC {acc:.4f}")
'''


def script(bug: bool) -> str:
    return _SCRIPT.replace('__ADD__', 'x + self.pe[:x.size(1)]' if bug
                           else 'x = x + self.pe[:x.size(1)]')
