"""Gradient accumulation that resets the gradients at every micro-batch: only the last micro-batch
of each window reaches ``optimizer.step()``, still divided by the window size, so each step uses
one eighth of the data at one eighth of the intended scale.

Source: pytorch/torchtitan#3575 (https://github.com/pytorch/torchtitan/pull/3575, merged), "[rl][bug]
Fix gradient accumulation zero grad": "We call it at the wrong place (fwd/bwd instead of optimizer
step), zeroing grad from all micro-batches except the last one, i.e. no accumulation."  Here an MLP
on digits trains with micro-batches of 8 accumulated over 8 (loss divided by 8); the buggy loop
calls ``zero_grad()`` before every micro-batch's backward, the twin after each optimizer step.

Metric: validation accuracy (plain ``python``, CPU, seed 0): bug 0.3501, twin 0.801.
"""

from tests.wild.cases.common import PRELUDE, VAL_ACCURACY

REPORT = "N44"
MECHANISM = "accumulated-gradients-reset"
SLUGS = ()
METRIC = ("val_accuracy", 0.3501, 0.801)

_SCRIPT = PRELUDE + '''
ACCUMULATE = 8
model = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10))
opt = torch.optim.SGD(model.parameters(), lr=0.2)
#@guard
loader = DataLoader(train_ds, batch_size=8, shuffle=True)
for epoch in range(3):
__LOOP__
''' + VAL_ACCURACY

_BUG = '''    for i, (xb, yb) in enumerate(loader):
        opt.zero_grad()                                           # every micro-batch
        loss = F.cross_entropy(model(xb), yb) / ACCUMULATE
        loss.backward()
        if (i + 1) % ACCUMULATE == 0:
            opt.step()'''

_TWIN = '''    for i, (xb, yb) in enumerate(loader):
        loss = F.cross_entropy(model(xb), yb) / ACCUMULATE
        loss.backward()
        if (i + 1) % ACCUMULATE == 0:
            opt.step()
            opt.zero_grad()                                       # after the step'''


def script(bug: bool) -> str:
    return _SCRIPT.replace("__LOOP__", _BUG if bug else _TWIN)
