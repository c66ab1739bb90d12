"""A segmentation augmentation that resamples the integer label mask with the same bilinear interpolation as the image:
at the border between background (class 0) and a class-2 object the interpolated labels pass through 1 and round to
class 1, so every rotated object gets a ring of class-1 labels that the image does not show, and the model learns to
predict class 1 around class-2 objects -- nothing fails.

Source: kornia/kornia#1630 (https://github.com/kornia/kornia/pull/1630), "Use nearest neighbour interpolation for
masks": "For masks in an `AugmentationSequential` container, overwrite to use `Resample.NEAREST` interpolation mode
for those augmentations that use interpolation ... the previous behaviour with default bilinear interpolation gives
this cropped and resized mask" (merged; the same fix elsewhere: "Not crucial bug, bug some interpolation would lead
to extra indexes in dseg_mask", Macatools/macapype#209). Here 24x24 images hold a disc (class 2) and a small square
(class 1) on background; training batches are rotated and scaled by ``affine_grid``/``grid_sample``, the image
bilinearly; the bug resamples the mask with ``mode='bilinear'`` and rounds it, the twin with ``mode='nearest'``. The
reproduction replaces kornia's augmentation container by the two ``grid_sample`` calls and a U-Net by three
convolutions, and tests on unaugmented images.

Metric: mean IoU over the three classes on 100 test images (plain ``python``, CPU, seed 0): bug 0.7526, twin
0.9860
"""

REPORT = "N360"
MECHANISM = "label-mask-resampled-bilinearly"
SLUGS = ()
METRIC = ('test_mean_iou', 0.7526, 0.986)

_SCRIPT = '''import math
import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)
S = 24


def sample(n):
    yy, xx = torch.meshgrid(torch.arange(S), torch.arange(S), indexing='ij')
    cx, cy = torch.randint(7, 17, (2, n, 1, 1))
    r = torch.randint(4, 7, (n, 1, 1))
    circle = (xx - cx) ** 2 + (yy - cy) ** 2 <= r * r
    sx, sy = torch.randint(0, S - 4, (2, n, 1, 1))
    square = (xx >= sx) & (xx < sx + 3) & (yy >= sy) & (yy < sy + 3) & ~circle
    masks = 2 * circle.long() + square.long()
    imgs = (0.5 * circle.float() + square.float())[:, None]
    return imgs + 0.1 * torch.randn_like(imgs), masks


def augment(img, mask):
    n = len(img)
    ang = (torch.rand(n) - 0.5) * math.pi / 2
    sc = 0.8 + 0.4 * torch.rand(n)
    theta = torch.zeros(n, 2, 3)
    theta[:, 0, 0], theta[:, 0, 1] = sc * torch.cos(ang), -sc * torch.sin(ang)
    theta[:, 1, 0], theta[:, 1, 1] = sc * torch.sin(ang), sc * torch.cos(ang)
    grid = F.affine_grid(theta, img.shape, align_corners=False)
    img = F.grid_sample(img, grid, mode='bilinear', align_corners=False)
    m = F.grid_sample(mask[:, None].float(), grid, __MODE__, align_corners=False)
    return img, m[:, 0].round().long()


model = nn.Sequential(nn.Conv2d(1, 32, 3, padding=1), nn.ReLU(), nn.Conv2d(32, 32, 3, padding=1), nn.ReLU(),
                      nn.Conv2d(32, 3, 3, padding=1))
opt = torch.optim.Adam(model.parameters(), lr=3e-3)
#@guard
for step in range(300):
    img, mask = augment(*sample(16))
    loss = F.cross_entropy(model(img), mask)
    opt.zero_grad()
    loss.backward()
    opt.step()
img, mask = sample(100)
with torch.no_grad():
    pred = model(img).argmax(1)
ious = []
for c in range(3):
    inter = ((pred == c) & (mask == c)).sum().item()
    union = ((pred == c) | (mask == c)).sum().item()
    ious.append(inter / union)
print(f"METRIC {sum(ious) / 3:.4f}")
'''


def script(bug: bool) -> str:
    s = _SCRIPT
    s = s.replace('__MODE__', "mode='bilinear'" if bug
                  else "mode='nearest'")
    return s
