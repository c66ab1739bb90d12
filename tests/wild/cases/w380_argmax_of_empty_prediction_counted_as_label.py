"""An F1 measure that takes ``argmax`` of every prediction row, including the all-zero rows of samples the classifier
assigned to no label: ``max`` of a row of zeros returns one fixed index, so every unclassified sample counts as a
false positive of that label and its F1 falls -- nothing fails.

Source: allenai/allennlp#4357 (https://github.com/allenai/allennlp/issues/4357), "Bug on calculating
"argmax_predictions". It increases the false positive count for last label.": "Prediction tensor is all zero "[0, 0,
0, 0, 0, 0]", when a record is not classified to any of the labels ... In the case of all zeros tensor, we will get
the index of the last label. It increases the false positive count of the last label and affects the F1 score."
(labels: bug; fixed by #4473, merged). Here an MLP classifies digits and its probabilities are zeroed below 0.6, so
uncertain samples get an all-zero row; an ``FBetaMeasure`` written like allennlp's counts predictions from ``argmax``;
the bug counts every row (a mask of ones), the twin only rows with a nonzero score (unclassified samples stay false
negatives of their true label). With the installed PyTorch ``max`` of a zero row returns the first index, so label 0
rather than the last one receives the false positives. The reproduction replaces allennlp's metric class and its
model by these few lines and an MLP.

Metric: macro F1 over the ten digits on 497 test digits (plain ``python``, CPU, seed 0; the bug's number is the
reported one): bug 0.7957, twin 0.8506
"""

REPORT = "N354"
MECHANISM = "argmax-of-empty-prediction-counted-as-label"
SLUGS = ()
METRIC = ('test_macro_f1', 0.7957, 0.8506)

_SCRIPT = '''import torch
from torch import nn
import torch.nn.functional as F
from sklearn.datasets import load_digits

torch.manual_seed(0)
X, y = load_digits(return_X_y=True)
X = torch.tensor(X, dtype=torch.float32) / 16.0
y = torch.tensor(y)
perm = torch.randperm(len(y))
tr, te = perm[:1300], perm[1300:]
model = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10))
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
#@guard
for step in range(300):
    i = tr[torch.randint(0, len(tr), (32,))]
    loss = F.cross_entropy(model(X[i]), y[i])
    opt.zero_grad()
    loss.backward()
    opt.step()


class FBetaMeasure:
    def __init__(self, num_classes):
        self.tp = torch.zeros(num_classes)
        self.pred_sum = torch.zeros(num_classes)
        self.true_sum = torch.zeros(num_classes)

    def __call__(self, predictions, gold_labels):
        num_classes = predictions.size(-1)
        argmax_predictions = predictions.max(dim=-1)[1]
__KEEP__        true_positives = (gold_labels == argmax_predictions) & keep
        self.tp += torch.bincount(gold_labels[true_positives], minlength=num_classes).float()
        self.pred_sum += torch.bincount(argmax_predictions[keep], minlength=num_classes).float()
        self.true_sum += torch.bincount(gold_labels, minlength=num_classes).float()

    def get_metric(self):
        precision = self.tp / self.pred_sum.clamp(min=1)
        recall = self.tp / self.true_sum.clamp(min=1)
        return 2 * precision * recall / (precision + recall).clamp(min=1e-12)


with torch.no_grad():
    probs = model(X[te]).softmax(-1)
    predictions = probs * (probs > 0.6)
metric = FBetaMeasure(10)
metric(predictions, y[te])
f1 = metric.get_metric()

print(f"METRIC {f1.mean().item():.4f}")
'''


def script(bug: bool) -> str:
    s = _SCRIPT
    s = s.replace('__KEEP__', '        keep = torch.ones_like(gold_labels, dtype=torch.bool)\n' if bug
                  else '        keep = predictions.sum(-1) > 0\n')
    return s
