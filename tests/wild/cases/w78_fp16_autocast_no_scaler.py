"""float16 autocast without a ``GradScaler``: float16 cannot represent values below about 6e-8
(and loses precision below 6e-5), so the small gradients of a lightly weighted loss flush to zero
in the backward pass and the weights they should move stay where they are, with no error, no NaN
and no warning.

Source: engichang1467/Open-Rig3R#35 (https://github.com/engichang1467/Open-Rig3R/issues/35,
labelled bug): "autocast defaults to fp16 with no GradScaler — gradients can silently underflow to
zero ... Small gradients ... silently vanish. There is no error, no NaN, no warning: the loss curve
just flattens".  Simulated on CPU with ``torch.autocast("cpu", dtype=torch.float16)``: the
classification loss of an MLP on digits carries a weight of 1e-5, as one term of a multi-task
objective whose other terms are left out, so its logit gradients are about 1e-7.  The twin scales
the loss with ``torch.amp.GradScaler`` (``scaler.step`` unscales before the optimizer step); both
use Adam, which does not care about the gradients' scale.

Metric: validation accuracy (plain ``python``, CPU, seed 0): bug 0.194, twin 0.8665.
"""

from tests.wild.cases.common import PRELUDE, VAL_ACCURACY

REPORT = "N52"
MECHANISM = "fp16-gradient-underflow"
SLUGS = ()
METRIC = ("val_accuracy", 0.194, 0.8665)

_SCRIPT = PRELUDE + '''
WEIGHT = 1e-5                                                      # this term's weight in the objective
model = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10))
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
#@guard
__SCALER__
loader = DataLoader(train_ds, batch_size=64, shuffle=True)
for epoch in range(3):
    for xb, yb in loader:
        with torch.autocast("cpu", dtype=torch.float16):
            loss = WEIGHT * F.cross_entropy(model(xb), yb)
        opt.zero_grad()
__STEP__
''' + VAL_ACCURACY

_BUG_STEP = '''        loss.backward()
        opt.step()'''

_TWIN_STEP = '''        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()'''


def script(bug: bool) -> str:
    if bug:
        return _SCRIPT.replace("__SCALER__\n", "").replace("__STEP__", _BUG_STEP)
    return _SCRIPT.replace("__SCALER__", 'scaler = torch.amp.GradScaler("cpu")').replace("__STEP__", _TWIN_STEP)
