"""An OOD detector that negates a score which already follows the "higher means more out-of-distribution"
convention: the in-distribution inputs now score as the most anomalous, and every AUROC computed with the detector
is inverted (about one minus the true one) -- the scores are finite and nothing fails.

Source: kkirchheim/pytorch-ood#143 (https://github.com/kkirchheim/pytorch-ood/pull/143), "Fix inverted sign
convention in RankFeat": "`RankFeat.predict_feature_maps` negated the default detector's score
(`EnergyBased.score`), which already follows this library's convention of higher-score-means-more-OOD ... This
silently inverted every AUROC computed with RankFeat's default scoring function (observed AUROC ~38 instead of ~85
on CIFAR-100 OpenOOD)" (merged). Here an MLP is trained on the digits 0-4 and the digits 5-9 are the OOD set; a
RankFeat-style detector removes the rank-1 component of the hidden features, scores the resulting logits with the
energy score ``-logsumexp`` and returns ``-energy_score(...)`` (the bug) or ``energy_score(...)`` (the twin); the
AUROC treats OOD as the positive class. The reproduction departs from the report in the model (an MLP's hidden
layer instead of a ResNet's last feature maps, the SVD taken over the batch) and the data (digits instead of
CIFAR-100 and OpenOOD).

Metric: OOD AUROC (plain ``python``, CPU, seed 0): bug 0.0723, twin 0.9277
"""

REPORT = "N436"
MECHANISM = "ood-score-negated-twice"
SLUGS = ()
METRIC = ("ood_auroc", 0.0723, 0.9277)

_SCRIPT = '''
import torch
from torch import nn
import torch.nn.functional as F
from sklearn.datasets import load_digits
from sklearn.metrics import roc_auc_score

torch.manual_seed(0)
_digits = load_digits()
X = torch.tensor(_digits.data, dtype=torch.float32) / 16.0
Y = torch.tensor(_digits.target)
known = Y < 5
x_in, y_in = X[known], Y[known]
x_train, y_train, x_test_in = x_in[:700], y_in[:700], x_in[700:]
x_ood = X[~known][:200]


def energy_score(logits):
    """Energy-based OOD score; higher means more out-of-distribution."""
    return -torch.logsumexp(logits, dim=1)


def rank1_removed_score(model, x):
    """A detector on top of the energy score: the score of the features' rank-1-reduced logits."""
    feats = model[:2](x)
    u, s, vh = torch.linalg.svd(feats, full_matrices=False)
    reduced = feats - s[0] * u[:, :1] @ vh[:1]
    return __SCORE__


model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 5))
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
#@guard
for epoch in range(20):
    perm = torch.randperm(len(x_train))
    for k in range(0, len(perm), 64):
        idx = perm[k:k + 64]
        loss = F.cross_entropy(model(x_train[idx]), y_train[idx])
        opt.zero_grad()
        loss.backward()
        opt.step()
model.eval()
with torch.no_grad():
    scores = torch.cat([rank1_removed_score(model, x_test_in), rank1_removed_score(model, x_ood)])
is_ood = torch.cat([torch.zeros(len(x_test_in)), torch.ones(len(x_ood))])
print(f"METRIC {roc_auc_score(is_ood.numpy(), scores.numpy()):.4f}")
'''


def script(bug: bool) -> str:
    return _SCRIPT.replace("__SCORE__", "-energy_score(model[2](reduced))" if bug
                           else "energy_score(model[2](reduced))")
