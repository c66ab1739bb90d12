"""``CrossEntropyLoss(ignore_index=0)`` where 0 is the padding index *and* a real class: every
sample of class 0 is dropped from the loss, so the model never learns that class.

Source: nyu-mll/jiant#925 (https://github.com/nyu-mll/jiant/issues/925, labelled a bug): the
tagger set ``ignore_index`` to the pad index, "I've had it happen where I have 0 as a target
class for the tagger ... the cross_entropy ignores all 0 class in the target."  Here the classes
are the ten digits (class 0 is the digit 0); the twin keeps PyTorch's default ignore index.

Metric: validation accuracy (plain ``python``, CPU, seed 0): bug 0.7733, twin 0.8589
(the bug's recall on class 0 is printed too).
"""

from tests.wild.cases.common import ACCURACY, FIT, NET, PRELUDE

REPORT = "N08"
MECHANISM = "ignore-index-is-class"
SLUGS = ()
METRIC = ("val_accuracy", 0.7733, 0.8589)

_SCRIPT = PRELUDE + NET + ACCURACY + FIT + '''
PAD = 0
model = Net()
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
loss_fn = nn.CrossEntropyLoss({ignore})
train_loader = DataLoader(train_ds, batch_size=64, shuffle=True)
val_loader = DataLoader(val_ds, batch_size=128)
fit(model, opt, train_loader, 3, loss_fn)
model.eval()
with torch.no_grad():
    pred = model(val_ds.tensors[0]).argmax(1)
yv = val_ds.tensors[1]
print("recall of class 0:", (pred[yv == 0] == 0).float().mean().item())
print(f"METRIC {{accuracy(model, val_loader):.4f}}")
'''


def script(bug: bool) -> str:
    return _SCRIPT.format(ignore="ignore_index=PAD" if bug else "")
