"""Evaluation predictions taken from a softmax over dimension 0, the batch: each column is
normalised across the samples, so a sample's predicted class depends on the rest of its batch.

Source: mrdbourke/pytorch-deep-learning#163
(https://github.com/mrdbourke/pytorch-deep-learning/issues/163): ``torch.softmax(y_logit, dim=0)``
on logits of shape ``[32, 10]`` gave a lower accuracy than before; the maintainer confirmed
``dim=1``.  Here the test set is stored class by class (as ``ImageFolder`` lists it) and
predicted in batches of 32, which makes the dependence on the batch plain: on a shuffled test set
the same bug costs 2-6 points of accuracy.  The twin uses ``dim=1``.

Metric: validation accuracy of the argmax of the probabilities (plain ``python``, CPU, seed 0):
bug 0.2191, twin 0.8589.
"""

from tests.wild.cases.common import FIT, NET, PRELUDE

REPORT = "N06"
MECHANISM = "softmax-over-batch"
SLUGS = ()
METRIC = ("val_accuracy", 0.2191, 0.8589)

_SCRIPT = PRELUDE + NET + FIT + '''
model = Net()
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
loss_fn = nn.CrossEntropyLoss()
train_loader = DataLoader(train_ds, batch_size=64, shuffle=True)
order = Y[1400:].argsort(stable=True)                 # the test set, stored class by class
val_ds = TensorDataset(X[1400:][order], Y[1400:][order])
val_loader = DataLoader(val_ds, batch_size=32)
fit(model, opt, train_loader, 3, loss_fn)
model.eval()
preds = []
with torch.inference_mode():
    for xb, yb in val_loader:
        probs = torch.softmax(model(xb), dim={dim})
        preds.append(probs.argmax(dim=1))
acc = (torch.cat(preds) == val_ds.tensors[1]).float().mean().item()
print(f"METRIC {{acc:.4f}}")
'''


def script(bug: bool) -> str:
    return _SCRIPT.format(dim=0 if bug else 1)
