"""A transformer block whose residual connection adds the attention output to itself: ``x, _ = attn(x, x,
x)`` overwrites the block's input, and ``x = x + x`` then doubles the attention output instead of adding it
to the input, so the residual stream is cut at every layer and each token's own representation survives only
if attention carries it -- the model trains, worse, with no error.

Source: kyegomez/BitNet#32 (https://github.com/kyegomez/BitNet/issues/32), "[BUG] residual connection wrong?"
(labels: bug): "In bit_transformer.py: ``x, _ = attn(x, x, x, is_causal=True, *args, **kwargs)`` ``x = x +
x`` ``x = ffn(x) + x`` ... Is the line `x = x + x` wrong? This seems not a residual connection"; maintainer:
"fixed it now excuse me, thanks for the catch!".  Here an eight-layer causal transformer (``nn.MultiheadAttention``
blocks written like the report's ``Transformer.forward``) learns next-token prediction on sequences from a
second-order chain (the next token is a fixed function of the current and the previous one), so every position
needs its own token and its predecessor's.  The buggy block reads ``x, _ = attn(...)`` then ``x = x + x``; the
twin keeps the input, ``h, _ = attn(...)`` then ``x = h + x``.

Metric: next-token accuracy on held-out sequences (plain ``python``, CPU, seed 0): bug 0.4484, twin 1.0000
"""

REPORT = "N206"
MECHANISM = "residual-adds-sublayer-output-to-itself"
SLUGS = ()
METRIC = ("val_next_token_accuracy", 0.4484, 1.0000)

_SCRIPT = '''
import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)
g = torch.Generator().manual_seed(1)
V, T, D = 8, 16, 48
table = torch.randint(0, V, (V, V), generator=g)


def batch(n):
    x = torch.empty(n, T + 1, dtype=torch.long)
    x[:, :2] = torch.randint(0, V, (n, 2), generator=g)
    for t in range(1, T):
        x[:, t + 1] = table[x[:, t], x[:, t - 1]]
    return x[:, :-1], x[:, 1:]


class Transformer(nn.Module):
    def __init__(self, depth=8):
        super().__init__()
        self.tok, self.pos = nn.Embedding(V, D), nn.Embedding(T, D)
        self.layers = nn.ModuleList(nn.MultiheadAttention(D, 4, batch_first=True) for _ in range(depth))
        self.ffn_layers = nn.ModuleList(nn.Sequential(nn.LayerNorm(D), nn.Linear(D, 2 * D), nn.GELU(),
                                                      nn.Linear(2 * D, D)) for _ in range(depth))
        self.head = nn.Linear(D, V)
        self.register_buffer("mask", torch.triu(torch.ones(T, T, dtype=torch.bool), 1))

    def forward(self, idx):
        x = self.tok(idx) + self.pos(torch.arange(idx.shape[1]))
        for attn, ffn in zip(self.layers, self.ffn_layers):
            __BLOCK__
            x = ffn(x) + x
        return self.head(x)


model = Transformer()
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
#@guard
for it in range(250):
    xb, yb = batch(64)
    loss = F.cross_entropy(model(xb)[:, 1:].reshape(-1, V), yb[:, 1:].reshape(-1))
    opt.zero_grad()
    loss.backward()
    opt.step()

xv, yv = batch(256)
with torch.no_grad():
    acc = (model(xv)[:, 1:].argmax(-1) == yv[:, 1:]).float().mean()
print(f"METRIC {acc.item():.4f}")
'''

_BUG = """x, _ = attn(x, x, x, attn_mask=self.mask)
            x = x + x"""
_TWIN = """h, _ = attn(x, x, x, attn_mask=self.mask)
            x = h + x"""


def script(bug: bool) -> str:
    return _SCRIPT.replace("__BLOCK__", _BUG if bug else _TWIN)
