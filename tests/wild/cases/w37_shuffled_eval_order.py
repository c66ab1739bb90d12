"""Predictions collected from an evaluation loader with ``shuffle=True`` and compared with the
labels in dataset order: every prediction is scored against another sample's label.

Source: skorch-dev/skorch#499 (https://github.com/skorch-dev/skorch/issues/499): with shuffling
enabled on the validation iterator, "y_pred is not ordered in the same way that X_valid is ... if
you compare y_pred with y_valid then the pairs do not match anymore" (also pytorch/pytorch#83270,
"When 'shuffle=True' the accuracy of my Resnet50 predictions drops dramatically").  The twin's
evaluation loader does not shuffle.

Metric: validation accuracy as the script computes it (plain ``python``, CPU, seed 0):
bug 0.1033, twin 0.8589.
"""

from tests.wild.cases.common import FIT, NET, PRELUDE

REPORT = "N11"
MECHANISM = "eval-order-mismatch"
SLUGS = ()
METRIC = ("val_accuracy", 0.1033, 0.8589)

_SCRIPT = PRELUDE + NET + FIT + '''
model = Net()
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
loss_fn = nn.CrossEntropyLoss()
train_loader = DataLoader(train_ds, batch_size=64, shuffle=True)
test_loader = DataLoader(val_ds, batch_size=128, shuffle={shuffle})
fit(model, opt, train_loader, 3, loss_fn)
model.eval()
with torch.no_grad():
    y_pred = torch.cat([model(xb).argmax(1) for xb, _ in test_loader])
y_true = val_ds.tensors[1]
print(f"METRIC {{(y_pred == y_true).float().mean().item():.4f}}")
'''


def script(bug: bool) -> str:
    return _SCRIPT.format(shuffle=bug)
