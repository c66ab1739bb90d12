"""A binary confusion matrix read as ``[[TP, FN], [FP, TN]]`` when scikit-learn returns ``[[TN, FP], [FN, TP]]``:
true positives and true negatives trade places and so do the two kinds of error, so every metric built from the
cells scores the negative class; on imbalanced data the F1 reported is the majority class's and reads far better
than the model's -- nothing fails.

Source: pykeen/pykeen#1590 (https://github.com/pykeen/pykeen/issues/1590), "Wrong value readout from the confustion
matrix in ConfusionMatrixClassificationMetric": "The `extract_from_confusion_matrix()` method expects a confusion
matrix of the shape of `[[ TP, FN ] [ FP, TN ]]` ... According to the official documentation ...
`sklearn.metrics.confusion_matrix()` returns a matrix of the shape `[[TN, FP], [FN, TP]]`" (labels: bug; fixed by
#1592, merged: "The old code assumed the matrix layout was `[[TP, FN], [FP, TN]]`, but scikit-learn's
`confusion_matrix` returns `[[TN, FP], [FN, TP]]`"; a maintainer: "Thanks for your contribution!"). Here a linear
classifier is trained to tell the digit 8 from the others (a tenth of the data are positives) and its F1 on the test
digits is computed from ``sklearn.metrics.confusion_matrix`` read with pykeen's old layout; the twin unpacks
``tn, fp, fn, tp = matrix.ravel()``, as the fix does. The reproduction replaces link prediction's triple
classification by digit classification.

Metric: test F1 of the positive class as reported (plain ``python``, CPU, seed 0): bug 0.9596, twin 0.4231 (the
bug reads better; the twin's is the model's)
"""

from tests.wild.cases.common import PRELUDE

REPORT = "N396"
MECHANISM = "confusion-matrix-layout-misread"
SLUGS = ()
METRIC = ("test_f1", 0.9596, 0.4231)

_SCRIPT = PRELUDE + '''
from sklearn import metrics

target = (Y == 8).float()
model = nn.Linear(64, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
#@guard
for epoch in range(30):
    for i in torch.randperm(1400).split(64):
        loss = F.binary_cross_entropy_with_logits(model(X[i]).squeeze(1), target[i])
        opt.zero_grad()
        loss.backward()
        opt.step()
with torch.no_grad():
    pred = (model(X[1400:]).squeeze(1) > 0).long().numpy()
matrix = metrics.confusion_matrix(y_true=target[1400:].long().numpy(), y_pred=pred)
__READ__
f1 = 2 * tp / (2 * tp + fp + fn)
print(f"METRIC {f1:.4f}")
'''

_BUG = "tp, fn, fp, tn = matrix[0, 0], matrix[0, 1], matrix[1, 0], matrix[1, 1]"
_FIX = "tn, fp, fn, tp = matrix.ravel().tolist()"


def script(bug: bool) -> str:
    return _SCRIPT.replace("__READ__", _BUG if bug else _FIX)
