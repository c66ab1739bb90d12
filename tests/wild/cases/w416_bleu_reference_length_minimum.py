"""A corpus BLEU whose brevity penalty takes the shortest reference of each sentence as the reference length: with
several references the "best match length" is the one closest to the candidate, and a short paraphrase among
the references makes a candidate cut below the full reference look long enough, so its brevity goes unpenalised
and the score reads higher than BLEU -- nothing fails.

Source: meta-pytorch/torcheval#195 (https://github.com/meta-pytorch/torcheval/pull/195), "fix: correct
reference length calculation": "Previously, `len_reference` was calculated as `min([len(ref) for ref in
references_tokenized])`. However, this is incorrect, because according to the paper, we need to find the \\"best
match length\\", not the minimum reference length" (the author's test compares with NLTK's ``corpus_bleu``; a
maintainer: "thanks for this contribution!", then asked only for unrelated formatting to be reverted; the pull
request is closed, as torcheval's are when they land through Meta's internal tooling). Here a small MLP learns to
reverse 10-token sequences, its outputs are capped at 8 tokens (a generation length below the references'), and
each test sentence has two references, the full reversed sequence and a condensed one of every other token; the
bug scores the outputs with the minimum reference length, the twin with the closest, as the fix does. The
reproduction replaces a translation model and text by the toy reversal task and digit tokens.

Metric: test BLEU-4 of the capped outputs (plain ``python``, CPU, seed 0): bug 1.0000, twin 0.7788 (the bug reads
better; the twin's is BLEU)
"""

REPORT = "N390"
MECHANISM = "bleu-reference-length-minimum-not-closest"
SLUGS = ()
METRIC = ("test_bleu", 1.0, 0.7788)

_SCRIPT = '''import math
from collections import Counter

import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)
V, L, CAP = 10, 10, 8
src = torch.randint(0, V, (2000, L))
tgt = src.flip(1)
x = F.one_hot(src, V).float().view(len(src), -1)
model = nn.Sequential(nn.Linear(L * V, 256), nn.ReLU(), nn.Linear(256, L * V))
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
#@guard
for step in range(600):
    i = torch.randint(0, 1600, (128,))
    loss = F.cross_entropy(model(x[i]).view(-1, V), tgt[i].reshape(-1))
    opt.zero_grad()
    loss.backward()
    opt.step()

with torch.no_grad():
    out = model(x[1600:]).view(-1, L, V).argmax(-1)[:, :CAP]   # generation capped at CAP tokens
candidates = [" ".join(map(str, row.tolist())) for row in out]
references = [[" ".join(map(str, t.tolist())), " ".join(map(str, t[::2].tolist()))] for t in tgt[1600:]]


def ngrams(tokens, n):
    return Counter(tuple(tokens[i:i + n]) for i in range(len(tokens) - n + 1))


def bleu_score(candidates, references, n_gram=4):
    input_len, target_len = 0, 0
    matches, possible = [0] * n_gram, [0] * n_gram
    for cand, refs in zip(candidates, references):
        c = cand.split()
        rs = [r.split() for r in refs]
        input_len += len(c)
__REFLEN__
        for n in range(1, n_gram + 1):
            cand_counts = ngrams(c, n)
            max_ref = Counter()
            for r in rs:
                max_ref |= ngrams(r, n)
            matches[n - 1] += sum((cand_counts & max_ref).values())
            possible[n - 1] += max(len(c) - n + 1, 0)
    log_p = sum(math.log(m / p) for m, p in zip(matches, possible)) / n_gram
    bp = math.exp(min(0.0, 1.0 - target_len / input_len))
    return bp * math.exp(log_p)


print(f"METRIC {bleu_score(candidates, references):.4f}")
'''

_BUG = "        target_len += min(len(r) for r in rs)"
_FIX = "        target_len += min((abs(len(r) - len(c)), len(r)) for r in rs)[1]"


def script(bug: bool) -> str:
    return _SCRIPT.replace("__REFLEN__", _BUG if bug else _FIX)
