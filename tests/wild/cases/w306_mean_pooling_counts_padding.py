"""Mean pooling of token features over every position of the padded batch: the padding positions' features enter the
average and the divisor is the padded width, so a sentence's representation is scaled by its length and a target
that is a per-token average cannot be read off it by the linear head -- with no error.

Source: dbiir/UER-py#190 (https://github.com/dbiir/UER-py/pull/190), "Update extract_features.py": "fix bug that
mean-pooling includes pad embedding" (merged). Here sequences of 3-30 tokens padded to 30 go through an embedding
and a position-wise MLP (the encoder), are mean-pooled and read by a linear head that regresses the average of the
tokens' hidden scores; the bug pools with ``h.mean(1)``, the twin with the attention mask. UER's Transformer encoder
is replaced by the position-wise MLP.

Metric: test mean squared error, lower is better (plain ``python``, CPU, seed 0): bug 0.0331, twin 0.0000
"""

REPORT = "N280"
MECHANISM = "mean-pool-counts-padding"
SLUGS = ()
METRIC = ("test_mse", 0.0331, 0.0000)

_SCRIPT = '''import torch
from torch import nn

torch.manual_seed(0)
VOCAB, MAXLEN = 50, 30
token_score = torch.randn(VOCAB)
token_score[0] = 0.0


def batch(n):
    lengths = torch.randint(3, MAXLEN + 1, (n,))
    x = torch.randint(1, VOCAB, (n, MAXLEN))
    mask = torch.arange(MAXLEN)[None, :] < lengths[:, None]
    x = x * mask
    y = (token_score[x] * mask).sum(1) / lengths
    return x, mask, y


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(VOCAB, 32)
        self.ff = nn.Sequential(nn.Linear(32, 32), nn.Tanh(), nn.Linear(32, 32))
        self.out = nn.Linear(32, 1)

    def forward(self, x, mask):
        h = self.ff(self.emb(x))
        m = mask.unsqueeze(-1).float()
        __POOL__
        return self.out(pooled).squeeze(-1)


model = Encoder()
opt = torch.optim.Adam(model.parameters(), lr=3e-3)
#@guard
for step in range(400):
    x, mask, y = batch(128)
    loss = ((model(x, mask) - y) ** 2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
with torch.no_grad():
    x, mask, y = batch(2000)
    mse = ((model(x, mask) - y) ** 2).mean().item()
print(f"METRIC {mse:.4f}")
'''


def script(bug: bool) -> str:
    return _SCRIPT.replace('__POOL__', 'pooled = h.mean(1)' if bug else 'pooled = (h * m).sum(1) / m.sum(1)')
