"""Accuracy divided by the number of batches instead of the number of samples: the count of
correct predictions is divided by ``len(data_loader)``, so the reported "accuracy" is the batch
size times too large (and moves with the batch size, not with the model).

Source: mlflow/mlflow-torchserve#57 (https://github.com/mlflow/mlflow-torchserve/pull/57, merged),
"Fixed accuracy calculation in examples/BertNewsClassification": "The result of `torch.sum(preds ==
targets)` could be as much as `self.BATCH_SIZE`, so `len(data_loader)` isn't enough of a
denominator. The accuracy that it logs to MLflow is 12-13 instead of 0.75-0.8."  Here an MLP on
digits is validated in batches of 16 and the correct predictions are divided by
``len(val_loader)``; the twin divides by ``len(val_loader.dataset)``.

Metric: the reported validation accuracy (plain ``python``, CPU, seed 0): bug 13.76, twin 0.8665.
"""

from tests.wild.cases.common import FIT, PRELUDE

REPORT = "N50"
MECHANISM = "metric-wrong-denominator"
SLUGS = ()
METRIC = ("val_accuracy", 13.76, 0.8665)

_SCRIPT = PRELUDE + FIT + '''
model = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10))
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
#@guard
fit(model, opt, DataLoader(train_ds, batch_size=64, shuffle=True), 3)

val_loader = DataLoader(val_ds, batch_size=16)
model.eval()
correct = 0
with torch.no_grad():
    for xb, yb in val_loader:
        correct += torch.sum(model(xb).argmax(1) == yb).item()
acc = correct / __DENOMINATOR__
print(f"METRIC {acc:.4f}")
'''


def script(bug: bool) -> str:
    return _SCRIPT.replace("__DENOMINATOR__", "len(val_loader)" if bug else "len(val_loader.dataset)")
