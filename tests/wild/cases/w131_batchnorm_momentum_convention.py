"""A BatchNorm momentum written in the TensorFlow/Keras convention (the weight of the old running
average) but passed to PyTorch, where momentum is the weight of the new batch: ``momentum=0.9``
makes the running statistics ninety percent the last batch's, so evaluation normalises with the
statistics of whatever batch came last -- with no error.

Source: eriklindernoren/PyTorch-YOLOv3#230 (https://github.com/eriklindernoren/PyTorch-YOLOv3/issues/230),
"Strange value chosen for the momentum (decay parameter) of BatchNorm2d layers": "In models.py:43,
momentum=0.9 is set ... With momentum = 0.9, only 10% of the previous trained weight is kept and 90%
of the statistic of the current batch is taking into account, which makes the training very
unstable"; reply: "your assertion seems correct."  Here an MLP with a BatchNorm after each hidden
layer is trained on digits in batches of 16 (the epoch's last batch has 8 examples); the buggy
layers use ``momentum=0.9``, the twin ``momentum=0.01`` (what 0.99 means in Keras).

Metric: validation accuracy in eval mode (plain ``python``, CPU, seed 0): bug 0.8111, twin 0.932.
"""

from tests.wild.cases.common import PRELUDE

REPORT = "N105"
MECHANISM = "batchnorm-momentum-convention-inverted"
SLUGS = ()
METRIC = ("val_accuracy", 0.8111, 0.932)

_SCRIPT = PRELUDE + '''
M = __MOMENTUM__
model = nn.Sequential(nn.Linear(64, 64), nn.BatchNorm1d(64, momentum=M), nn.ReLU(),
                      nn.Linear(64, 64), nn.BatchNorm1d(64, momentum=M), nn.ReLU(), nn.Linear(64, 10))
opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
#@guard
loader = DataLoader(train_ds, batch_size=16, shuffle=True)
for epoch in range(5):
    model.train()
    for xb, yb in loader:
        opt.zero_grad()
        F.cross_entropy(model(xb), yb).backward()
        opt.step()

model.eval()
with torch.no_grad():
    acc = (model(X[1400:]).argmax(1) == Y[1400:]).float().mean().item()
print(f"METRIC {acc:.4f}")
'''


def script(bug: bool) -> str:
    return _SCRIPT.replace("__MOMENTUM__", "0.9" if bug else "0.01")
