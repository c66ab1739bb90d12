"""A crowd count read from a density map after upsampling it to the image resolution: interpolation keeps
the density *values*, not their sum, so the count grows with the square of the upsampling factor -- with no
error.

Source: Yiming-M/CLIP-EBC#11 (https://github.com/Yiming-M/CLIP-EBC/issues/11), "Model consistently
predicts roughly double the gt count"; maintainer: "did you follow this procedure to obtain the total
count from an image: 1. Generate the predicted density map from the image (trivial); 2. Upsample the
density map to match the resolution of the image; 3. Sum up the upsampled density map to obtain the total
count value. If so, it's the upsampling that changes the total count value. You need to either 1) obtain
the total count from the originally produced density map, or ...".  Here a small CNN is trained to predict
a half-resolution density map (each cell holds the number of heads in it) of 32 x 32 images with 5-40
blurred dots, and the count of each held-out image is read from the predicted map.  The buggy evaluation
upsamples the map to 32 x 32 with ``F.interpolate(..., mode="bilinear")`` before summing; the twin sums
the map the network produced.

Metric: mean absolute counting error on 200 held-out images (plain ``python``, CPU, seed 0): bug 70.2551,
twin 1.1439 (lower is better)
"""

REPORT = "N170"
MECHANISM = "density-upsampled-before-summing"
SLUGS = ()
METRIC = ("val_count_mae", 70.2551, 1.1439)

_SCRIPT = '''
import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)
g = torch.Generator().manual_seed(1)
S = 32


def crowds(n):
    """Images of blurred dots on noise; density maps at half resolution that sum to the head count."""
    images = torch.zeros(n, 1, S, S)
    density = torch.zeros(n, 1, S // 2, S // 2)
    counts = torch.randint(5, 41, (n,), generator=g)
    for i in range(n):
        ys = torch.randint(0, S, (int(counts[i]),), generator=g)
        xs = torch.randint(0, S, (int(counts[i]),), generator=g)
        images[i, 0, ys, xs] += 1.0
        density[i, 0].index_put_((ys // 2, xs // 2), torch.ones(len(ys)), accumulate=True)
    images = F.avg_pool2d(F.pad(images, (1, 1, 1, 1)), 3, 1) * 3 + 0.1 * torch.randn(n, 1, S, S, generator=g)
    return images, density, counts.float()


x_train, d_train, _ = crowds(1000)
x_val, _, c_val = crowds(200)
model = nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.Conv2d(16, 16, 3, padding=1), nn.ReLU(),
                      nn.AvgPool2d(2), nn.Conv2d(16, 1, 3, padding=1))
opt = torch.optim.Adam(model.parameters(), lr=2e-3)
#@guard
for epoch in range(6):
    perm = torch.randperm(1000)
    for i in range(0, 1000, 50):
        idx = perm[i:i + 50]
        loss = F.mse_loss(model(x_train[idx]), d_train[idx]) * 100
        opt.zero_grad()
        loss.backward()
        opt.step()

model.eval()
with torch.no_grad():
    pred_density = model(x_val)
__COUNT__
print(f"METRIC {(pred_count - c_val).abs().mean():.4f}")
'''

_BUG = """upsampled = F.interpolate(pred_density, size=(S, S), mode="bilinear", align_corners=False)
pred_count = upsampled.sum((1, 2, 3))"""
_TWIN = "pred_count = pred_density.sum((1, 2, 3))"


def script(bug: bool) -> str:
    return _SCRIPT.replace("__COUNT__", _BUG if bug else _TWIN)
