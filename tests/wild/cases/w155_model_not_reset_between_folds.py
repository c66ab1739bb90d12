"""A k-fold cross-validation that builds its model once, before the fold loop: each fold goes on
training the model of the previous folds, whose training sets contained this fold's validation
samples, so the later folds score data the model has already learned and the reported mean accuracy
is inflated -- with no error.

Source: McSpooder/camull-net#6 (https://github.com/McSpooder/camull-net/issues/6), "Your cross
validation does not initialize each fold model, but uses the previously trained model as the fold
initialization model. Is this wrong?" (closed).  Here an MLP is cross-validated with 5 folds on 500
digits, four epochs per fold; the buggy script creates the model and its
optimizer once, the twin inside the fold loop.

Metric: the reported mean validation accuracy over the folds (plain ``python``, CPU, seed 0): bug
0.9, twin 0.8 (the bug reads better: the twin is the cross-validated accuracy).
"""

REPORT = "N129"
MECHANISM = "model-reused-across-folds"
SLUGS = ()
METRIC = ("reported_cv_accuracy", 0.964, 0.88)

_SCRIPT = '''
import torch
from torch import nn
import torch.nn.functional as F
from sklearn.datasets import load_digits
from sklearn.model_selection import KFold

torch.manual_seed(0)
d = load_digits()
X = torch.tensor(d.data[:500], dtype=torch.float32) / 16.0
Y = torch.tensor(d.target[:500])


def make_model():
    return nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 10))


__OUTSIDE__
scores = []
for fold, (train_idx, val_idx) in enumerate(KFold(5, shuffle=True, random_state=0).split(X)):
    __INSIDE__
    #@guard
    train_idx, val_idx = torch.tensor(train_idx), torch.tensor(val_idx)
    for epoch in range(4):
        order = train_idx[torch.randperm(len(train_idx))]
        for i in range(0, len(order), 32):
            b = order[i:i + 32]
            loss = F.cross_entropy(model(X[b]), Y[b])
            opt.zero_grad()
            loss.backward()
            opt.step()
    with torch.no_grad():
        scores.append((model(X[val_idx]).argmax(1) == Y[val_idx]).float().mean().item())
print(f"METRIC {sum(scores) / len(scores):.4f}")
'''

_CREATE = "model = make_model()\nopt = torch.optim.Adam(model.parameters(), lr=1e-3)"


def script(bug: bool) -> str:
    inside = _CREATE.replace("\n", "\n    ")
    return _SCRIPT.replace("__OUTSIDE__", _CREATE if bug else "").replace("__INSIDE__", "" if bug else inside)
