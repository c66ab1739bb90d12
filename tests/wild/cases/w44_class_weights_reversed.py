"""Class weights for ``CrossEntropyLoss`` written in the wrong order: the frequent class gets the
large weight and the rare class the small one, the opposite of what re-weighting is for.

Source: amanshenoy/multilogue-net#21 (https://github.com/amanshenoy/multilogue-net/issues/21):
``loss_weights = torch.FloatTensor([1/0.0816, 1/0.9184])`` for "fear" although label 0 is the
frequent one; the author answered "Flipping them should be the right way to go".  Here: is the
digit a 9 (10% of the data)?  The twin lists the weights in label order.

Metric: balanced validation accuracy (mean of the two recalls; plain ``python``, CPU, seed 0):
bug 0.5, twin 0.9095.
"""

from tests.wild.cases.common import FIT, PRELUDE

REPORT = "N18"
MECHANISM = "class-weights-reversed"
SLUGS = ()
METRIC = ("val_balanced_accuracy", 0.5, 0.9095)

_SCRIPT = PRELUDE + FIT + '''
yb_all = (Y == 9).long()
train_ds = TensorDataset(X[:1400], yb_all[:1400])
pos_rate = yb_all[:1400].float().mean().item()  # about 0.1
weights = torch.tensor([{weights}])
model = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 2))
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
loss_fn = nn.CrossEntropyLoss(weight=weights)
train_loader = DataLoader(train_ds, batch_size=64, shuffle=True)
fit(model, opt, train_loader, 4, loss_fn)
model.eval()
with torch.no_grad():
    pred = model(X[1400:]).argmax(1)
yv = yb_all[1400:]
recalls = [(pred[yv == c] == c).float().mean().item() for c in (0, 1)]
print("recall per class", recalls)
print(f"METRIC {{sum(recalls) / 2:.4f}}")
'''


def script(bug: bool) -> str:
    weights = "1 / pos_rate, 1 / (1 - pos_rate)" if bug else "1 / (1 - pos_rate), 1 / pos_rate"
    return _SCRIPT.format(weights=weights)
