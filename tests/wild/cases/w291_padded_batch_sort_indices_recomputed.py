"""A padded batch whose length-sort indices are computed twice, the second time on the already sorted lengths: the
sequences stay in their original order while ``size_at_t`` (how many sequences are still running at step t)
assumes they are sorted longest first, so the recurrent loop stops some long sequences early and runs short ones
over padding -- with no error.

Source: explosion/thinc#464 (https://github.com/explosion/thinc/pull/464), a fix of ``list2padded``: the indices
that sort the sequences by length were computed a second time, from the lengths after sorting, so the padded array
was not in length order and the ``size_at_t`` truncation that thinc's LSTM relies on cut the wrong rows (merged,
by the maintainer). Here a GRU cell runs over a padded batch the way thinc's recurrent layers do (at step t it
updates only the first ``size_at_t[t]`` rows) and classifies whether a sequence of 3 to 30 tokens (ids 1 to 3; 0
pads) ends with a 1; the batches are built by a ``list2padded``: the buggy one takes ``argsort`` of the sorted
lengths for the order it pads in, the twin the order that sorts them. The final states are put back in the batch
order with the inverse of the indices in both. thinc's arrays are numpy or cupy; here they are torch tensors.

Metric: test accuracy (plain ``python``, CPU, seed 0): bug 0.7817, twin 1.0000
"""

REPORT = "N265"
MECHANISM = "padded-order-not-length-sorted"
SLUGS = ()
METRIC = ("test_accuracy", 0.7817, 1.0000)

_SCRIPT = '''import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)
V, H = 4, 32


def sequences(n):
    out, ys = [], []
    for _ in range(n):
        length = int(torch.randint(3, 31, ()))
        s = torch.randint(1, V, (length,))
        out.append(s)
        ys.append(int(s[-1] == 1))
    return out, torch.tensor(ys)


s_tr, y_tr = sequences(3000)
s_te, y_te = sequences(600)


def list2padded(seqs):
    lengths = torch.tensor([len(s) for s in seqs])
    order = torch.argsort(-lengths, stable=True)
    sorted_lengths = lengths[order]
    indices = __INDICES__
    size_at_t = torch.tensor([int((lengths > t).sum()) for t in range(int(lengths.max()))])
    data = torch.zeros(int(lengths.max()), len(seqs), dtype=torch.long)
    for row, k in enumerate(indices.tolist()):
        data[:len(seqs[k]), row] = seqs[k]
    return data, size_at_t, indices


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(V, 16)
        self.cell = nn.GRUCell(16, H)
        self.out = nn.Linear(H, 2)

    def forward(self, seqs):
        data, size_at_t, indices = list2padded(seqs)
        x = self.emb(data)
        h = torch.zeros(len(seqs), H)
        for t in range(len(size_at_t)):
            n = int(size_at_t[t])
            h = torch.cat([self.cell(x[t, :n], h[:n]), h[n:]])
        back = torch.empty_like(indices)
        back[indices] = torch.arange(len(indices))
        return self.out(h[back])


model = Model()
opt = torch.optim.Adam(model.parameters(), lr=5e-3)
#@guard
for step in range(250):
    i = torch.randint(0, len(s_tr), (64,)).tolist()
    loss = F.cross_entropy(model([s_tr[j] for j in i]), y_tr[i])
    opt.zero_grad()
    loss.backward()
    opt.step()
with torch.no_grad():
    pred = torch.cat([model(s_te[j:j + 100]).argmax(1) for j in range(0, len(s_te), 100)])
print(f"METRIC {(pred == y_te).float().mean().item():.4f}")
'''


def script(bug: bool) -> str:
    return _SCRIPT.replace('__INDICES__', 'torch.argsort(-sorted_lengths, stable=True)' if bug else 'order')
