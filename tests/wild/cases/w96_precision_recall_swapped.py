"""``precision_recall_fscore_support`` called as ``(y_pred, y_true)``: scikit-learn's order is
``(y_true, y_pred)``, so the reported precision is the recall and the reported recall is the
precision (the F1 score, symmetric, is unchanged and hides the mistake).

Source: voyazici/orderless-rnn-classification#5 (https://github.com/voyazici/orderless-rnn-classification/issues/5),
"Wrong evaluation function call?": "it seems the authors calls
``sklearn.metrics.precision_recall_fscore_support(y_true, y_pred, *)`` ... with wrong arguments order
as: ``precision_recall_fscore_support(y_pred, y_true, *)``"; maintainer: "You are right, it had to be
the other way around. That's why I was printing the precision as recall, and recall as precision ...
F1 scores are not affected."  Also CLOVEXCWZ/NER_DEMO#6 and linfengYang/BitcnNILM#1.  Here a
multi-label classifier of digits (six attributes per digit: even, above four, prime, has a closed
loop, drawn with a straight stroke, a multiple of three) is trained with ``BCEWithLogitsLoss`` and
thresholded at 0.2 (a low threshold, so that precision and recall differ); the metric is the
micro-averaged precision the script reports.  The twin calls ``(y_true, y_pred)``.

Metric: the reported validation precision (plain ``python``, CPU, seed 0): bug 0.9768, twin 0.4969.
"""

from tests.wild.cases.common import PRELUDE

REPORT = "N70"
MECHANISM = "metric-arguments-swapped"
SLUGS = ()
METRIC = ("reported_val_precision", 0.9768, 0.4969)

_SCRIPT = PRELUDE + '''
from sklearn.metrics import precision_recall_fscore_support

ATTRIBUTES = torch.tensor([
    # even, >4, prime, loop, straight, multiple of 3
    [1, 0, 0, 1, 0, 1], [0, 0, 0, 0, 1, 0], [1, 0, 1, 0, 0, 0], [0, 0, 1, 0, 0, 1], [1, 0, 0, 0, 1, 0],
    [0, 1, 1, 0, 0, 0], [1, 1, 0, 1, 0, 1], [0, 1, 1, 0, 1, 0], [1, 1, 0, 1, 0, 0], [0, 1, 0, 1, 0, 1],
], dtype=torch.float32)
T = ATTRIBUTES[Y]
loader = DataLoader(TensorDataset(X[:1400], T[:1400]), batch_size=64, shuffle=True)
model = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 6))
opt = torch.optim.Adam(model.parameters(), lr=3e-3)
#@guard
for epoch in range(2):
    for xb, tb in loader:
        opt.zero_grad()
        F.binary_cross_entropy_with_logits(model(xb), tb).backward()
        opt.step()
model.eval()
with torch.no_grad():
    y_pred = (torch.sigmoid(model(X[1400:])) > 0.2).int().numpy()
y_true = T[1400:].int().numpy()
precision, recall, f1, _ = precision_recall_fscore_support(__ARGS__, average="micro")
print(f"precision {precision:.3f} recall {recall:.3f} f1 {f1:.3f}")
print(f"METRIC {precision:.4f}")
'''


def script(bug: bool) -> str:
    return _SCRIPT.replace("__ARGS__", "y_pred, y_true" if bug else "y_true, y_pred")
