"""Multi-head attention whose heads are merged by ``reshape`` without first moving the head axis
behind the sequence axis: the output row of a token is filled with pieces of other tokens' head
outputs, so what a token receives no longer comes from its own attention -- with no error.

Source: jsbaan/transformer-from-scratch#6 (https://github.com/jsbaan/transformer-from-scratch/pull/6),
"Fix several bugs, one critical" (fixes #4): "The bug is a missing permute before a reshape in
multi-head attention (multi_head_attention.py:73). After `scaled_dot_product`, `values` has shape
(batch, heads, seq_len, qkv_dim). Without `permute(0, 2, 1, 3)` first, PyTorch's row-major reshape
mixes chunks from different sequence positions into the same token's output embedding, scrambling
token representations."  Here a one-layer attention tagger (learned positions, 4 heads, a residual
connection) labels each of 12 tokens (vocabulary 6) with the number of other tokens equal to it,
which only the token's own attention can count; the buggy attention merges with
``values.reshape(B, T, D)``, the twin with ``values.permute(0, 2, 1, 3).reshape(B, T, D)``.

Metric: validation token accuracy (plain ``python``, CPU, seed 0): bug 0.9109, twin 0.989.
"""

REPORT = "N116"
MECHANISM = "attention-heads-merged-without-permute"
SLUGS = ()
METRIC = ("val_token_accuracy", 0.9109, 0.989)

_SCRIPT = '''
import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)
g = torch.Generator().manual_seed(1)
N, T, V, D, H = 4000, 12, 6, 64, 4
seq = torch.randint(V, (N, T), generator=g)
target = (seq[:, :, None] == seq[:, None, :]).sum(-1) - 1  # how many other tokens equal this one


class Attention(nn.Module):
    def __init__(self):
        super().__init__()
        self.qkv = nn.Linear(D, 3 * D)
        self.out = nn.Linear(D, D)

    def forward(self, x):
        B = x.size(0)
        q, k, v = self.qkv(x).reshape(B, T, 3, H, D // H).permute(2, 0, 3, 1, 4)  # each (B, H, T, D/H)
        values = torch.softmax(q @ k.transpose(-1, -2) / (D // H) ** 0.5, dim=-1) @ v
        return self.out(__MERGE__)


class Tagger(nn.Module):
    def __init__(self):
        super().__init__()
        self.tok = nn.Embedding(V, D)
        self.pos = nn.Parameter(0.1 * torch.randn(T, D))
        self.attn = Attention()
        self.head = nn.Sequential(nn.Linear(D, D), nn.ReLU(), nn.Linear(D, T))

    def forward(self, s):
        x = self.tok(s) + self.pos
        return self.head(x + self.attn(x))


model = Tagger()
opt = torch.optim.Adam(model.parameters(), lr=2e-3)
#@guard
for epoch in range(10):
    for batch in torch.randperm(3200).split(64):
        opt.zero_grad()
        F.cross_entropy(model(seq[batch]).reshape(-1, T), target[batch].reshape(-1)).backward()
        opt.step()

with torch.no_grad():
    acc = (model(seq[3200:]).argmax(-1) == target[3200:]).float().mean().item()
print(f"METRIC {acc:.4f}")
'''


def script(bug: bool) -> str:
    return _SCRIPT.replace("__MERGE__", "values.reshape(B, T, D)" if bug else
                           "values.permute(0, 2, 1, 3).reshape(B, T, D)")
