"""Categorical encoding that maps values missing from the vocabulary to their nearest known neighbour: the
encoder looks values up with a sorted search and keeps the insertion index whether or not the value is
there, so a category never seen (or too rare to enter the vocabulary) is trained and scored as whichever
known category sorts next to it -- with no error.

Source: NVIDIA-Merlin/NVTabular#312 (https://github.com/NVIDIA-Merlin/NVTabular/issues/312), "[BUG]
Categorical encoding of unknown values" (labels: bug): "unknown values in the validation set should be mapped
to an unknown category (id 0). However, when run without frequency caps - we're using 'search_sorted' to lookup
the categorical ids. When the categorical isn't in the train set, this maps to the nearest key by sort order
instead of setting to an unknown value."  Here a regression target is a numeric effect plus a strong per-
category effect; the vocabulary keeps the categories seen at least 5 times in training, the rare ones and the
validation set's unseen ones get id 0 (an "unknown" embedding) in the twin and the searched neighbour's id
in the buggy script.  The model is an embedding of the category plus an MLP of four numeric features.
NVTabular encodes on GPU dataframes; the lookup is reproduced with ``torch.searchsorted``.

Metric: validation MSE (plain ``python``, CPU, seed 0): bug 2.9944, twin 1.9308 (lower is better)
"""

REPORT = "N232"
MECHANISM = "unseen-category-encoded-as-nearest-known"
SLUGS = ()
METRIC = ("val_mse", 2.9944, 1.9308)

_SCRIPT = '''import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)
n_ids = 400
effect = torch.randn(n_ids) * 1.5
common = torch.randperm(n_ids)[:60]


def rows(n, ids):
    cat = ids[torch.randint(0, len(ids), (n,))]
    x = torch.randn(n, 4)
    y = x[:, 0] - 0.5 * x[:, 1] + effect[cat] + 0.1 * torch.randn(n)
    return cat, x, y


c1, x1, y1 = rows(3000, common)
c2, x2, y2 = rows(600, torch.arange(n_ids))
cat_tr, x_tr, y_tr = torch.cat([c1, c2]), torch.cat([x1, x2]), torch.cat([y1, y2])
cat_va, x_va, y_va = rows(2000, torch.arange(n_ids))

counts = torch.bincount(cat_tr, minlength=n_ids)
vocab = torch.nonzero(counts >= 5).flatten().sort().values


def encode(values):
    idx = torch.searchsorted(vocab, values).clamp(max=len(vocab) - 1)
    found = vocab[idx] == values
    return torch.where(found, idx + 1, __UNKNOWN__)


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(len(vocab) + 1, 1)
        nn.init.zeros_(self.emb.weight)
        self.mlp = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 1))

    def forward(self, c, x):
        return self.emb(c).squeeze(-1) + self.mlp(x).squeeze(-1)


e_tr, e_va = encode(cat_tr), encode(cat_va)
model = Model()
opt = torch.optim.Adam(model.parameters(), lr=3e-2)
#@guard
for step in range(400):
    i = torch.randint(0, len(y_tr), (256,))
    loss = F.mse_loss(model(e_tr[i], x_tr[i]), y_tr[i])
    opt.zero_grad()
    loss.backward()
    opt.step()
with torch.no_grad():
    mse = F.mse_loss(model(e_va, x_va), y_va).item()
print(f"METRIC {mse:.4f}")
'''


def script(bug: bool) -> str:
    s = _SCRIPT
    s = s.replace('__UNKNOWN__', 'idx + 1' if bug else 'torch.zeros_like(idx)')
    return s
