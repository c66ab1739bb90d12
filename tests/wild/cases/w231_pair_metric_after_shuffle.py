"""A paired accuracy computed over a list that was shuffled first: the benchmark stores each pair of questions
in adjacent rows and scores a pair as correct only when both are answered correctly, but the evaluation script
shuffles the rows before scoring, so unrelated questions are paired and the pair accuracy measures something
else -- with no error.

Source: penghao-wu/visual_jigsaw#11 (https://github.com/penghao-wu/visual_jigsaw/pull/11), "Fix bug in MMVP pair
accuracy calculation by removing data shuffle" (merged): "`random.shuffle(data)` breaks the adjacency
assumption used in pair accuracy calculation (line 209), causing unrelated questions to be paired together -
Removed the shuffle so that original CSV pair ordering is preserved", with a table of results before and after
the fix (54.66 and 50.00 for one model).  Here a small classifier, trained briefly (30 full-batch steps on
300 images, so it mostly answers both questions of a hard pair alike, as MMVP's pairs are built to expose),
answers yes/no questions "is this digit d?" about scikit-learn's digits; each MMVP-style pair asks the same
question about a digit d and about a digit of the class it is most often confused with (answers yes and no),
stored in adjacent rows.  The buggy evaluation calls ``random.shuffle(answered)`` on the per-row results
before pairing rows ``2k`` and ``2k + 1``; the twin does not.

Metric: reported pair accuracy (plain ``python``, CPU, seed 0): bug 0.2459, twin 0.0213 (the bug reads better)
"""

REPORT = "N205"
MECHANISM = "pair-metric-over-shuffled-rows"
SLUGS = ()
METRIC = ("reported_pair_accuracy", 0.2459, 0.0213)

_SCRIPT = '''
import random
import torch
from torch import nn
import torch.nn.functional as F
from sklearn.datasets import load_digits

random.seed(0)
torch.manual_seed(0)
d = load_digits()
X = torch.tensor(d.data, dtype=torch.float32) / 16.0
Y = torch.tensor(d.target)
Xtr, Ytr, Xte, Yte = X[:300], Y[:300], X[1000:], Y[1000:]


def ask(x, q):
    return torch.cat([x, F.one_hot(q, 10).float()], 1)


model = nn.Sequential(nn.Linear(74, 32), nn.ReLU(), nn.Linear(32, 1))
opt = torch.optim.Adam(model.parameters(), lr=3e-3)
#@guard
for epoch in range(30):
    q = torch.where(torch.rand(300) < 0.5, Ytr, torch.randint(0, 10, (300,)))
    loss = F.binary_cross_entropy_with_logits(model(ask(Xtr, q)).squeeze(1), (q == Ytr).float())
    opt.zero_grad()
    loss.backward()
    opt.step()

with torch.no_grad():
    scores = torch.stack([model(ask(Xte, torch.full_like(Yte, c))).squeeze(1) for c in range(10)], 1)
confused = [int(scores[Yte == c].mean(0).argsort(descending=True)[1]) for c in range(10)]
rows = []  # (image index, question, answer), each pair in two adjacent rows
for i in range(len(Yte)):
    c = int(Yte[i])
    partners = (Yte == confused[c]).nonzero(as_tuple=True)[0]
    j = int(partners[i % len(partners)])
    rows += [(i, c, 1), (j, c, 0)]
with torch.no_grad():
    idx = torch.tensor([r[0] for r in rows])
    qs = torch.tensor([r[1] for r in rows])
    said = (model(ask(Xte[idx], qs)).squeeze(1) > 0).long().tolist()
answered = [(said[k] == rows[k][2]) for k in range(len(rows))]
__SHUFFLE__
pairs = [answered[k] and answered[k + 1] for k in range(0, len(answered), 2)]
print(f"METRIC {sum(pairs) / len(pairs):.4f}")
'''


def script(bug: bool) -> str:
    return _SCRIPT.replace("__SHUFFLE__", "random.shuffle(answered)" if bug else "")
