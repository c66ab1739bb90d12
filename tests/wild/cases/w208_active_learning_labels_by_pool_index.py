"""An active-learning loop that labels the queried samples with the labels found at their *pool*
positions read as *dataset* indices: the right samples join the labelled set, but each carries the label
of some other sample, so the training set fills with wrong labels -- with no error.

Source: baal-org/baal#200 (https://github.com/baal-org/baal/issues/200), "Repetition of data in different
samples while trying the example in production Part of documentation" (labels: bug): "labels =
[get_label(train_dataset.files[idx]) for idx in top_uncertainty]. My question is this: top_uncertainty
indexes are for train_dataset? or are they for pool data? If they are from the pool data and the labels
are being obtained from the train dataset it is possible to repeat it."; maintainer: "You are right. To
get the right label, we need to "remap" them to the full dataset. `oracle_indices =
active_learning_ds._pool_to_oracle_index(top_uncertainty)` ... `active_learning_ds.label(top_uncertainty,
labels)` still uses `top_uncertainty` as it works with pool indices."  Here an MLP is trained on the
labelled part of scikit-learn's digits (warm start) after each of eight rounds that query the 40 most uncertain pool
samples (predictive entropy); the buggy oracle reads ``y[top_uncertainty]``, the twin
``y[pool[top_uncertainty]]``.

Metric: test accuracy after the last round (plain ``python``, CPU, seed 0): bug 0.2494, twin 0.9773
"""

REPORT = "N182"
MECHANISM = "pool-index-read-as-dataset-index"
SLUGS = ()
METRIC = ("test_accuracy", 0.2494, 0.9773)

_SCRIPT = '''
import numpy as np
import torch
from torch import nn
import torch.nn.functional as F
from sklearn.datasets import load_digits

torch.manual_seed(0)
rng = np.random.default_rng(0)
digits = load_digits()
X = torch.tensor(digits.data / 16.0, dtype=torch.float32)
y = torch.tensor(digits.target)
order = rng.permutation(len(X))
train_idx, test_idx = order[:1400], order[1400:]
x_pool_all, y_pool_all = X[train_idx], y[train_idx]

labelled = {int(i): int(y_pool_all[i]) for i in rng.choice(1400, 20, replace=False)}


model = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10))
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
#@guard


def fit():
    """Go on training the model on the labelled set (warm start after each round)."""
    idx = torch.tensor(sorted(labelled))
    targets = torch.tensor([labelled[i] for i in sorted(labelled)])
    for step in range(150):
        loss = F.cross_entropy(model(x_pool_all[idx]), targets)
        opt.zero_grad()
        loss.backward()
        opt.step()


for round_ in range(8):
    fit()
    pool = np.array([i for i in range(1400) if i not in labelled])
    with torch.no_grad():
        p = model(x_pool_all[torch.tensor(pool)]).softmax(1)
    entropy = -(p * p.clamp_min(1e-9).log()).sum(1)
    top_uncertainty = entropy.argsort(descending=True)[:40].numpy()
__ORACLE__
    for pos, label in zip(top_uncertainty, labels):
        labelled[int(pool[pos])] = int(label)

fit()
with torch.no_grad():
    acc = (model(X[test_idx]).argmax(1) == y[test_idx]).float().mean()
print(f"METRIC {acc:.4f}")
'''

_BUG = "    labels = y_pool_all[torch.tensor(top_uncertainty)].tolist()"
_TWIN = "    labels = y_pool_all[torch.tensor(pool[top_uncertainty])].tolist()"


def script(bug: bool) -> str:
    return _SCRIPT.replace("__ORACLE__", _BUG if bug else _TWIN)
