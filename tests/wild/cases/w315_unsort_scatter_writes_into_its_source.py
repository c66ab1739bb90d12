"""Sequences sorted by length for packing are put back in batch order with an in-place ``scatter_`` whose output is
its own input: a row is overwritten before it is read, so some samples receive another sample's encoding and some
encodings appear twice -- the classifier is trained and scored on features that belong to other rows, with no error.

Source: mead-ml/mead-baseline#677 (https://github.com/mead-ml/mead-baseline/pull/677): the unsort did
``output.scatter_(0, perm_idx, output)``, which reads and writes the same tensor; the author's reproduction shows
about half the outputs differing between batched and one-at-a-time inference, and the fix scatters into a new tensor
(merged). Here a GRU encodes sequences of 2-12 tokens (packed, so sorted by length) and a linear head predicts the
class of the last real token; the bug unsorts the final hidden states in place, row after row
(``out[perm[i]] = out[i]``, what the CPU ``scatter_`` did when its source was its output), the twin scatters into
a new tensor. Departure: current PyTorch refuses ``scatter_`` (and ``index_put_``, ``index_copy_``) when source and
output share memory, so the reproduction writes the old sequential scatter as a loop; mead's embeddings and
classifier stack are replaced by one embedding and one GRU.

Metric: test accuracy (plain ``python``, CPU, seed 0): bug 0.6160, twin 1.0000
"""

REPORT = "N289"
MECHANISM = "unsort-scatter-writes-into-its-source"
SLUGS = ()
METRIC = ("test_accuracy", 0.6160, 1.0000)

_SCRIPT = '''import torch
from torch import nn
import torch.nn.functional as F
from torch.nn.utils.rnn import pack_padded_sequence

torch.manual_seed(0)
VOCAB, MAXLEN, CLASSES = 20, 12, 4


def batch(n):
    lengths = torch.randint(2, MAXLEN + 1, (n,))
    x = torch.randint(1, VOCAB, (n, MAXLEN)) * (torch.arange(MAXLEN)[None, :] < lengths[:, None])
    y = x[torch.arange(n), lengths - 1] % CLASSES
    return x, lengths, y


class Classifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(VOCAB, 16, padding_idx=0)
        self.rnn = nn.GRU(16, 32, batch_first=True)
        self.out = nn.Linear(32, CLASSES)

    def forward(self, x, lengths):
        sorted_lengths, perm = lengths.sort(descending=True)
        packed = pack_padded_sequence(self.emb(x[perm]), sorted_lengths, batch_first=True)
        _, h = self.rnn(packed)
        h = h[-1]
        __UNSORT__
        return self.out(out)


model = Classifier()
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
#@guard
for step in range(150):
    x, lengths, y = batch(64)
    loss = F.cross_entropy(model(x, lengths), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
with torch.no_grad():
    x, lengths, y = batch(1000)
    acc = (model(x, lengths).argmax(1) == y).float().mean().item()
print(f"METRIC {acc:.4f}")
'''


_BUG = """out = h.clone()
        for i in range(len(perm)):
            out[perm[i]] = out[i]"""
_TWIN = """out = torch.zeros_like(h).scatter(0, perm.unsqueeze(1).expand_as(h), h)"""


def script(bug: bool) -> str:
    return _SCRIPT.replace('__UNSORT__', _BUG if bug else _TWIN)
