"""Gradients clipped while the ``GradScaler``'s scale is still on them: ``clip_grad_norm_`` sees
norms about 65536 times too large and cuts every gradient to ``max_norm``; ``scaler.step`` then
divides by the scale, so the optimizer applies updates 65536 times smaller than clipping meant.
Training crawls; nothing fails.

Source: harubaru/waifu-diffusion#64 (https://github.com/harubaru/waifu-diffusion/issues/64),
"clip_grad_norm applied to scaled gradients": "if fp16 is enabled then the clipping would be applied
to the _scaled_ gradients, due to `GradScaler`. According to PyTorch documentation ... the gradients
should be unscaled before clipping. So, this appears to be a bug and could cause fp16 training to
result in worse performance than it otherwise should."  Also milesial/Pytorch-UNet#468 ("I believe
'scaler.unscale_(optimizer)' should be added before gradient clipping", fixed in #470) and
pytorch/examples#1196.  Simulated on CPU with ``torch.autocast("cpu", dtype=torch.float16)`` and
``torch.amp.GradScaler("cpu")``: an MLP on digits, SGD with momentum (an adaptive optimizer such as
AdamW divides most of the lost scale away again, so the effect shows with SGD), ``max_norm=1``; the
twin calls ``scaler.unscale_(opt)`` before clipping.

Metric: validation accuracy (plain ``python``, CPU, seed 0): bug 0.1058, twin 0.869.
"""

from tests.wild.cases.common import PRELUDE, VAL_ACCURACY

REPORT = "N58"
MECHANISM = "clip-before-unscale"
SLUGS = ()
METRIC = ("val_accuracy", 0.1058, 0.869)

_SCRIPT = PRELUDE + '''
model = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10))
opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
#@guard
scaler = torch.amp.GradScaler("cpu")
loader = DataLoader(train_ds, batch_size=64, shuffle=True)
for epoch in range(3):
    for xb, yb in loader:
        opt.zero_grad()
        with torch.autocast("cpu", dtype=torch.float16):
            loss = F.cross_entropy(model(xb), yb)
        scaler.scale(loss).backward()
__UNSCALE__        torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
        scaler.step(opt)
        scaler.update()
''' + VAL_ACCURACY


def script(bug: bool) -> str:
    return _SCRIPT.replace("__UNSCALE__", "" if bug else "        scaler.unscale_(opt)\n")
