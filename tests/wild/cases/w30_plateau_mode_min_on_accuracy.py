"""``ReduceLROnPlateau`` left in its default ``mode='min'`` and stepped with the validation
accuracy: every improvement looks like a plateau, so the learning rate is cut after each epoch.

Source: md-mohaiminul/ViS4mer#4 (https://github.com/md-mohaiminul/ViS4mer/issues/4): the
scheduler "by default assumes a 'min' metric" but was stepped with accuracy; the author agreed it
was not intended (FunctionLab/selene#115 reports the mirror image, mode 'max' on a loss).  The
twin passes ``mode='max'``.

Metric: final validation accuracy (plain ``python``, CPU, seed 0): bug 0.5844, twin 0.7531.
"""

from tests.wild.cases.common import ACCURACY, NET, PRELUDE

REPORT = "N04"
MECHANISM = "plateau-mode-mismatch"
SLUGS = ()
METRIC = ("val_accuracy", 0.5844, 0.7531)

_SCRIPT = PRELUDE + NET + ACCURACY + '''
model = Net()
opt = torch.optim.SGD(model.parameters(), lr=0.05)
sched = torch.optim.lr_scheduler.ReduceLROnPlateau(opt, {mode}factor=0.1, patience=0)
loss_fn = nn.CrossEntropyLoss()
train_loader = DataLoader(train_ds, batch_size=64, shuffle=True)
val_loader = DataLoader(val_ds, batch_size=128)
for epoch in range(6):
    for xb, yb in train_loader:
        opt.zero_grad()
        loss_fn(model(xb), yb).backward()
        opt.step()
    acc = accuracy(model, val_loader)
    sched.step(acc)
    print(f"epoch {{epoch}}: val accuracy {{acc:.3f}} lr {{opt.param_groups[0]['lr']:.0e}}")
print(f"METRIC {{acc:.4f}}")
'''


def script(bug: bool) -> str:
    return _SCRIPT.format(mode="" if bug else "mode='max', ")
