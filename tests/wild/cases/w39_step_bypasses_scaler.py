"""``optimizer.step()`` called directly under a ``GradScaler``: the gradients are still
multiplied by the loss scale (65536), so the step is tens of thousands of times too large.

Source: IAHispano/Applio#860 (https://github.com/IAHispano/Applio/pull/860, "optimizer step
bugfix", a voice-conversion trainer): removes the direct ``optim_g.step()`` / ``optim_d.step()``
calls because "You should not use optim.step() directly when you're working with GradScaler. If you
do, you would bypass the necessary gradient scaling and unscaling steps", found while "Debugging
NaNs, Infs".  Here a tone classifier (synthetic audio) trained with SGD and a CPU GradScaler; the
bug calls ``optimizer.step()`` right after the scaled backward, before ``scaler.step``, the twin
leaves stepping to the scaler.  (With Adam, which divides by the gradient's own scale, the extra
step is far less visible; SGD shows what stepping on scaled gradients does.)

Metric: validation accuracy (plain ``python``, CPU, seed 0): bug 0.085, twin 1.0.
"""

from tests.wild.cases.common import AUDIO

REPORT = "N13"
MECHANISM = "step-bypasses-scaler"
SLUGS = ()
METRIC = ("val_accuracy", 0.085, 1.0)

_SCRIPT = AUDIO + '''
wave, y = tones(1800)
feats = spectrum(wave)
model = nn.Sequential(nn.Linear(CLIP // 2 + 1, 64), nn.ReLU(), nn.Linear(64, 10))
opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
scaler = torch.amp.GradScaler("cpu")
loader = DataLoader(TensorDataset(feats[:1400], y[:1400]), batch_size=64, shuffle=True)
for epoch in range(4):
    for xb, yb in loader:
        opt.zero_grad()
        loss = F.cross_entropy(model(xb), yb)
        scaler.scale(loss).backward()
{direct}        scaler.step(opt)
        scaler.update()
with torch.no_grad():
    acc = (model(feats[1400:]).argmax(1) == y[1400:]).float().mean().item()
print(f"METRIC {{acc:.4f}}")
'''


def script(bug: bool) -> str:
    return _SCRIPT.format(direct="        opt.step()\n" if bug else "")
