"""A horizontal-flip augmentation for object detection that mirrors the box coordinates without
swapping them: ``x1' = W - x1`` and ``x2' = W - x2`` give a box whose left edge lies right of its
right edge, so half of the flipped training targets contradict the image they go with.

Source: Nota-NetsPresso/netspresso-trainer#196
(https://github.com/Nota-NetsPresso/netspresso-trainer/issues/196), "[BUG] Logic error on random flip
augmentation bounding box coordinates computing": "`bbox[..., 0:4:2] = w - bbox[..., 0:4:2]` is not
correct, since it produces impossible box cases. `bbox` input has `[x1, y1, x2, y2, cls]` format, so
`x2` has to greater than `x1` ... Computed `x` coordinates should be swapped each other" (fixed in
#211).  Here a small box regressor is trained on synthetic 16x16 images with one bright rectangle,
with a random horizontal flip of image and box; the buggy flip keeps the coordinates' order, the
twin swaps them.

Metric: mean IoU of the predicted boxes on unflipped validation images (plain ``python``, CPU,
seed 0): bug 0.2532, twin 0.769.
"""

REPORT = "N82"
MECHANISM = "box-flip-corners-unswapped"
SLUGS = ()
METRIC = ("val_mean_iou", 0.2532, 0.769)

_SCRIPT = '''
import torch
from torch import nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(0)
W = 16


def scenes(n, seed):
    g = torch.Generator().manual_seed(seed)
    x1 = torch.randint(0, 10, (n,), generator=g)
    y1 = torch.randint(0, 10, (n,), generator=g)
    x2 = x1 + torch.randint(3, 7, (n,), generator=g)
    y2 = y1 + torch.randint(3, 7, (n,), generator=g)
    images = 0.1 * torch.rand(n, W, W, generator=g)
    for i in range(n):
        images[i, y1[i]:y2[i], x1[i]:x2[i]] += 1.0
    return images, torch.stack([x1, y1, x2, y2], 1).float()


def hflip(image, box):
    x1, y1, x2, y2 = box
    return image.flip(-1), __FLIPPED__


class Boxes(Dataset):
    def __init__(self, images, boxes):
        self.images, self.boxes = images, boxes

    def __len__(self):
        return len(self.images)

    def __getitem__(self, i):
        image, box = self.images[i], self.boxes[i]
        if torch.rand(()) < 0.5:
            image, box = hflip(image, box)
        return image.flatten(), box / W


def iou(a, b):
    ix = (torch.minimum(a[:, 2], b[:, 2]) - torch.maximum(a[:, 0], b[:, 0])).clamp(min=0)
    iy = (torch.minimum(a[:, 3], b[:, 3]) - torch.maximum(a[:, 1], b[:, 1])).clamp(min=0)
    inter = ix * iy
    area = lambda r: (r[:, 2] - r[:, 0]).clamp(min=0) * (r[:, 3] - r[:, 1]).clamp(min=0)
    return inter / (area(a) + area(b) - inter)


model = nn.Sequential(nn.Linear(W * W, 128), nn.ReLU(), nn.Linear(128, 4))
opt = torch.optim.Adam(model.parameters(), lr=2e-3)
#@guard
images, boxes = scenes(2000, seed=1)
loader = DataLoader(Boxes(images, boxes), batch_size=64, shuffle=True)
for epoch in range(15):
    for xb, yb in loader:
        opt.zero_grad()
        F.smooth_l1_loss(model(xb), yb).backward()
        opt.step()

model.eval()
val_images, val_boxes = scenes(400, seed=2)
with torch.no_grad():
    pred = model(val_images.flatten(1)) * W
print(f"METRIC {iou(pred, val_boxes).mean().item():.4f}")
'''

_BUG = "torch.stack([W - x1, y1, W - x2, y2])           # mirrored, corners not swapped"
_FIX = "torch.stack([W - x2, y1, W - x1, y2])           # mirrored, left edge from the old right edge"


def script(bug: bool) -> str:
    return _SCRIPT.replace("__FLIPPED__", _BUG if bug else _FIX)
