"""An adaptive F1 threshold fitted on a validation set with no anomalies: every F1 on the curve is zero, ``argmax``
returns the first (lowest) candidate, so the threshold is the smallest normal score and almost everything at test
time is called anomalous -- nothing fails.

Source: open-edge-platform/anomalib#2433 (https://github.com/open-edge-platform/anomalib/issues/2433):
``F1AdaptiveThreshold`` takes ``argmax`` of an all-zero F1 curve when validation holds no anomalous images (the
reporter's reproduction gives 1.0 where 4.0 is expected); a maintainer reviewing the fix, #2437: "Previously the
metric would implicitly return the maximum value when all images were normal, but as it shows this was not a robust
approach" (the same report again in #3357). Here an autoencoder is trained on the zeros of the digits, an F1-adaptive
threshold written like anomalib's is fitted on 30 held-out zeros, and held-out zeros and other digits are classified;
the bug takes ``argmax`` of the all-zero curve, the twin falls back to the largest validation score when validation
has no anomalies (the behaviour the reviewer describes). The reproduction replaces images and a PatchCore or PaDiM
model by 64-pixel digits and a small autoencoder.

Metric: test accuracy of normal-versus-anomalous (plain ``python``, CPU, seed 0): bug 0.5132, twin 0.9605
"""

REPORT = "N373"
MECHANISM = "f1-threshold-from-validation-without-positives"
SLUGS = ()
METRIC = ('test_accuracy', 0.5132, 0.9605)

_SCRIPT = '''import torch
from torch import nn
import torch.nn.functional as F
from sklearn.datasets import load_digits

torch.manual_seed(0)
X, y = load_digits(return_X_y=True)
X = torch.tensor(X, dtype=torch.float32) / 16.0
y = torch.tensor(y)
normal = X[y == 0]
anomal = X[y != 0]
normal = normal[torch.randperm(len(normal))]
anomal = anomal[torch.randperm(len(anomal))]
train, val, test_n = normal[:110], normal[110:140], normal[140:]
test = torch.cat([test_n, anomal[:len(test_n)]])
test_y = torch.cat([torch.zeros(len(test_n)), torch.ones(len(test_n))])
model = nn.Sequential(nn.Linear(64, 8), nn.ReLU(), nn.Linear(8, 64))
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
#@guard
for step in range(300):
    x = train[torch.randint(0, len(train), (32,))]
    loss = F.mse_loss(model(x), x)
    opt.zero_grad()
    loss.backward()
    opt.step()


def score(x):
    with torch.no_grad():
        return ((model(x) - x) ** 2).mean(1)


def f1_adaptive_threshold(preds, labels):
    thresholds = torch.sort(torch.unique(preds)).values
    f1 = []
    for t in thresholds:
        p = preds >= t
        tp = (p & (labels == 1)).sum().float()
        fp = (p & (labels == 0)).sum().float()
        fn = (~p & (labels == 1)).sum().float()
        precision = tp / (tp + fp) if tp + fp > 0 else torch.tensor(0.0)
        recall = tp / (tp + fn) if tp + fn > 0 else torch.tensor(0.0)
        f1.append(2 * precision * recall / (precision + recall) if precision + recall > 0 else torch.tensor(0.0))
    f1 = torch.stack(f1)
__FALLBACK__    return thresholds[torch.argmax(f1)]


val_scores = score(val)
thr = f1_adaptive_threshold(val_scores, torch.zeros(len(val)))
pred = (score(test) > thr).float()
print(f"METRIC {(pred == test_y).float().mean().item():.4f}")
'''


def script(bug: bool) -> str:
    fallback = ('' if bug
                else '    if not (labels == 1).any():\n        return preds.max()\n')
    return _SCRIPT.replace('__FALLBACK__', fallback)
