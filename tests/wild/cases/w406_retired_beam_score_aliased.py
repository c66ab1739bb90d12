"""A beam search that records a finished hypothesis' score as ``final_scores = scores[index]`` and then sets
``scores[index]`` to ``-inf`` to retire the beam: indexing a tensor with an integer returns a view, so the recorded
score becomes ``-inf`` too, every finished hypothesis ties at ``-inf``, and the search returns the first one to finish
rather than the best -- nothing fails.

Source: speechbrain/speechbrain#2253 (https://github.com/speechbrain/speechbrain/pull/2253): in the beam search a
finished hypothesis' score is kept as ``final_scores = scores[index]``, "a reference to the variable scores[index]",
which is then set to ``-inf``, so the final score is ``-inf`` (the maintainers' fix, merged). Here a decoder MLP
(the digit's pixels, the previous token and the position in, the next token out) learns to transcribe each digit k
as the tokens k, k - 1, ..., 0 and an end token, by teacher forcing; test digits are decoded by a beam search of
width 3 written in a few lines; the bug keeps ``scores[index]`` itself, the twin a copy (``.clone()``). The
reproduction replaces an attentional speech recogniser and its scorers by a digit transcriber.

Metric: exact-match rate of the decoded transcripts of 200 test digits (plain ``python``, CPU, seed 0): bug 0.3700,
twin 0.9450
"""

REPORT = "N380"
MECHANISM = "retired-beam-score-aliased"
SLUGS = ()
METRIC = ('test_exact_match', 0.37, 0.945)

_SCRIPT = '''import torch
from torch import nn
import torch.nn.functional as F
from sklearn.datasets import load_digits

torch.manual_seed(0)
X, y = load_digits(return_X_y=True)
X = torch.tensor(X, dtype=torch.float32) / 16.0
y = torch.tensor(y)
perm = torch.randperm(len(y))
tr, te = perm[:1300], perm[1300:1500]
EOS, BOS, V, MAX_LEN, BEAM = 10, 11, 12, 12, 3
# the transcript of digit k: the tokens k, k-1, ..., 0, then EOS (length k + 2)


def transcript(k):
    return list(range(k, -1, -1)) + [EOS]


class Decoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(64 + V + MAX_LEN, 128), nn.ReLU(), nn.Linear(128, V))

    def forward(self, x, prev, pos):
        return self.net(torch.cat([x, F.one_hot(prev, V).float(), F.one_hot(pos, MAX_LEN).float()], -1))


def teacher_forced(idx):
    xs, prevs, poss, tgts = [], [], [], []
    for i in idx.tolist():
        seq = transcript(y[i].item())
        for t, tok in enumerate(seq):
            xs.append(X[i])
            prevs.append(BOS if t == 0 else seq[t - 1])
            poss.append(t)
            tgts.append(tok)
    return torch.stack(xs), torch.tensor(prevs), torch.tensor(poss), torch.tensor(tgts)


model = Decoder()
opt = torch.optim.Adam(model.parameters(), lr=3e-3)
#@guard
for step in range(150):
    x, prev, pos, tgt = teacher_forced(tr[torch.randint(0, len(tr), (32,))])
    loss = F.cross_entropy(model(x, prev, pos), tgt)
    opt.zero_grad()
    loss.backward()
    opt.step()


@torch.no_grad()
def beam_search(x):
    hyps = [[]]
    scores = torch.zeros(1)
    finished = []
    for t in range(MAX_LEN):
        prev = torch.tensor([h[-1] if h else BOS for h in hyps])
        logp = F.log_softmax(model(x.expand(len(hyps), -1), prev, torch.full((len(hyps),), t)), -1)
        cand = (scores[:, None] + logp).view(-1)
        top = cand.topk(BEAM)
        hyps = [hyps[j // V] + [j % V] for j in top.indices.tolist()]
        scores = top.values.clone()
        for index in range(BEAM):
            if hyps[index][-1] == EOS:
__FINAL__                scores[index] = float('-inf')
                finished.append((final_scores, hyps[index]))
        if all(s == float('-inf') for s in scores.tolist()):
            break
    if not finished:
        return hyps[0]
    best = max(range(len(finished)), key=lambda i: finished[i][0].item())
    return finished[best][1]


correct = sum(beam_search(X[i:i + 1]) == transcript(y[i].item()) for i in te.tolist())
print(f"METRIC {correct / len(te):.4f}")
'''


def script(bug: bool) -> str:
    final = ('                final_scores = scores[index]\n' if bug
             else '                final_scores = scores[index].clone()\n')
    return _SCRIPT.replace('__FINAL__', final)
