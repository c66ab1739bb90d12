"""Word-level tags laid on subword positions: after segmentation a word can span several tokens, but the tag list is
used as if there were one token per word, so every tag after the first split word lands on the wrong token and the
tagger learns shifted labels -- with no error.

Source: nlpaueb/gr-nlp-toolkit#13 (https://github.com/nlpaueb/gr-nlp-toolkit/pull/13), "Fix bugs": "Fixed subword
segmentation offseting the true labels" (merged). Here sentences of eight synthetic words, each segmented into one
to three pieces, are tagged by a bidirectional GRU; the tag is a function of the word. The bug sets the token
labels to the word tags in order (padded with the ignore index), the twin puts each word's tag on its first piece
and ignores the others. The toolkit's BERT tagger is replaced by the GRU.

Metric: word-level test accuracy read at each word's first piece (plain ``python``, CPU, seed 0): bug 0.5068, twin
0.9343
"""

REPORT = "N288"
MECHANISM = "word-tags-not-aligned-to-subwords"
SLUGS = ()
METRIC = ("test_word_accuracy", 0.5068, 0.9343)

_SCRIPT = '''import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)
N_WORDS, N_PIECES, N_TAGS, LEN = 60, 40, 4, 8
word_pieces = [torch.randint(1, N_PIECES, (int(torch.randint(1, 4, ()).item()),)).tolist() for _ in range(N_WORDS)]
word_tag = torch.randint(0, N_TAGS, (N_WORDS,))


def tokenize(words):
    ids, first = [], []
    for w in words:
        first.append(len(ids))
        ids.extend(word_pieces[w])
    return ids, first


def batch(n):
    seqs, labels, firsts, gold = [], [], [], []
    for _ in range(n):
        words = torch.randint(0, N_WORDS, (LEN,)).tolist()
        ids, first = tokenize(words)
        tags = word_tag[words].tolist()
        __LABELS__
        seqs.append(ids)
        labels.append(lab)
        firsts.append(first)
        gold.append(tags)
    width = max(len(s) for s in seqs)
    x = torch.zeros(n, width, dtype=torch.long)
    y = torch.full((n, width), -100, dtype=torch.long)
    for i, (s, lab) in enumerate(zip(seqs, labels)):
        x[i, :len(s)] = torch.tensor(s)
        y[i, :len(lab)] = torch.tensor(lab)
    return x, y, firsts, gold


class Tagger(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(N_PIECES, 32, padding_idx=0)
        self.rnn = nn.GRU(32, 32, batch_first=True, bidirectional=True)
        self.out = nn.Linear(64, N_TAGS)

    def forward(self, x):
        return self.out(self.rnn(self.emb(x))[0])


model = Tagger()
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
#@guard
for step in range(200):
    x, y, _, _ = batch(64)
    logits = model(x)
    loss = F.cross_entropy(logits.reshape(-1, N_TAGS), y.reshape(-1), ignore_index=-100)
    opt.zero_grad()
    loss.backward()
    opt.step()
with torch.no_grad():
    x, _, firsts, gold = batch(500)
    pred = model(x).argmax(-1)
    hits = [int(pred[i, f] == t) for i in range(500) for f, t in zip(firsts[i], gold[i])]
print(f"METRIC {sum(hits) / len(hits):.4f}")
'''


_ALIGNED = "lab = [-100] * len(ids)\n        for f, t in zip(first, tags):\n            lab[f] = t"


def script(bug: bool) -> str:
    return _SCRIPT.replace('__LABELS__', 'lab = tags' if bug else _ALIGNED)
