"""ROC AUC computed from the probability of the negative class: the scores rank the samples
backwards, so a good classifier reports an AUC near 0 (one minus its true AUC).

Source: automl/nanoTabPFN#6 (https://github.com/automl/nanoTabPFN/pull/6, merged), "fix: use
positive class probability for binary ROC AUC": "prob[:,:1] incorrectly selects the negative class
probability (class 0) ... for roc_auc_score. Changed to prob[:,1]"; the maintainer: "good catch".
Here a two-class MLP on scikit-learn's breast-cancer data (bundled) is scored with
``roc_auc_score(y, prob[:, :1])``; the twin passes ``prob[:, 1]``.

Metric: the reported test ROC AUC (plain ``python``, CPU, seed 0): bug 0.0036, twin 0.9964.
"""

from tests.wild.cases.common import FIT

REPORT = "N39"
MECHANISM = "metric-wrong-class-score"
SLUGS = ()
METRIC = ("test_roc_auc", 0.0036, 0.9964)

_SCRIPT = '''
import torch
from torch import nn
import torch.nn.functional as F
from sklearn.datasets import load_breast_cancer
from sklearn.metrics import roc_auc_score
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
''' + FIT + '''
data = load_breast_cancer()
perm = torch.randperm(len(data.target), generator=torch.Generator().manual_seed(0))
X = torch.tensor(data.data, dtype=torch.float32)[perm]
y = torch.tensor(data.target)[perm]
X = (X - X[:400].mean(0)) / X[:400].std(0)
model = nn.Sequential(nn.Linear(30, 32), nn.ReLU(), nn.Linear(32, 2))
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
#@guard
fit(model, opt, DataLoader(TensorDataset(X[:400], y[:400]), batch_size=32, shuffle=True), 10)
model.eval()
with torch.no_grad():
    prob = F.softmax(model(X[400:]), dim=1).numpy()
auc = roc_auc_score(y[400:].numpy(), __SCORE__)
print(f"METRIC {auc:.4f}")
'''


def script(bug: bool) -> str:
    return _SCRIPT.replace("__SCORE__", "prob[:, :1]" if bug else "prob[:, 1]")
