"""The "best" checkpoint kept in memory as ``best = model.state_dict()``: the tensors are views of
the live weights, so restoring "the best epoch" restores the last one.

Source: pytorch/tutorials#188 (https://github.com/pytorch/tutorials/pull/188, "Otherwise
best_model_wts changes always to last epoch's state") and WenjieDu/PyPOTS#667
(https://github.com/WenjieDu/PyPOTS/issues/667, "model.state_dict() returns a reference").  Here
the last epoch is a warm restart with a learning rate far too high, so the last weights are much
worse than the best ones; the twin deep-copies the snapshot.

Metric: validation accuracy after restoring the best snapshot (plain ``python``, CPU, seed 0):
bug 0.1008, twin 0.7708.
"""

from tests.wild.cases.common import ACCURACY, NET, PRELUDE

REPORT = "N03"
MECHANISM = "snapshot-aliases-weights"
SLUGS = ()
METRIC = ("val_accuracy", 0.1008, 0.7708)

_SCRIPT = PRELUDE + NET + ACCURACY + '''
import copy

model = Net()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
loss_fn = nn.CrossEntropyLoss()
train_loader = DataLoader(train_ds, batch_size=64, shuffle=True)
val_loader = DataLoader(val_ds, batch_size=128)
best_acc, best_state = -1.0, None
for epoch, lr in enumerate([0.1, 0.1, 0.1, 0.1, 8.0]):  # the last epoch: a warm restart, far too hot
    for group in opt.param_groups:
        group["lr"] = lr
    for xb, yb in train_loader:
        opt.zero_grad()
        loss_fn(model(xb), yb).backward()
        opt.step()
    acc = accuracy(model, val_loader)
    print(f"epoch {{epoch}}: val accuracy {{acc:.3f}}")
    if acc > best_acc:
        best_acc, best_state = acc, {snapshot}
model.load_state_dict(best_state)
print(f"METRIC {{accuracy(model, val_loader):.4f}}")
'''


def script(bug: bool) -> str:
    return _SCRIPT.format(snapshot="model.state_dict()" if bug else "copy.deepcopy(model.state_dict())")
