"""A mean average precision at k over a top-k that is not ordered by score: the k best indices are taken as a
set (here in index order) and scored as if they were a ranking, so the rank of each hit, and the AP@k, is
the rank of its index -- with no error.

Source: microsoft/vision-evaluation#39 (https://github.com/microsoft/vision-evaluation/pull/39), "fix map_at_k
(unsorted topk to sorted)": "map@k requires predictions to be sorted, which was not the case before this PR.
This PR rectifies this issue" (merged).  Here an MLP classifies scikit-learn's digits and the evaluation
computes mAP@5 over the ten classes: the top-5 classes are selected with a threshold at the fifth score
(``np.nonzero``, so in class-index order), and the twin sorts them by score before scoring the ranks
(``np.argpartition``, which the library's code may have used, returns them sorted for arrays this small in
the numpy installed here, so the unordered selection is written out).  The buggy script leaves out the sort.

Metric: reported test mAP@5 (plain ``python``, CPU, seed 0): bug 0.4685, twin 0.9456
"""

REPORT = "N235"
MECHANISM = "map-at-k-over-unsorted-top-k"
SLUGS = ()
METRIC = ("reported_map_at_5", 0.4685, 0.9456)

_SCRIPT = '''import numpy as np
import torch
from torch import nn
import torch.nn.functional as F
from sklearn.datasets import load_digits

torch.manual_seed(0)
d = load_digits()
X = torch.tensor(d.data, dtype=torch.float32) / 16.0
Y = torch.tensor(d.target)
Xtr, Ytr, Xte, Yte = X[:1200], Y[:1200], X[1200:], Y[1200:]
model = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10))
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
#@guard
for step in range(200):
    i = torch.randint(0, len(Xtr), (64,))
    loss = F.cross_entropy(model(Xtr[i]), Ytr[i])
    opt.zero_grad()
    loss.backward()
    opt.step()


def top_k_set(scores, k):
    kth = -np.sort(-scores, axis=1)[:, k - 1:k]
    return np.stack([np.nonzero(row >= t)[0][:k] for row, t in zip(scores, kth)])


def map_at_k(scores, labels, k):
    top = top_k_set(scores, k)
__SORT__
    aps = []
    for row, label in zip(top, labels):
        hits = np.nonzero(row == label)[0]
        aps.append(1.0 / (hits[0] + 1) if len(hits) else 0.0)
    return float(np.mean(aps))


with torch.no_grad():
    scores = model(Xte).numpy()
print(f"METRIC {map_at_k(scores, Yte.numpy(), k=5):.4f}")
'''


_SORT = """    top = np.take_along_axis(top, np.argsort(-np.take_along_axis(scores, top, axis=1), axis=1), axis=1)
"""


def script(bug: bool) -> str:
    return _SCRIPT.replace("__SORT__\n", "" if bug else _SORT)
