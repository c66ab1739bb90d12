"""Reconstruction errors computed on images converted to ``uint8`` and left there: ``img1 - img2`` wraps
around below zero (1 - 2 = 255) and the square wraps again, so the reported errors are dominated by
overflow, not by the model -- with no error.

Source: ybarancan/efficient_spectral_cnn#5 (https://github.com/ybarancan/efficient_spectral_cnn/issues/5),
"Arithmetic overflow problem": "`img1 = (255*img1).astype(np.uint8).squeeze()` `img2 =
(255*img2).astype(np.uint8).squeeze()` Arithmetic operation in unit8 type may occur arithmetic overflow
problem ... So, It will be a bad result when calculating RMSE , rRMSE ... by using the uint8 type: `aae =
np.mean(np.sqrt((img1 - img2) ** 2))`"; maintainer: "Yes you are right. After setting it to uint8, it should
be converted back to float. The results with float (set unt=False) make much more sense."  Here a
per-pixel network reconstructs 8 spectral bands from 3 noisy colour channels (a fixed random camera
response) of 16 x 16 patches, and the tester quantises prediction and ground truth to 8 bits as the
repository does.  The buggy tester computes the absolute error on the ``uint8`` arrays; the twin converts
them back to float first.

Metric: the reported mean absolute error in 8-bit levels on 100 held-out patches (plain ``python``, CPU,
seed 0): bug 8.8906, twin 26.8565 (lower is better; the predictions are the same in both: the bug reads better)
"""

REPORT = "N172"
MECHANISM = "metric-computed-in-uint8"
SLUGS = ()
METRIC = ("reported_aae", 8.8906, 26.8565)

_SCRIPT = '''
import numpy as np
import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)
g = torch.Generator().manual_seed(1)
BANDS = 8
response = torch.rand(3, BANDS, generator=g)
response = response / response.sum(1, keepdim=True)


def patches(n):
    """Smooth spectral patches in [0, 1] and their noisy colour images."""
    base = F.avg_pool2d(torch.rand(n, BANDS, 20, 20, generator=g), 5, 1)
    spectral = (base - base.amin((1, 2, 3), keepdim=True)) / (base.amax((1, 2, 3), keepdim=True)
                                                              - base.amin((1, 2, 3), keepdim=True))
    rgb = torch.einsum("cb,nbhw->nchw", response, spectral) + 0.01 * torch.randn(n, 3, 16, 16, generator=g)
    return rgb, spectral


x_train, s_train = patches(600)
x_test, s_test = patches(100)
model = nn.Sequential(nn.Conv2d(3, 32, 1), nn.ReLU(), nn.Conv2d(32, 32, 3, padding=1), nn.ReLU(),
                      nn.Conv2d(32, BANDS, 1), nn.Sigmoid())
opt = torch.optim.Adam(model.parameters(), lr=3e-3)
#@guard
for epoch in range(15):
    perm = torch.randperm(600)
    for i in range(0, 600, 30):
        idx = perm[i:i + 30]
        loss = F.l1_loss(model(x_train[idx]), s_train[idx])
        opt.zero_grad()
        loss.backward()
        opt.step()

model.eval()
with torch.no_grad():
    pred = model(x_test).numpy()
img1 = (255 * pred).astype(np.uint8).squeeze()
img2 = (255 * s_test.numpy()).astype(np.uint8).squeeze()
__CAST__
aae = np.mean(np.sqrt((img1 - img2) ** 2))
print(f"METRIC {aae:.4f}")
'''

_TWIN_CAST = "img1, img2 = img1.astype(np.float64), img2.astype(np.float64)"


def script(bug: bool) -> str:
    return _SCRIPT.replace("__CAST__", "" if bug else _TWIN_CAST)
