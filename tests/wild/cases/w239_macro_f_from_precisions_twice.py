"""A macro-averaged F-score whose recall list is filled with the per-class precisions: the reported macro F1
is then the macro precision, whatever the recalls are -- with no error.

Source: flairNLP/flair#417 (https://github.com/flairNLP/flair/issues/417), "macro_avg_f_score bug": "In the file
flair/training_utils.py, when calculating macro_avg_f_score, I think 'recall' method should be called but
'precision' is called ... `class_precisions = [self.precision(class_name) for class_name in self.get_classes()]
class_recalls = [self.recall(class_name) ...]`"; maintainer: "Thanks for spotting this!".  Here a linear
classifier is trained on an imbalanced three-class synthetic problem (60/30/10%, overlapping classes, so the
per-class precision and recall differ), and the evaluation accumulates per-class counts in a ``Metric`` class
written like flair's: ``macro_avg_f_score`` is the F1 of the macro-averaged precision and recall.  The buggy
method builds ``class_recalls`` with ``self.precision``, the twin with ``self.recall``.

Metric: reported macro-averaged F1 on the test set (plain ``python``, CPU, seed 0): bug 0.6955, twin 0.6449
(the bug reads better: on this imbalanced problem the macro precision is higher than the macro recall)
"""

REPORT = "N213"
MECHANISM = "macro-f-recalls-filled-with-precisions"
SLUGS = ()
METRIC = ("reported_macro_f1", 0.6955, 0.6449)

_SCRIPT = '''
import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)
means = torch.tensor([[0.0, 0.0], [1.5, 0.5], [0.5, 1.5]])


def make(n):
    y = torch.multinomial(torch.tensor([0.6, 0.3, 0.1]), n, replacement=True)
    return means[y] + torch.randn(n, 2), y


Xtr, Ytr = make(3000)
Xte, Yte = make(1000)
model = nn.Linear(2, 3)
opt = torch.optim.Adam(model.parameters(), lr=0.05)
#@guard
for step in range(200):
    loss = F.cross_entropy(model(Xtr), Ytr)
    opt.zero_grad()
    loss.backward()
    opt.step()


class Metric:
    def __init__(self, classes):
        self.tp = {c: 0 for c in classes}
        self.fp = {c: 0 for c in classes}
        self.fn = {c: 0 for c in classes}

    def get_classes(self):
        return list(self.tp)

    def precision(self, c):
        return self.tp[c] / (self.tp[c] + self.fp[c]) if self.tp[c] + self.fp[c] else 0.0

    def recall(self, c):
        return self.tp[c] / (self.tp[c] + self.fn[c]) if self.tp[c] + self.fn[c] else 0.0

    def macro_avg_f_score(self):
        class_precisions = [self.precision(c) for c in self.get_classes()]
        class_recalls = [self.__RECALL__(c) for c in self.get_classes()]
        p = sum(class_precisions) / len(class_precisions)
        r = sum(class_recalls) / len(class_recalls)
        return 2 * p * r / (p + r) if p + r else 0.0


metric = Metric(range(3))
with torch.no_grad():
    pred = model(Xte).argmax(1)
for p, t in zip(pred.tolist(), Yte.tolist()):
    if p == t:
        metric.tp[t] += 1
    else:
        metric.fp[p] += 1
        metric.fn[t] += 1
print(f"METRIC {metric.macro_avg_f_score():.4f}")
'''


def script(bug: bool) -> str:
    return _SCRIPT.replace("__RECALL__", "precision" if bug else "recall")
