"""A vocabulary whose padding and unknown entries are the same word: the unknown entry overwrites the padding one
at index ``len(word2idx)``, which is then 1 while the dictionary holds a single key, so the first real word is
numbered 1 as well; two tags share an index, the model is trained on merged labels, and decoding turns one tag into
the other -- nothing fails.

Source: FudanNLP/fastNLP#252 (https://github.com/FudanNLP/fastNLP/issues/252) (translated): "the Vocabulary class
has a bug in build_vocab: when padding and unknown are the same token, the indices go wrong, e.g. `tag_vocab =
Vocabulary(min_freq=None, padding=\\"o\\", unknown=\\"o\\").from_dataset(...)` produces word2idx `{'o': 1, 'b': 1,
...}`"; maintainer: "OK, I'll make a patch". Here a tag vocabulary built like fastNLP's (padding and unknown set to
the outside tag ``o``, then the other tags by frequency) indexes the tags of synthetic sentences in which some
tokens begin an entity (``b``) and the next continue it (``i``); a tagger is trained on those indices and its
decoded tags are scored against the true tags; the twin only adds the unknown entry when it is not already there,
as the suggested fix does. The reproduction replaces fastNLP's data sets and models by an embedding-and-MLP tagger
on synthetic sentences.

Metric: test tag accuracy of the decoded tags (plain ``python``, CPU, seed 0): bug 0.3338, twin 1.0000
"""

REPORT = "N399"
MECHANISM = "vocabulary-special-tokens-share-index"
SLUGS = ()
METRIC = ("test_tag_accuracy", 0.3338, 1.0)

_SCRIPT = '''import random
from collections import Counter

import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)
rng = random.Random(0)
STARTS = set(range(10))          # tokens that begin an entity; the token after one continues it


def sentence():
    toks = [rng.randrange(50) for _ in range(20)]
    tags, prev_start = [], False
    for t in toks:
        if t in STARTS:
            tags.append("b")
        elif prev_start:
            tags.append("i")
        else:
            tags.append("o")
        prev_start = t in STARTS
    return toks, tags


data = [sentence() for _ in range(1500)]


class Vocabulary:
    def __init__(self, padding, unknown):
        self.padding, self.unknown = padding, unknown
        self.word_count = Counter()

    def update(self, words):
        self.word_count.update(words)

    def build_vocab(self):
        self.word2idx = {}
        if self.padding is not None:
            self.word2idx[self.padding] = len(self.word2idx)
__UNKNOWN__
        start_idx = len(self.word2idx)
        words = [w for w, _ in self.word_count.most_common() if w not in self.word2idx]
        self.word2idx.update({w: i + start_idx for i, w in enumerate(words)})
        self.idx2word = {i: w for w, i in self.word2idx.items()}


tag_vocab = Vocabulary(padding="o", unknown="o")
for _, tags in data:
    tag_vocab.update(tags)
tag_vocab.build_vocab()
print("word2idx", tag_vocab.word2idx)
x = torch.tensor([t for t, _ in data])
y = torch.tensor([[tag_vocab.word2idx[g] for g in tags] for _, tags in data])


class Tagger(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(50, 16)
        self.mlp = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 4))

    def forward(self, x):
        e = self.emb(x)
        prev = torch.cat([torch.zeros_like(e[:, :1]), e[:, :-1]], 1)
        return self.mlp(torch.cat([e, prev], -1))


model = Tagger()
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
#@guard
for epoch in range(10):
    for i in torch.randperm(1200).split(50):
        loss = F.cross_entropy(model(x[i]).reshape(-1, 4), y[i].reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
model.eval()
with torch.no_grad():
    pred = model(x[1200:]).argmax(-1)
decoded = [[tag_vocab.idx2word.get(int(p), "o") for p in row] for row in pred]
truth = [tags for _, tags in data[1200:]]
acc = sum(a == b for d, t in zip(decoded, truth) for a, b in zip(d, t)) / sum(len(t) for t in truth)
print(f"METRIC {acc:.4f}")
'''

_BUG = '''        if self.unknown is not None:
            self.word2idx[self.unknown] = len(self.word2idx)'''
_FIX = '''        if self.unknown is not None and self.unknown not in self.word2idx:
            self.word2idx[self.unknown] = len(self.word2idx)'''


def script(bug: bool) -> str:
    return _SCRIPT.replace("__UNKNOWN__", _BUG if bug else _FIX)
