"""Stochastic weight averaging evaluated without recomputing BatchNorm statistics: the averaged
model keeps the running statistics it was copied with, which belong to none of the weights it now
holds, and its accuracy collapses -- with no error.

Source: mosaicml/composer#624 (https://github.com/mosaicml/composer/issues/624), "Update SWA batch
norm statistics": "Currently, if `swa.swa_end` occurs after the final training epoch has commenced,
the SWA/averaged model's batch norm statistics won't be updated, which leads to very poor
performance."  Here an MLP whose first layer is a BatchNorm over the raw pixel intensities (0-16)
is trained on digits for 10 epochs; the averaged model is a copy made before training whose
parameters (not buffers) are averaged over epochs 5-9, as the original SWA code does
(``moving_average`` over ``parameters()``).  The buggy script evaluates it as it is; the twin first
runs ``torch.optim.swa_utils.update_bn`` over the training loader (the original code's
``bn_update``).  (``torch.optim.swa_utils.AveragedModel`` now copies the source model's buffers on
every update, so the reproduction averages by hand, like the report's code.)

Metric: validation accuracy of the averaged model (plain ``python``, CPU, seed 0): bug 0.7204, twin 0.9169.
"""

from tests.wild.cases.common import PRELUDE

REPORT = "N101"
MECHANISM = "averaged-model-bn-stats-stale"
SLUGS = ()
METRIC = ("swa_val_accuracy", 0.7204, 0.9169)

_SCRIPT = PRELUDE + '''
import copy
from torch.optim.swa_utils import update_bn

pixels = TensorDataset(X[:1400] * 16, Y[:1400])  # raw intensities 0-16: the first BatchNorm standardises them
model = nn.Sequential(nn.BatchNorm1d(64), nn.Linear(64, 64), nn.BatchNorm1d(64), nn.ReLU(), nn.Linear(64, 10))
opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
#@guard
swa_model = copy.deepcopy(model)
swa_n = 0
loader = DataLoader(pixels, batch_size=64, shuffle=True)
for epoch in range(10):
    model.train()
    for xb, yb in loader:
        opt.zero_grad()
        F.cross_entropy(model(xb), yb).backward()
        opt.step()
    if epoch >= 5:  # moving average of the parameters
        with torch.no_grad():
            for p_swa, p in zip(swa_model.parameters(), model.parameters()):
                p_swa.mul_(swa_n / (swa_n + 1)).add_(p / (swa_n + 1))
        swa_n += 1
__UPDATE__

swa_model.eval()
with torch.no_grad():
    acc = (swa_model(X[1400:] * 16).argmax(1) == Y[1400:]).float().mean().item()
print(f"METRIC {acc:.4f}")
'''


def script(bug: bool) -> str:
    return _SCRIPT.replace("__UPDATE__", "" if bug else "update_bn(loader, swa_model)")
