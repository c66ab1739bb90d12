"""``BatchNorm1d(track_running_stats=False)``: in eval mode the layer still normalises with the
statistics of the evaluation batch, so predictions depend on which samples share the batch.

Source: xu-ji/IIC#49 (https://github.com/xu-ji/IIC/issues/49): for the MNIST model
``track_running_stats`` was False, "so during testing, the mean and variance is not taken from
training time but computed on the fly from the test batch. Hence the test batch needs to be
statistically representative".  Here the validation set is stored class by class (as an
``ImageFolder`` lists it) and evaluated in order, so each batch holds one or two digits; the twin
keeps the running statistics.

Metric: validation accuracy (plain ``python``, CPU, seed 0): bug 0.335, twin 0.9169.
"""

from tests.wild.cases.common import ACCURACY, FIT, PRELUDE

REPORT = "N15"
MECHANISM = "batch-mixed"
SLUGS = ()
METRIC = ("val_accuracy", 0.335, 0.9169)

_SCRIPT = PRELUDE + ACCURACY + FIT + '''
order = Y[1400:].argsort(stable=True)                 # the validation set, stored class by class
val_ds = TensorDataset(X[1400:][order], Y[1400:][order])
model = nn.Sequential(nn.Linear(64, 64), nn.BatchNorm1d(64{track}), nn.ReLU(), nn.Linear(64, 10))
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
loss_fn = nn.CrossEntropyLoss()
train_loader = DataLoader(train_ds, batch_size=64, shuffle=True)
val_loader = DataLoader(val_ds, batch_size=32)
fit(model, opt, train_loader, 3, loss_fn)
print(f"METRIC {{accuracy(model, val_loader):.4f}}")
'''


def script(bug: bool) -> str:
    return _SCRIPT.format(track=", track_running_stats=False" if bug else "")
