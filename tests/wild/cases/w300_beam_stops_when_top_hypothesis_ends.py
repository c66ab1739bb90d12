"""Beam search with a length penalty that stops as soon as the top-ranked hypothesis ends with EOS: under length
normalisation a longer hypothesis still alive can end with a better score, but the search is cut there and
returns the short one -- with no error.

Source: joeynmt/joeynmt#149 (https://github.com/joeynmt/joeynmt/pull/149), "Fixes beam search stop criteria":
"Previously, we stop an entire beam only when the top-1 predicts EOS. This seems wrong as it may happen that some
other hypotheses in the beam will produce longer sequences with a higher score"; maintainer: "Thanks so much,
this is indeed not the intended behavior!", and a user measured a gain on IWSLT14 with the fix. Here a bigram
language model is trained on counting sequences that stop early with probability 0.55 after the second token and
rarely later, and decoded from the first token with beam 4 and length penalty 1; the bug stops when the top
candidate is finished, the twin when no alive hypothesis can still beat the best finished one. JoeyNMT's batched
search over an encoder-decoder is replaced by a loop over one prompt.

Metric: length-normalised log-probability of the returned hypothesis, higher is better (plain ``python``, CPU, seed
0): bug -0.2051, twin -0.0944
"""

REPORT = "N274"
MECHANISM = "beam-stopped-at-first-finished-top"
SLUGS = ()
METRIC = ("normalised_log_prob", -0.2051, -0.0944)

_SCRIPT = '''import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)
V, EOS, MAXLEN, BEAM = 12, 0, 11, 4
p_eos = torch.full((V,), 0.02)
p_eos[2], p_eos[10] = 0.55, 1.0
corpus = []
for _ in range(3000):
    tok = 1
    seq = [tok]
    while tok != EOS and len(seq) < MAXLEN + 1:
        tok = EOS if torch.rand(()) < p_eos[tok] else tok + 1
        seq.append(tok)
    corpus.append(torch.tensor(seq))
prev = torch.cat([s[:-1] for s in corpus])
nxt = torch.cat([s[1:] for s in corpus])

model = nn.Embedding(V, V)
opt = torch.optim.Adam(model.parameters(), lr=0.1)
#@guard
for step in range(200):
    loss = F.cross_entropy(model(prev), nxt)
    opt.zero_grad()
    loss.backward()
    opt.step()


def beam_search(start, alpha=1.0):
    logp = F.log_softmax(model.weight, 1)
    alive = [([start], 0.0)]
    finished = []
    for step in range(MAXLEN):
        cand = []
        for seq, score in alive:
            for tok in range(V):
                cand.append((seq + [tok], score + logp[seq[-1], tok].item()))
        cand.sort(key=lambda c: c[1] / len(c[0]) ** alpha, reverse=True)
        top = cand[:BEAM]
        alive = [c for c in top if c[0][-1] != EOS]
        finished += [c for c in top if c[0][-1] == EOS]
        best_alive = max((s / MAXLEN ** alpha for _, s in alive), default=-1e9)
        best_done = max((s / len(q) ** alpha for q, s in finished), default=-1e9)
        if __STOP__:
            break
    return max(finished, key=lambda c: c[1] / len(c[0]) ** alpha)


with torch.no_grad():
    best = beam_search(1)
print(f"METRIC {best[1] / len(best[0]):.4f}")
'''


def script(bug: bool) -> str:
    return _SCRIPT.replace('__STOP__', 'top[0][0][-1] == EOS' if bug else 'not alive or best_done >= best_alive')
