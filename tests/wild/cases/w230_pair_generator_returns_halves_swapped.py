"""A paired-sample generator that returns its two halves in the other order: the baseline is meant to map a
control cell to its perturbed counterpart, but ``generatePairedSample`` hands back ``(perturbed, control)``
where the training loop unpacks ``(control, perturbed)``, so the model learns the perturbation backwards and
predicts responses in the reverse direction -- with no error.

Source: bm2-lab/scPerturBench#13 (https://github.com/bm2-lab/scPerturBench/issues/13), "Cellular-context
baseReg/baseMLP train perturbation response in the reverse direction"; maintainer: "We have checked the
released GitHub implementation and confirm your finding ... as you pointed out, `generatePairedSample(...)`
returns the perturbed cells and control cells in the reversed order. This means that the cellular-context
`baseReg` and `baseMLP` baseline results are affected by this implementation error".  Here synthetic
expression profiles (60 genes) of control cells and of the same cells under a perturbation (some genes shifted,
some scaled) train a ``baseMLP``-like regressor from control to perturbed, and held-out control cells are
predicted.  The buggy generator returns ``perturbed, control``, the twin ``control, perturbed``.

Metric: Pearson correlation between the predicted and the true expression change on held-out cells (plain
``python``, CPU, seed 0): bug -0.6361, twin 0.9972
"""

REPORT = "N204"
MECHANISM = "paired-sample-halves-returned-swapped"
SLUGS = ()
METRIC = ("delta_pearson", -0.6361, 0.9972)

_SCRIPT = '''
import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)
g = torch.Generator().manual_seed(1)
G = 60
shift = torch.zeros(G)
shift[:15] = torch.randn(15, generator=g) * 1.5
scale = torch.ones(G)
scale[15:30] = 0.4 + torch.rand(15, generator=g)
programs = torch.randn(6, G, generator=g)
cells = torch.relu(torch.randn(1200, 6, generator=g) @ programs + 2.0)
perturbed_cells = torch.relu(cells * scale + shift + 0.1 * torch.randn(1200, G, generator=g))


def generatePairedSample(idx):
    """Control cells and their perturbed counterparts, row by row."""
    __RETURN__


ctrl, pert = generatePairedSample(torch.arange(1000))
model = nn.Sequential(nn.Linear(G, 128), nn.ReLU(), nn.Linear(128, G))
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
#@guard
for epoch in range(60):
    perm = torch.randperm(1000)
    for i in range(0, 1000, 100):
        b = perm[i:i + 100]
        loss = F.mse_loss(model(ctrl[b]), pert[b])
        opt.zero_grad()
        loss.backward()
        opt.step()

test_ctrl, test_pert = cells[1000:], perturbed_cells[1000:]
with torch.no_grad():
    pred_delta = (model(test_ctrl) - test_ctrl).mean(0)
true_delta = (test_pert - test_ctrl).mean(0)
r = torch.corrcoef(torch.stack([pred_delta, true_delta]))[0, 1]
print(f"METRIC {r.item():.4f}")
'''


def script(bug: bool) -> str:
    ret = "return perturbed_cells[idx], cells[idx]" if bug else "return cells[idx], perturbed_cells[idx]"
    return _SCRIPT.replace("__RETURN__", ret)
