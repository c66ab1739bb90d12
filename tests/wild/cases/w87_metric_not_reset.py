"""Metric accumulators never reset between evaluations: the correct and total counts of every
epoch's validation pile up, so the accuracy reported after the last epoch is the average over all
the epochs' models, dragged down by the early ones.

Source: JetBrains-Research/code2seq#112 (https://github.com/JetBrains-Research/code2seq/pull/112,
merged), "Reset metrics after each epoch": "Without resetting, metrics accumulate state over
multiple epochs. It leads to the underestimation of metrics during training or subsequent testing
iterations: while the model improves, metrics accumulate worse values"; also MichiganCOG/ViP#34
("validation accuracy is tracked throughout all of training") and Lightning-AI/torchmetrics#269.
Here a torchmetrics-style ``Accuracy`` object (``update``/``compute``/``reset``) is created once
and used for the validation after each of six epochs of SGD on digits; the twin calls ``reset()``
after ``compute()``.

Metric: the validation accuracy reported after the last epoch (plain ``python``, CPU, seed 0): bug 0.3791, twin 0.6297.
"""

from tests.wild.cases.common import FIT, PRELUDE

REPORT = "N61"
MECHANISM = "metric-state-not-reset"
SLUGS = ()
METRIC = ("reported_val_accuracy", 0.3791, 0.6297)

_SCRIPT = PRELUDE + FIT + '''

class Accuracy:
    """A running accuracy, in the style of torchmetrics: update per batch, compute, reset."""

    def __init__(self):
        self.reset()

    def reset(self):
        self.correct = 0
        self.total = 0

    def update(self, logits, target):
        self.correct += (logits.argmax(1) == target).sum().item()
        self.total += len(target)

    def compute(self):
        return self.correct / self.total


model = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10))
opt = torch.optim.SGD(model.parameters(), lr=0.02)
#@guard
train_loader = DataLoader(train_ds, batch_size=64, shuffle=True)
val_loader = DataLoader(val_ds, batch_size=128)
val_acc = Accuracy()
for epoch in range(6):
    fit(model, opt, train_loader, 1)
    model.eval()
    with torch.no_grad():
        for xb, yb in val_loader:
            val_acc.update(model(xb), yb)
    model.train()
    acc = val_acc.compute()
__RESET__    print(f"epoch {epoch}: val accuracy {acc:.3f}")
print(f"METRIC {acc:.4f}")
'''


def script(bug: bool) -> str:
    return _SCRIPT.replace("__RESET__", "" if bug else "    val_acc.reset()\n")
