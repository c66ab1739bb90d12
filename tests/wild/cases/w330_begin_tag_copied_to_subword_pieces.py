"""Word-level BIO tags copied to every subword piece of the word: a ``B-`` tag is repeated on the continuation
pieces where ``I-`` belongs, so the tagger learns to open a new entity in the middle of a word and entity spans read
off its predictions are cut at every split word -- with no error.

Source: huggingface/transformers#14055 (https://github.com/huggingface/transformers/pull/14055), "Fix label
attribution in token classification examples": "Currently, when a word is split into tokens in the token
classification examples, all tokens get the same label as the word. But if that label is a B-Xxx, only the first
token should get it, the following ones should have an I-Xxx label." (merged, fixes #14043). Here sentences of 10
synthetic words (each split into 1-3 pieces, continuation pieces with their own ids) hold entities of one or two
words, a BiGRU tagger is trained on piece-level tags, and entity spans are read off its predictions on held-out
sentences (a span opens at ``B`` or at an ``I`` after ``O``) and compared with the gold spans; the bug's training
tags repeat the word's tag on every piece, the twin's turn a ``B`` into ``I`` after the first piece. The examples'
BERT model and tokenizer are replaced by the BiGRU and the synthetic pieces.

Metric: test entity F1 (exact spans) (plain ``python``, CPU, seed 0): bug 0.2552, twin 1.0000
"""

REPORT = "N304"
MECHANISM = "begin-tag-repeated-on-word-pieces"
SLUGS = ()
METRIC = ("test_entity_f1", 0.2552, 1.0000)

_SCRIPT = '''import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)
ENT, OTHER, WORDS = 30, 50, 10
O, B, I = 0, 1, 2
pieces_of = torch.randint(1, 4, (ENT + OTHER,))


def sentence(copy_begin):
    words, tags, k = [], [], 0
    while k < WORDS:
        if torch.rand(()) < 0.3 and (not tags or tags[-1] == O):
            n = min(int(torch.randint(1, 3, ())), WORDS - k)
            words += torch.randint(0, ENT, (n,)).tolist()
            tags += [B] + [I] * (n - 1)
            k += n
        else:
            words.append(int(torch.randint(ENT, ENT + OTHER, ())))
            tags.append(O)
            k += 1
    ids, train_tags, gold = [], [], []
    for w, t in zip(words, tags):
        for j in range(int(pieces_of[w])):
            ids.append(w if j == 0 else ENT + OTHER + w)
            gold.append(t if j == 0 or t == O else I)
            train_tags.append(t if copy_begin else gold[-1])
    return ids, train_tags, gold


def batch(n, copy_begin):
    rows = [sentence(copy_begin) for _ in range(n)]
    width = max(len(r[0]) for r in rows)
    x = torch.zeros(n, width, dtype=torch.long)
    y = torch.full((n, width), -100)
    g = torch.full((n, width), -100)
    for k, (ids, tags, gold) in enumerate(rows):
        x[k, :len(ids)] = torch.tensor(ids) + 1
        y[k, :len(ids)] = torch.tensor(tags)
        g[k, :len(ids)] = torch.tensor(gold)
    return x, y, g


def spans(tags):
    out, start = set(), None
    for k, t in enumerate(tags + [O]):
        if start is not None and t != I:
            out.add((start, k))
            start = None
        if t == B or (t == I and start is None):
            start = k
    return out


class Tagger(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(2 * (ENT + OTHER) + 1, 32, padding_idx=0)
        self.rnn = nn.GRU(32, 32, batch_first=True, bidirectional=True)
        self.out = nn.Linear(64, 3)

    def forward(self, x):
        return self.out(self.rnn(self.emb(x))[0])


model = Tagger()
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
#@guard
for step in range(200):
    x, y, _ = batch(32, __COPY__)
    loss = F.cross_entropy(model(x).reshape(-1, 3), y.reshape(-1), ignore_index=-100)
    opt.zero_grad()
    loss.backward()
    opt.step()
tp = n_pred = n_gold = 0
with torch.no_grad():
    x, _, g = batch(500, False)
    pred = model(x).argmax(-1)
    for k in range(len(x)):
        n = int((g[k] != -100).sum())
        p, t = spans(pred[k, :n].tolist()), spans(g[k, :n].tolist())
        tp, n_pred, n_gold = tp + len(p & t), n_pred + len(p), n_gold + len(t)
print(f"METRIC {2 * tp / (n_pred + n_gold):.4f}")
'''


def script(bug: bool) -> str:
    return _SCRIPT.replace('__COPY__', 'True' if bug else 'False')
