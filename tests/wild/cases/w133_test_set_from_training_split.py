"""A test set loaded from the training split (``train=True`` where ``train=False`` was meant): the
model is "tested" on the very images it was fitted to, and the reported test accuracy is its
training accuracy -- with no error.

Source: rasbt/deeplearning-models#25 (https://github.com/rasbt/deeplearning-models/issues/25),
"test_dataset with train=True in cnn-densenet121-mnist.ipynb": "test_dataset =
datasets.MNIST(root='data', train=True, transform=transforms.ToTensor(), download=True) ...
Validation ACC: 98.50% Test ACC: 99.91%"; maintainer: "thanks, will rerun this. ... should be fixed
now."  Here digits are served by a loader with a ``train`` flag like torchvision's (the first 500
images for training, the last 397 for testing); an MLP is trained on the training split.  The buggy
script builds its test set with ``train=True``, the twin with ``train=False``.

Metric: reported test accuracy (plain ``python``, CPU, seed 0): bug 0.994, twin 0.8841 (the bug reads
better: the twin is the real test accuracy).
"""

from tests.wild.cases.common import PRELUDE

REPORT = "N107"
MECHANISM = "test-set-is-training-split"
SLUGS = ()
METRIC = ("reported_test_accuracy", 0.994, 0.8841)

_SCRIPT = PRELUDE + '''


def DigitsDataset(train):  # a torchvision-style dataset: the split is chosen by a flag
    return TensorDataset(X[:500], Y[:500]) if train else TensorDataset(X[1400:], Y[1400:])


train_dataset = DigitsDataset(train=True)
test_dataset = DigitsDataset(train=__TRAIN__)

model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
#@guard
for epoch in range(40):
    for xb, yb in DataLoader(train_dataset, batch_size=32, shuffle=True):
        opt.zero_grad()
        F.cross_entropy(model(xb), yb).backward()
        opt.step()

model.eval()
correct = 0
with torch.no_grad():
    for xb, yb in DataLoader(test_dataset, batch_size=128):
        correct += (model(xb).argmax(1) == yb).sum().item()
print(f"METRIC {correct / len(test_dataset):.4f}")
'''


def script(bug: bool) -> str:
    return _SCRIPT.replace("__TRAIN__", "True" if bug else "False")
