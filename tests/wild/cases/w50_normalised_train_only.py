"""Inputs standardised for training but fed raw at evaluation: the model is evaluated on inputs
from another distribution than the one it was trained on.

Source: JeasunLok/ResNet-pytorch#1 (https://github.com/JeasunLok/ResNet-pytorch/issues/1): "The
testing accuracy is low because the normalization has been used in training set but not used in
testing set" (mlpack/examples#213 found the same, "we weren't normalizing the test data").  Here
the training pixels are standardised with the training mean and standard deviation; the twin
applies the same standardisation to the validation inputs.

Metric: validation accuracy (plain ``python``, CPU, seed 0): bug 0.7204, twin 0.8866.
"""

from tests.wild.cases.common import ACCURACY, FIT, NET, PRELUDE

REPORT = "N24"
MECHANISM = "eval-input-skew"
SLUGS = ()
METRIC = ("val_accuracy", 0.7204, 0.8866)

_SCRIPT = PRELUDE + NET + ACCURACY + FIT + '''
mean, std = X[:1400].mean(0), X[:1400].std(0) + 1e-3


def normalize(x):
    return (x - mean) / std


train_ds = TensorDataset(normalize(X[:1400]), Y[:1400])
val_ds = TensorDataset({val_x}, Y[1400:])
model = Net()
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
loss_fn = nn.CrossEntropyLoss()
train_loader = DataLoader(train_ds, batch_size=64, shuffle=True)
val_loader = DataLoader(val_ds, batch_size=128)
for epoch in range(3):
    fit(model, opt, train_loader, 1, loss_fn)
    print(f"epoch {{epoch}}: val accuracy {{accuracy(model, val_loader):.3f}}")
print(f"METRIC {{accuracy(model, val_loader):.4f}}")
'''


def script(bug: bool) -> str:
    return _SCRIPT.format(val_x="X[1400:]" if bug else "normalize(X[1400:])")
