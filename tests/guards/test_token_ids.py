"""Token ids mean one thing each (issue 33, session 55, round nineteen's w425, w426, w431):

- ``padding-fills-with-token``: sequences padded with a real token's id while the embedding's padding_idx is
  another id (planted on synthetic sentences whose unknown word is the filling; twins: padded with padding_idx, a
  table without padding_idx);
- ``vocabulary-ids-shared``: a vocabulary that gives two tokens one id (planted on digits' class names, numbered by
  a vocabulary whose padding and unknown entries are one string; twins: the entry added once, a synonym label map
  with no map back);
- ``eval-positions-shifted``: a position table read at evaluation at rows training never read (planted with 0-based
  ids for a table trained from padding_idx + 1; twins: the training convention, longer sequences at evaluation).
"""

from __future__ import annotations

import io

import torch
import torch.nn.functional as F
from torch import nn

from overt.guards.options import GuardOptions
from overt.guards.session import GuardSession
from tests.conftest import TIMING
from tests.guards.helpers import run_script_probe, slug_set, slugs

# -- padding-fills-with-token ------------------------------------------------------------------------------------

V, PAD, UNK, T = 30, 29, 28, 16


def _sentences(n: int, fill: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Sentences of 4 to 16 ids in [1, 28) padded to 16 with ``fill``; class 1 holds one or two unknown words."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.full((n, T), fill, dtype=torch.long)
    y = torch.randint(0, 2, (n,), generator=g)
    for i in range(n):
        k = int(torch.randint(4, T + 1, (1,), generator=g))
        ids[i, :k] = torch.randint(1, UNK, (k,), generator=g)
        if y[i]:
            ids[i, int(torch.randint(0, k, (1,), generator=g))] = UNK
    return ids, y


class MeanPool(nn.Module):
    def __init__(self, padding_idx):
        super().__init__()
        self.emb = nn.Embedding(V, 16, padding_idx=padding_idx)
        self.head = nn.Linear(16, 2)

    def forward(self, x):
        return self.head(self.emb(x).mean(1))


def _train(model, make, steps=12):
    torch.manual_seed(0)
    session = GuardSession(GuardOptions(stream=io.StringIO(), ignore=TIMING), auto=True)
    try:
        opt = torch.optim.Adam(model.parameters(), lr=1e-2)
        for k in range(steps):
            x, y = make(k)
            opt.zero_grad()
            F.cross_entropy(model(x), y).backward()
            opt.step()
    finally:
        findings = session.close()
    return findings, session.options.stream.getvalue()


def test_padding_with_a_real_tokens_id_is_named_and_padding_with_padding_idx_is_silent():
    torch.manual_seed(0)
    findings, text = _train(MeanPool(PAD), lambda k: _sentences(32, UNK, k))
    assert slugs(findings) == ["padding-fills-with-token"], text
    assert "padded at their end with id 28" in text and "padding_idx 29" in text, text
    assert "test_token_ids.py:47" in text, text  # the table's padding_idx
    torch.manual_seed(0)
    findings, text = _train(MeanPool(PAD), lambda k: _sentences(32, PAD, k))
    assert findings == [], text


def test_padding_without_a_declared_padding_idx_is_silent():
    torch.manual_seed(0)
    findings, text = _train(MeanPool(None), lambda k: _sentences(32, UNK, k))
    assert findings == [], text


def test_left_padding_with_a_real_tokens_id_is_named():
    torch.manual_seed(0)

    def make(k):
        x, y = _sentences(32, UNK, k)
        return x.flip(1), y

    findings, text = _train(MeanPool(PAD), make)
    assert slugs(findings) == ["padding-fills-with-token"], text
    assert "padded at their start" in text, text


# -- vocabulary-ids-shared --------------------------------------------------------------------------------------

VOCAB_SCRIPT = '''
import torch
from sklearn.datasets import load_digits
from torch import nn
import torch.nn.functional as F

NAMES = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"]


class Vocabulary:
    def __init__(self, padding, unknown):
        self.padding, self.unknown = padding, unknown

    def build(self, words):
        self.word2idx = {}
        self.word2idx[self.padding] = len(self.word2idx)
        __UNKNOWN__
        for w in words:
            if w not in self.word2idx:
                self.word2idx[w] = len(self.word2idx)
        self.idx2word = {i: w for w, i in self.word2idx.items()}


torch.manual_seed(0)
d = load_digits()
x = torch.tensor(d.data, dtype=torch.float32) / 16
names = [NAMES[t] for t in d.target]
vocab = Vocabulary(padding="zero", unknown="zero")
vocab.build(names)
y = torch.tensor([vocab.word2idx[w] for w in names])
model = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 11))
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
for step in range(30):
    i = (step * 32) % 1400
    opt.zero_grad()
    F.cross_entropy(model(x[i:i + 32]), y[i:i + 32]).backward()
    opt.step()
'''


def test_a_vocabulary_with_two_tokens_under_one_id_is_named_and_its_fix_is_silent(tmp_path):
    bug = VOCAB_SCRIPT.replace("__UNKNOWN__", "self.word2idx[self.unknown] = len(self.word2idx)")
    findings = run_script_probe(tmp_path, bug, head="")
    assert slug_set(findings) == ["vocabulary-ids-shared"], findings
    (f,) = findings
    assert "vocab.word2idx" in f["message"] and "'zero' and 'one'" in f["message"], f["message"]
    assert f["where"].endswith("train.py:17"), f["where"]  # the second write: the unknown entry
    fix = VOCAB_SCRIPT.replace("__UNKNOWN__", "if self.unknown not in self.word2idx:\n"
                               "            self.word2idx[self.unknown] = len(self.word2idx)")
    assert run_script_probe(tmp_path, fix, head="") == []


def test_a_synonym_label_map_without_a_map_back_is_silent(tmp_path):
    body = VOCAB_SCRIPT.replace("__UNKNOWN__", "pass").replace(
        "vocab.build(names)", "vocab.build(names)\nSYNONYMS = {'nil': 0, 'zero': 0, 'one': 1, 'two': 2}")
    assert run_script_probe(tmp_path, body, head="") == []


# -- eval-positions-shifted ------------------------------------------------------------------------------------

L, P = 8, 1


class Positional(nn.Module):
    def __init__(self):
        super().__init__()
        self.tok = nn.Embedding(12, 16, padding_idx=P)
        self.pos = nn.Embedding(2 * L + P + 1, 16, padding_idx=P)
        self.head = nn.Linear(16 * L, 2)

    def forward(self, x, position_ids=None):
        if position_ids is None:
            position_ids = torch.arange(x.shape[1])[None] + P + 1
        h = self.tok(x) + self.pos(position_ids)
        return self.head(h[:, :L].reshape(len(x), -1))


def _positions(eval_ids):
    torch.manual_seed(0)
    x = torch.randint(2, 12, (400, L))
    y = (x[:, 1] > x[:, 5]).long()
    session = GuardSession(GuardOptions(stream=io.StringIO(), ignore=TIMING), auto=True)
    try:
        model = Positional()
        opt = torch.optim.Adam(model.parameters(), lr=1e-2)
        for k in range(20):
            i = torch.randint(0, 300, (32,))
            opt.zero_grad()
            F.cross_entropy(model(x[i]), y[i]).backward()
            opt.step()
        model.eval()
        with torch.no_grad():
            xe = torch.randint(2, 12, (50, eval_ids(0).shape[1]))
            model(xe, eval_ids(50))
    finally:
        findings = session.close()
    return findings, session.options.stream.getvalue()


def test_zero_based_positions_at_evaluation_are_named_and_the_training_convention_is_silent():
    findings, text = _positions(lambda n: torch.arange(L)[None].expand(max(n, 1), L))
    assert slugs(findings) == ["eval-positions-shifted"], text
    assert "shifted by -2 rows" in text and "position 0 reads row 0 (trained: 2)" in text, text
    assert "test_token_ids.py:193" in text, text  # the evaluation's call
    findings, text = _positions(lambda n: torch.arange(L)[None].expand(max(n, 1), L) + P + 1)
    assert findings == [], text


def test_longer_sequences_at_evaluation_are_silent():
    findings, text = _positions(lambda n: torch.arange(2 * L)[None].expand(max(n, 1), 2 * L) + P + 1)
    assert findings == [], text
