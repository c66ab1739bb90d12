"""One-hot segmentation targets built from ``mask == (i + 1)``: the class ids run from 0, so channel
``i`` is taught the pixels of class ``i + 1``, the background has no channel and the last channel none
either, and the network learns every class one channel off -- the argmax maps come out shifted, with
no error and a loss that falls.

Source: nv-tlabs/GSCNN#19 (https://github.com/nv-tlabs/GSCNN/issues/19), "Code error in
GSCNN/datasets/edge_utils.py file?": "the content of mask should be in [0, 18], because you defined
trainId ... that trainId start from 0 and does not have 19. But the code ``mask == (i + 1) for i in
range(num_classes)`` assume the content of mask in [1, 19], which does not correct"; maintainer: "That
does seem like a bug".  (In GSCNN the one-hot maps feed the edge targets; here they are the
segmentation targets themselves.)  A three-layer FCN segments 16x16 synthetic images (background,
bright blobs, dark blobs) with a per-channel binary cross-entropy against the one-hot maps.  The buggy
``mask_to_onehot`` compares with ``i + 1``, the twin with ``i``.

Metric: validation mean IoU over the three classes (plain ``python``, CPU, seed 0): bug 0.1359, twin
0.9299
"""

REPORT = "N162"
MECHANISM = "one-hot-classes-offset"
SLUGS = ()
METRIC = ("val_mean_iou", 0.1359, 0.9299)

_SCRIPT = '''
import numpy as np
import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)
rng = np.random.default_rng(0)
K, S = 3, 16  # background, class 1 (bright blobs), class 2 (dark blobs) on 16x16 images


def images(n):
    x = np.zeros((n, 1, S, S), np.float32)
    mask = np.zeros((n, S, S), np.int64)
    for k in range(n):
        for cls, level in ((1, 1.0), (2, -1.0)):
            for _ in range(2):
                r, c, h = rng.integers(0, S - 5), rng.integers(0, S - 5), rng.integers(3, 6)
                mask[k, r:r + h, c:c + h] = cls
        x[k, 0] = np.where(mask[k] == 1, 1.0, np.where(mask[k] == 2, -1.0, 0.0))
    x += 0.4 * rng.normal(size=x.shape).astype(np.float32)
    return torch.tensor(x), torch.tensor(mask)


def mask_to_onehot(mask, num_classes):
    """(N, H, W) class ids -> (N, K, H, W) binary maps, one per class."""
    return torch.stack([mask == __CLASS__ for i in range(num_classes)], 1).float()


x_train, m_train = images(400)
x_val, m_val = images(100)
model = nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.Conv2d(16, 16, 3, padding=1), nn.ReLU(),
                      nn.Conv2d(16, K, 1))
opt = torch.optim.Adam(model.parameters(), lr=3e-3)
#@guard
for epoch in range(10):
    for i in range(0, 400, 20):
        loss = F.binary_cross_entropy_with_logits(model(x_train[i:i + 20]), mask_to_onehot(m_train[i:i + 20], K))
        opt.zero_grad()
        loss.backward()
        opt.step()

with torch.no_grad():
    pred = model(x_val).argmax(1)
ious = [((pred == c) & (m_val == c)).sum().item() / max(((pred == c) | (m_val == c)).sum().item(), 1)
        for c in range(K)]
print(f"METRIC {sum(ious) / K:.4f}")
'''


def script(bug: bool) -> str:
    return _SCRIPT.replace("__CLASS__", "(i + 1)" if bug else "i")
