"""Set-prediction training that reads a Hungarian assignment with ``enumerate``: on a (queries, targets)
cost matrix with more queries than targets, ``linear_sum_assignment`` returns the chosen query rows
and their target columns, but the matcher pairs query ``i`` with the ``i``-th column, so the targets
are fed to queries that were not assigned to them, every matching after the first skipped row is
wrong, and the detector learns poorly -- with no error.

Source: ultralytics/ultralytics#1332 (https://github.com/ultralytics/ultralytics/pull/1332), "Replace
``lap`` with ``scipy`` for tracking linear assignment": "I have also discovered a significant bug which
has vastly improved the results on my data. This line is incorrect ``matches = np.asarray([[i, x] for i,
x in enumerate(x) if cost_matrix[i, x] <= thresh])`` ... We can only use ``enumerate`` when the
cost_matrix is square ... Value 14 is missing, so every matching after that point was incorrect";
maintainer: "that's an interesting find!".  (The report's matcher links tracks to detections; here the
same matcher assigns DETR-style queries to targets.)  An MLP predicts six (point, objectness) queries for
scenes of one to four objects drawn on a noisy grid, trained with an L1 loss on matched queries and a
binary objectness loss.  The buggy ``match`` returns ``enumerate(cols)``, the twin ``zip(rows, cols)``.

Metric: validation F1 of the predicted points (matched within an L1 distance of 0.1; plain ``python``,
CPU, seed 0): bug 0.1082, twin 0.2711
"""

REPORT = "N154"
MECHANISM = "assignment-rows-dropped"
SLUGS = ()
METRIC = ("val_point_f1", 0.1082, 0.2711)

_SCRIPT = '''
import numpy as np
import torch
from torch import nn
import torch.nn.functional as F
from scipy.optimize import linear_sum_assignment

torch.manual_seed(0)
rng = np.random.default_rng(0)
Q, G = 6, 10  # queries per image, grid size of the rendered scene


def scenes(n):
    """Scenes of 1-4 objects: the image is a noisy occupancy grid, the targets are the centres."""
    imgs, targets = [], []
    for _ in range(n):
        cells = rng.choice(G * G, size=rng.integers(1, 5), replace=False)
        img = np.zeros(G * G, np.float32)
        img[cells] = 1.0
        imgs.append(img + 0.1 * rng.normal(size=G * G).astype(np.float32))
        targets.append(torch.tensor(np.stack([cells // G, cells % G], 1) / (G - 1), dtype=torch.float32))
    return torch.tensor(np.stack(imgs)), targets


def match(cost):
    """Pairs (query, target) of a minimum-cost assignment; the cost matrix is (queries, targets)."""
    rows, cols = linear_sum_assignment(cost)
    return __PAIRS__


model = nn.Sequential(nn.Linear(G * G, 256), nn.ReLU(), nn.Linear(256, Q * 3))
x_train, t_train = scenes(3000)
x_val, t_val = scenes(500)
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
#@guard
for epoch in range(15):
    for i in range(0, 3000, 50):
        out = model(x_train[i:i + 50]).view(-1, Q, 3)
        loss = 0.0
        for o, tgt in zip(out, t_train[i:i + 50]):
            boxes, logit = o[:, :2].sigmoid(), o[:, 2]
            pairs = match(torch.cdist(boxes, tgt, p=1).detach().numpy())
            q, t = [p[0] for p in pairs], [p[1] for p in pairs]
            objectness = torch.zeros(Q)
            objectness[q] = 1.0
            loss = loss + F.l1_loss(boxes[q], tgt[t], reduction="sum") + F.binary_cross_entropy_with_logits(
                logit, objectness, reduction="sum")
        opt.zero_grad()
        (loss / 50).backward()
        opt.step()

hits = n_pred = n_true = 0
with torch.no_grad():
    for o, tgt in zip(model(x_val).view(-1, Q, 3), t_val):
        pred = o[o[:, 2] > 0, :2].sigmoid()
        n_pred, n_true = n_pred + len(pred), n_true + len(tgt)
        if len(pred):
            d = torch.cdist(pred, tgt, p=1).numpy()
            r, c = linear_sum_assignment(d)
            hits += int((d[r, c] < 0.1).sum())
print(f"METRIC {2 * hits / (n_pred + n_true):.4f}")
'''


def script(bug: bool) -> str:
    return _SCRIPT.replace("__PAIRS__", "[(i, c) for i, c in enumerate(cols)]" if bug
                           else "[(r, c) for r, c in zip(rows, cols)]")
