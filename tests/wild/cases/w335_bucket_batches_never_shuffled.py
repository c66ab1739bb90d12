"""A bucketing batch sampler that sorts the instances by length, cuts the sorted list into batches and yields the
batches in that order every epoch: the model sees the shortest instances first and the longest last in every
epoch, so each epoch ends on one end of the length distribution and the model ends biased towards it -- with no
error.

Source: allenai/allennlp#3985 (https://github.com/allenai/allennlp/pull/3985), "Shuffle batches in bucket
sampler": "I trained a model and discovered that the batches were not shuffled when using the
`BucketBatchSampler`, so the model was seeing shortest instances first, then longer instances. This isn't great
from a learning standpoint. This PR fixes that issue." (merged). Here synthetic reviews of 4 to 59 tokens are
classified by a mean-of-embeddings model; the label is more often positive in long reviews than in short ones (as
ratings and review lengths go together), and each class draws its words from a vocabulary slightly tilted towards
its own half. A sampler written like ``BucketBatchSampler`` sorts by length (with AllenNLP's 10% noise) and cuts
batches of 32; the bug yields the batches in sorted order, the twin shuffles the list of batches each epoch (the
fix). The reproduction replaces AllenNLP's models and data by the synthetic reviews.

Metric: test accuracy (plain ``python``, CPU, seed 0): bug 0.7840, twin 0.8290
"""

REPORT = "N309"
MECHANISM = "bucket-batches-yielded-in-length-order"
SLUGS = ()
METRIC = ("test_accuracy", 0.7840, 0.8290)

_SCRIPT = '''import random

import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)
random.seed(0)
V, N = 200, 3000
word_class = torch.randint(0, 2, (V,))


def make(n):
    lengths = torch.randint(4, 60, (n,))
    labels = (torch.rand(n) < 0.05 + 0.9 * (lengths - 4) / 56).long()
    seqs = []
    for length, c in zip(lengths.tolist(), labels.tolist()):
        w = torch.where(word_class == c, 1.5, 1.0)
        seqs.append(torch.multinomial(w, length, replacement=True))
    return seqs, labels


train, ytr = make(N)
test, yte = make(1000)


def pad(seqs):
    out = torch.full((len(seqs), max(len(s) for s in seqs)), V)
    for i, s in enumerate(seqs):
        out[i, :len(s)] = s
    return out


class BucketBatchSampler:
    def __init__(self, lengths, batch_size, noise=0.1):
        self.lengths, self.batch_size, self.noise = lengths, batch_size, noise

    def __iter__(self):
        keys = [n + random.uniform(-self.noise, self.noise) * n for n in self.lengths]
        order = sorted(range(len(keys)), key=keys.__getitem__)
        batches = [order[i:i + self.batch_size] for i in range(0, len(order), self.batch_size)]
__SHUFFLE__
        return iter(batches)


class BagModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(V + 1, 16, padding_idx=V)
        self.out = nn.Linear(16, 2)

    def forward(self, t):
        mask = (t != V).float().unsqueeze(-1)
        return self.out((self.emb(t) * mask).sum(1) / mask.sum(1))


model = BagModel()
opt = torch.optim.Adam(model.parameters(), lr=0.01)
#@guard
sampler = BucketBatchSampler([len(s) for s in train], 32)
for epoch in range(5):
    for batch in sampler:
        loss = F.cross_entropy(model(pad([train[i] for i in batch])), ytr[batch])
        opt.zero_grad()
        loss.backward()
        opt.step()
with torch.no_grad():
    acc = (model(pad(test)).argmax(1) == yte).float().mean().item()
print(f"METRIC {acc:.4f}")
'''


def script(bug: bool) -> str:
    return _SCRIPT.replace('__SHUFFLE__\n', "" if bug else "        random.shuffle(batches)\n")
