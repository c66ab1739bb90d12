"""``OneCycleLR`` built for ``epochs * steps_per_epoch`` steps but stepped once per epoch: the
schedule advances a few steps out of hundreds, so the learning rate stays at its starting value
(``max_lr / 25``) for the whole run and never reaches its peak.

Source: ageron/handson-mlp#28 (https://github.com/ageron/handson-mlp/issues/28, labelled bug),
"[bug] OneCycleLR scheduler should be called after every batch": the solution's training function
"calls `scheduler.step()` at the end of every epoch" although the scheduler was built with
``epochs=n_epochs, steps_per_epoch=len(train_loader)``; also pytorch/pytorch#65417.  Here an MLP
on digits trains for 3 epochs with plain SGD and ``OneCycleLR(max_lr=1.0)``; the twin steps the scheduler
after every batch.

Metric: validation accuracy (plain ``python``, CPU, seed 0): bug 0.6826, twin 0.8715.
"""

from tests.wild.cases.common import PRELUDE, VAL_ACCURACY

REPORT = "N45"
MECHANISM = "scheduler-cadence"
SLUGS = ()
METRIC = ("val_accuracy", 0.6826, 0.8715)

_SCRIPT = PRELUDE + '''
EPOCHS = 3
model = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
loader = DataLoader(train_ds, batch_size=64, shuffle=True)
scheduler = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=1.0, epochs=EPOCHS, steps_per_epoch=len(loader),
                                                cycle_momentum=False)
#@guard
for epoch in range(EPOCHS):
    for xb, yb in loader:
        opt.zero_grad()
        loss = F.cross_entropy(model(xb), yb)
        loss.backward()
        opt.step()
__BATCH_STEP__
__EPOCH_STEP__
    print(f"epoch {epoch}: lr {scheduler.get_last_lr()[0]:.4f}")
''' + VAL_ACCURACY


def script(bug: bool) -> str:
    if bug:
        return _SCRIPT.replace("__BATCH_STEP__\n", "").replace("__EPOCH_STEP__", "    scheduler.step()")
    return _SCRIPT.replace("__BATCH_STEP__", "        scheduler.step()").replace("__EPOCH_STEP__\n", "")
