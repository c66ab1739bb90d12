"""Attention logits divided by a scale that was defined as ``head_dim ** -0.5``: dividing by it multiplies the
logits by ``sqrt(head_dim)`` where they should be multiplied by ``1 / sqrt(head_dim)``, so the logits are
``head_dim`` times too large, the softmax saturates and attention learns slowly and badly -- with no error.

Source: esceptico/perceiver-io#9 (https://github.com/esceptico/perceiver-io/issues/9), "Bug in
MultiHeadAttention": "in the referenced line `self.scale` should be multiplied instead of the divide, since
it's defined as `self.scale = self.qk_head_dim ** -0.5`. The correct expression should be `attention = (q @
k.transpose(-2, -1) * self.scale)`"; maintainer: "Nice catch! Sorry for such a dumb mistake. Will fix it
today".  Here a two-layer pre-norm transformer (4 heads of 16 dimensions) regresses the mean of the first six
of twelve tokens from scratch (Adam, 600 steps).  The buggy attention computes ``q @ k.transpose(-2, -1) /
self.scale``, the twin ``* self.scale``.

Metric: test MSE (plain ``python``, CPU, seed 0): bug 0.3495, twin 0.0501 (lower is better)
"""

REPORT = "N215"
MECHANISM = "attention-scale-divided-instead-of-multiplied"
SLUGS = ()
METRIC = ("test_mse", 0.3495, 0.0501)

_SCRIPT = '''
import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)
V, L, D, H = 16, 12, 64, 4


def batch(n):
    x = torch.randint(0, V, (n, L))
    return x, x[:, :L // 2].float().mean(1)


class Attention(nn.Module):
    def __init__(self):
        super().__init__()
        self.qkv = nn.Linear(D, 3 * D)
        self.o = nn.Linear(D, D)
        self.scale = (D // H) ** -0.5

    def forward(self, x):
        B, T, _ = x.shape
        q, k, v = self.qkv(x).view(B, T, 3, H, D // H).permute(2, 0, 3, 1, 4)
        attention = __ATTN__
        return self.o((attention.softmax(-1) @ v).transpose(1, 2).reshape(B, T, D))


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(V, D)
        self.pos = nn.Parameter(torch.randn(L, D) * 0.02)
        self.a1, self.n1 = Attention(), nn.LayerNorm(D)
        self.a2, self.n2 = Attention(), nn.LayerNorm(D)
        self.head = nn.Linear(D, 1)

    def forward(self, x):
        h = self.emb(x) + self.pos
        h = h + self.a1(self.n1(h))
        h = h + self.a2(self.n2(h))
        return self.head(h.mean(1)).squeeze(-1)


model = Net()
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
#@guard
for step in range(600):
    x, y = batch(64)
    loss = F.mse_loss(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()

torch.manual_seed(123)
x, y = batch(2000)
with torch.no_grad():
    mse = F.mse_loss(model(x), y)
print(f"METRIC {mse.item():.4f}")
'''


def script(bug: bool) -> str:
    attn = "q @ k.transpose(-2, -1) / self.scale" if bug else "q @ k.transpose(-2, -1) * self.scale"
    return _SCRIPT.replace("__ATTN__", attn)
