"""Early stopping that compares the epoch's metric with a best value the evaluation has already overwritten:
``_evaluate`` stores the new best before ``_check_early_stopping`` asks whether the metric beats the best, so
the comparison is the metric against itself, no epoch ever counts as an improvement, and training stops after
exactly ``patience`` evaluations however fast the model is still improving -- nothing fails.

Source: fastino-ai/GLiNER2#94 (https://github.com/fastino-ai/GLiNER2/pull/94), "fix early stopping patience not
resetting when metric improves": "`_evaluate()` was updating `self.best_metric` before `_check_early_stopping()`
ran, so the comparison was always `metric_value < metric_value`, meaning improvement was never detected and the
patience counter never reset" (merged; it fixes #70, whose reporter found that early stopping "**always** fires
after exactly `early_stopping_patience` epochs, regardless of whether the eval metric is improving"). Here an
MLP on the digits is trained with plain SGD (a slow but steady run) for up to 40 epochs, evaluated each epoch on
the validation digits by a trainer written like GLiNER2's (an ``evaluate`` that records the best loss and the
best weights, then a patience check), and the best weights are tested; the twin compares with the best recorded
before the evaluation, as the fix does. The reproduction replaces GLiNER2's span-extraction model and its F1 by
an MLP and a validation loss.

Metric: test accuracy of the best weights (plain ``python``, CPU, seed 0): bug 0.1929, twin 0.8173
"""

from tests.wild.cases.common import FIT, PRELUDE

REPORT = "N389"
MECHANISM = "best-metric-updated-before-patience-check"
SLUGS = ()
METRIC = ("test_accuracy", 0.1929, 0.8173)

_SCRIPT = PRELUDE + FIT + '''
import copy

PATIENCE = 3
model = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
#@guard
train_loader = DataLoader(train_ds, batch_size=64, shuffle=True)


class Trainer:
    def __init__(self):
        self.best_metric = float("inf")
        self.best_state = None
        self.patience_counter = 0

    def evaluate(self):
        model.eval()
        with torch.no_grad():
            metric = F.cross_entropy(model(X[1400:1600]), Y[1400:1600]).item()
        model.train()
        if metric < self.best_metric:
            self.best_metric = metric
            self.best_state = copy.deepcopy(model.state_dict())
        return metric

    def check_early_stopping(self, metric, best):
        if metric < best:
            self.patience_counter = 0
        else:
            self.patience_counter += 1
        return self.patience_counter >= PATIENCE


trainer = Trainer()
for epoch in range(40):
    fit(model, opt, train_loader, 1)
    prev_best = trainer.best_metric
    metric = trainer.evaluate()
    if trainer.check_early_stopping(metric, __BEST__):
        print(f"early stop at epoch {epoch}")
        break
model.load_state_dict(trainer.best_state)
model.eval()
with torch.no_grad():
    acc = (model(X[1600:]).argmax(1) == Y[1600:]).float().mean().item()
print(f"METRIC {acc:.4f}")
'''


def script(bug: bool) -> str:
    return _SCRIPT.replace("__BEST__", "trainer.best_metric" if bug else "prev_best")
