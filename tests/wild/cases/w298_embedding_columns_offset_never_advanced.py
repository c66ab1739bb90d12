"""A tabular encoder for several vector-valued (embedding) columns that slices the concatenated feature tensor at
``start_idx`` but never advances ``start_idx``: every column's linear layer reads the first column's slice, the
other columns never reach the model, and a label that depends on them is not learnt -- with no error.

Source: pyg-team/pytorch-frame#455 (https://github.com/pyg-team/pytorch-frame/pull/455), "Fix offset in
LinearEmbeddingEncoder": "The forward function does not increment the ``start_idx`` variable, so only the first one
is used correctly if multiple embedding columns are present"; maintainer: "Great catch!" (merged). Here three
synthetic 8-dimensional embedding columns are encoded by one linear layer each, stacked and classified by an MLP;
the label depends mostly on the second and third columns. The buggy loop leaves ``start_idx`` at 0, the twin adds
each column's width. PyTorch Frame's ``TensorFrame`` is replaced by a plain concatenated tensor.

Metric: test accuracy (plain ``python``, CPU, seed 0): bug 0.5867, twin 0.9750
"""

REPORT = "N272"
MECHANISM = "column-offset-never-advanced"
SLUGS = ()
METRIC = ("test_accuracy", 0.5867, 0.9750)

_SCRIPT = '''import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)
N, COLS, DIM = 3000, 3, 8
emb = torch.randn(N, COLS, DIM)
w = torch.randn(COLS, DIM)
score = (emb * w).sum(-1)
y = (score[:, 1] + score[:, 2] - 0.3 * score[:, 0] > 0).long()
x = emb.reshape(N, COLS * DIM)
tr, te = slice(0, 2400), slice(2400, N)


class LinearEmbeddingEncoder(nn.Module):
    def __init__(self, dims, out):
        super().__init__()
        self.dims = dims
        self.lins = nn.ModuleList(nn.Linear(d, out) for d in dims)

    def forward(self, feat):
        start_idx = 0
        xs = []
        for dim, lin in zip(self.dims, self.lins):
            xs.append(lin(feat[:, start_idx:start_idx + dim]))
            __ADVANCE__
        return torch.stack(xs, 1)


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = LinearEmbeddingEncoder([DIM] * COLS, 16)
        self.head = nn.Sequential(nn.Flatten(), nn.ReLU(), nn.Linear(16 * COLS, 32), nn.ReLU(), nn.Linear(32, 2))

    def forward(self, feat):
        return self.head(self.enc(feat))


model = Model()
opt = torch.optim.Adam(model.parameters(), lr=3e-3)
#@guard
for step in range(300):
    i = torch.randint(0, 2400, (128,))
    loss = F.cross_entropy(model(x[tr][i]), y[tr][i])
    opt.zero_grad()
    loss.backward()
    opt.step()
with torch.no_grad():
    acc = (model(x[te]).argmax(1) == y[te]).float().mean().item()
print(f"METRIC {acc:.4f}")
'''


def script(bug: bool) -> str:
    return _SCRIPT.replace('__ADVANCE__', 'pass' if bug else 'start_idx += dim')
