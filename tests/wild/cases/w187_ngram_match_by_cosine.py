"""A batched BLEU that decides whether two n-grams are equal by their cosine similarity: a unigram is
a one-element vector, and any two positive token ids have cosine 1, so every word of every hypothesis
"matches" its reference and the score is perfect whatever the model writes -- with no error.

Source: Shark-NLP/CoNT#4 (https://github.com/Shark-NLP/CoNT/issues/4), "function ``torch_bleu``
producing inappropriate results": "there is an severe mistake which results in wrong BLEU scores,
certainly when ``n_gram == 1`` ... ``sim_matrix = torch.cosine_similarity(...) >= 1.0`` Suggestion:
``sim_matrix = torch.norm(... input_tensor2_4gram.unsqueeze(3) - input_tensor1_4gram.unsqueeze(2), p=2,
dim=-1) == 0.0``"; maintainer: "Ooops! There seems to be a bug in ``torch_bleu`` function.  I only
tested the code with ``ngram = 2``".  Here an embedding model learns a word-for-word "translation"
whose references are free a third of the time, and its validation outputs are scored with unigram
BLEU (``n_gram=1``) computed on token ids in batch.  The buggy ``matched`` compares n-grams with
``F.cosine_similarity(...) >= 1.0``, the twin with a zero L2 distance.

Metric: the reported unigram BLEU precision on 500 held-out sentences (plain ``python``, CPU, seed 0):
bug 1.0, twin 0.7632 (the bug reads better: the twin is the real score)
"""

REPORT = "N161"
MECHANISM = "ngram-equality-by-cosine"
SLUGS = ()
METRIC = ("reported_bleu1", 1.0, 0.7632)

_SCRIPT = '''
import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)
g = torch.Generator().manual_seed(1)
VOCAB, LEN = 40, 10
MAPPING = torch.randperm(VOCAB, generator=g) + 1  # the "translation" of each source token (ids 1..40)


def pairs(n):
    src = torch.randint(0, VOCAB, (n, LEN), generator=g)
    tgt = MAPPING[src]
    noisy = torch.rand(n, LEN, generator=g) < 0.3  # a third of the words are translated freely
    tgt[noisy] = torch.randint(1, VOCAB + 1, (int(noisy.sum()),), generator=g)
    return src, tgt


def ngrams(ids, n):
    return ids.unfold(1, n, 1).float()  # (batch, positions, n)


def matched(hyp, ref):
    __MATCH__


def ngram_precision(hyp, ref, n):
    """Unclipped n-gram precision of each hypothesis against its reference, on token ids."""
    h, r = ngrams(hyp, n), ngrams(ref, n)
    hit = matched(h, r).any(-1)
    return hit.float().mean(1)


def bleu(hyp, ref, n_gram=1):
    return ngram_precision(hyp, ref, n_gram).mean().item()


src_train, tgt_train = pairs(3000)
src_val, tgt_val = pairs(500)
model = nn.Sequential(nn.Embedding(VOCAB, 32), nn.Linear(32, VOCAB + 1))
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
#@guard
for epoch in range(3):
    for i in range(0, 3000, 100):
        loss = F.cross_entropy(model(src_train[i:i + 100]).reshape(-1, VOCAB + 1), tgt_train[i:i + 100].reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()

with torch.no_grad():
    hyp = model(src_val).argmax(-1)
# the translations are scored against references that a third of the time say something else
print(f"METRIC {bleu(hyp, tgt_val, n_gram=1):.4f}")
'''


_BUG = "return F.cosine_similarity(hyp.unsqueeze(2), ref.unsqueeze(1), dim=-1) >= 1.0"
_TWIN = "return (hyp.unsqueeze(2) - ref.unsqueeze(1)).norm(dim=-1) == 0"


def script(bug: bool) -> str:
    return _SCRIPT.replace("__MATCH__", _BUG if bug else _TWIN)
