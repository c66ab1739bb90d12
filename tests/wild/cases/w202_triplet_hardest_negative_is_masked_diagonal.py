"""A triplet loss that masks each anchor's own pair with ``-inf`` in similarity space and then turns the
similarities into distances (``1 - sim``): the masked diagonal becomes a distance of ``+inf``, the max over
negative distances always picks it, and ``relu(pos - inf + margin)`` is zero for every sample -- the
encoder never trains, with no error.

Source: jinnnju/PaAno#1 (https://github.com/jinnnju/PaAno/issues/1), "Potential bug in triplet loss
implementation": "When the diagonal is masked with `-inf` in similarity space and then converted to
distances via `1 - sim`, those entries become `+inf` ... Since `torch.max` is then applied in distance
space, it will always select these `+inf` diagonal entries as the "hardest" negatives — meaning the loss
becomes `relu(pos_dist - inf + 0.5) = 0` for every sample."; maintainer: "The issue you pointed out was
identified as a bug and has now been corrected in the repository. `_sim_ap_f.diagonal().fill_(+float('inf'))
# fixed bug`".  Here a patch encoder (an MLP) is trained with the thread's loss on windows of periodic
signals, each paired with a jittered view that carries fresh high-variance nuisance features, and
windows are scored for anomaly by the distance to their nearest training embedding (a memory bank, as in
patch-based anomaly detection).  The buggy mask fills the diagonal with ``-inf``, the twin with ``+inf``.

Metric: ROC AUC of the anomaly scores on 300 normal and 300 anomalous held-out windows (plain ``python``,
CPU, seed 0): bug 0.5128, twin 0.7472
"""

REPORT = "N176"
MECHANISM = "masked-diagonal-taken-as-hardest-negative"
SLUGS = ()
METRIC = ("val_auroc", 0.5128, 0.7472)

_SCRIPT = '''
import math

import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)
g = torch.Generator().manual_seed(1)
L, NUIS = 24, 24
t = torch.arange(L).float()


def windows(n, anomalous=False):
    """Periodic patches (two normal frequencies) beside nuisance features that carry no signal."""
    freq = torch.tensor([0.25, 0.5])[torch.randint(0, 2, (n,), generator=g)]
    if anomalous:
        freq = freq * 1.6
    phase = torch.rand(n, 1, generator=g) * 2 * math.pi
    signal = torch.sin(freq[:, None] * t + phase)
    return signal, phase


def view(signal):
    jitter = signal + 0.1 * torch.randn(signal.shape, generator=g)
    return torch.cat([jitter, 3.0 * torch.randn(signal.shape[0], NUIS, generator=g)], 1)


def triplet_loss(za, zp):
    sim_ap = F.normalize(za, dim=1) @ F.normalize(zp, dim=1).T
    pos_dists = 1 - sim_ap.diagonal()
    sim_ap_f = sim_ap.clone()
    sim_ap_f.diagonal().fill___FILL__
    neg_dists = 1 - sim_ap_f
    hard_neg_dists, _ = torch.max(neg_dists, dim=1)
    return F.relu(pos_dists - hard_neg_dists + 0.5).mean()


encoder = nn.Sequential(nn.Linear(L + NUIS, 64), nn.ReLU(), nn.Linear(64, 16))
opt = torch.optim.Adam(encoder.parameters(), lr=3e-3)
train_signal, _ = windows(2000)
#@guard
for epoch in range(15):
    perm = torch.randperm(2000)
    for i in range(0, 2000, 64):
        batch = train_signal[perm[i:i + 64]]
        loss = triplet_loss(encoder(view(batch)), encoder(view(batch)))
        opt.zero_grad()
        loss.backward()
        opt.step()

encoder.eval()
with torch.no_grad():
    bank = F.normalize(encoder(view(train_signal)), dim=1)
    normal, _ = windows(300)
    anomal, _ = windows(300, anomalous=True)
    test = F.normalize(encoder(view(torch.cat([normal, anomal]))), dim=1)
    score = 1 - (test @ bank.T).max(1).values
labels = torch.cat([torch.zeros(300), torch.ones(300)])
order = score.argsort()
ranks = torch.empty_like(score)
ranks[order] = torch.arange(1, 601).float()
auroc = (ranks[labels == 1].sum() - 300 * 301 / 2) / (300 * 300)
print(f"METRIC {auroc:.4f}")
'''


def script(bug: bool) -> str:
    return _SCRIPT.replace("__FILL__", "(-float('inf'))" if bug else "(+float('inf'))")
