"""A keypoint-heatmap target generator that unpacks ``width, height = heatmap.shape`` where the shape is (height,
width): on a heatmap wider than tall the Gaussian is clipped against the height as if it were the width, so keypoints
right of the height's column get a truncated peak or none at all (the empty-slice check skips them silently), and
the network learns that nothing is ever there -- nothing fails.

Source: pprp/SimpleCVReproduction#13 (https://github.com/pprp/SimpleCVReproduction/issues/13), "bug 发现": the
reporter writes that the function in utils has its shape wrong, "应当是 h,w = heatmap.shape 原来的是w,h" (it should
be ``h, w = heatmap.shape``, the original is ``w, h``), and pastes the CenterNet-style ``draw_umich_gaussian``; the
maintainer first answers that the CenterNet copy is right, the reporter points to
``simple_keypoint/heatmap/utils.py`` (a screenshot), and the maintainer: "fixed Thank you!". Here that drawing function
(with the CenterNet guard that skips empty slices) makes 16x24 target heatmaps (radius 2) for synthetic 16x24 images
holding one blurred bright point, kept two rows away from the top and bottom edges, and an MLP regresses the
heatmaps; the bug unpacks the shape as ``width, height``, the twin as ``height, width``. The reproduction replaces a
keypoint network on photographs by an MLP on synthetic images; the keypoints stay off the top and bottom edges
because there the swapped bounds make the two slices' shapes differ and ``np.maximum`` raises.

Metric: fraction of 500 test images whose heatmap maximum is within one pixel of the keypoint (plain ``python``,
CPU, seed 0): bug 0.5580, twin 0.7700
"""

REPORT = "N384"
MECHANISM = "heatmap-shape-unpacked-as-width-height"
SLUGS = ()
METRIC = ('test_keypoint_accuracy', 0.558, 0.77)

_SCRIPT = '''import numpy as np
import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)
rng = np.random.RandomState(0)
H, W, R = 16, 24, 2                      # heatmaps are wider than tall


def gaussian2D(shape, sigma=1):
    m, n = [(ss - 1.) / 2. for ss in shape]
    y, x = np.ogrid[-m:m + 1, -n:n + 1]
    return np.exp(-(x * x + y * y) / (2 * sigma * sigma))


def draw_gaussian(heatmap, center, radius):
    diameter = 2 * radius + 1
    gaussian = gaussian2D((diameter, diameter), sigma=diameter / 6)
    x, y = int(center[0]), int(center[1])
__SHAPE__    left, right = min(x, radius), min(width - x, radius + 1)
    top, bottom = min(y, radius), min(height - y, radius + 1)
    masked_heatmap = heatmap[y - top:y + bottom, x - left:x + right]
    masked_gaussian = gaussian[radius - top:radius + bottom, radius - left:radius + right]
    if min(masked_gaussian.shape) > 0 and min(masked_heatmap.shape) > 0:
        np.maximum(masked_heatmap, masked_gaussian, out=masked_heatmap)
    return heatmap


def make(n):
    xs = rng.randint(0, W, n)
    ys = rng.randint(R, H - R - 1, n)      # keypoints kept away from the top and bottom edges
    imgs = 0.3 * rng.randn(n, H, W)
    hms = np.zeros((n, H, W))
    for k in range(n):
        imgs[k] += gaussian2D((H * 2 + 1, W * 2 + 1), sigma=1.0)[H - ys[k]:2 * H - ys[k], W - xs[k]:2 * W - xs[k]]
        draw_gaussian(hms[k], (xs[k], ys[k]), R)
    return (torch.tensor(imgs, dtype=torch.float32).reshape(n, -1),
            torch.tensor(hms, dtype=torch.float32).reshape(n, -1), torch.tensor(ys * W + xs))


Xtr, Htr, _ = make(2000)
Xte, _, Pte = make(500)
model = nn.Sequential(nn.Linear(H * W, 256), nn.ReLU(), nn.Linear(256, H * W))
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
#@guard
for step in range(400):
    i = torch.randint(0, 2000, (64,))
    loss = F.mse_loss(model(Xtr[i]), Htr[i])
    opt.zero_grad()
    loss.backward()
    opt.step()
with torch.no_grad():
    pred = model(Xte).argmax(1)
dist = ((pred // W - Pte // W) ** 2 + (pred % W - Pte % W) ** 2).float().sqrt()
print(f"METRIC {(dist <= 1).float().mean().item():.4f}")
'''


def script(bug: bool) -> str:
    shape = ('    width, height = heatmap.shape\n' if bug
             else '    height, width = heatmap.shape\n')
    return _SCRIPT.replace('__SHAPE__', shape)
