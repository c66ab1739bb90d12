"""An evaluation transform that pads the ground-truth masks with the default fill 0, which is a real
class, instead of the ignore index: every padded pixel becomes a labelled pixel of class 0 that the
model (seeing only padding there) never predicts, and class 0's IoU and the mean IoU fall -- with no
error.

Source: NVIDIA/semantic-segmentation#46 (https://github.com/NVIDIA/semantic-segmentation/issues/46),
"Bug in evaluation transform": "For evaluation of mapillary, you use centercroppad ... but you forgot
to add ``ignore_index=65`` in the argument. By default the ``ignore index`` is ``0`` in the function
definition, so this means you pad the GT mask into class 0, which is bird class"; maintainer: "I do
believe you are right" (fixed in #51).  Here a small fully convolutional network segments 12x12
images into three classes (0: thin bright lines, 1: background, 2: blobs); the evaluation images are
centre-padded to 16x16 (zeros for the image) and the masks with the evaluation transform's fill:
0 in the buggy script, the ignore index 255 in the twin, and the mean IoU skips ignored pixels.

Metric: validation mean IoU over the three classes (plain ``python``, CPU, seed 0): bug 0.5371, twin 0.9977
"""

REPORT = "N144"
MECHANISM = "eval-mask-padded-with-real-class"
SLUGS = ()
METRIC = ("val_mean_iou", 0.5371, 0.9977)

_SCRIPT = '''
import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)
g = torch.Generator().manual_seed(1)
IGNORE = 255


def make(n):
    images = torch.rand(n, 1, 12, 12, generator=g) * 0.2
    masks = torch.ones(n, 12, 12, dtype=torch.long)
    for i in range(n):
        r = int(torch.randint(0, 12, (1,), generator=g))
        images[i, 0, r, :] += 0.5
        masks[i, r, :] = 0
        y, x = torch.randint(2, 8, (2,), generator=g).tolist()
        images[i, 0, y:y + 3, x:x + 3] += 0.8
        masks[i, y:y + 3, x:x + 3] = 2
    return images, masks


def center_crop_pad(images, masks, size=16, ignore_index=0):
    p = (size - images.shape[-1]) // 2
    return F.pad(images, (p, p, p, p), value=0.0), F.pad(masks, (p, p, p, p), value=ignore_index)


x_train, m_train = make(600)
x_val, m_val = center_crop_pad(*make(200), ignore_index=__FILL__)
model = nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.Conv2d(16, 16, 3, padding=1), nn.ReLU(),
                      nn.Conv2d(16, 3, 1))
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
#@guard
for epoch in range(10):
    for i in range(0, 600, 32):
        loss = F.cross_entropy(model(x_train[i:i + 32]), m_train[i:i + 32], ignore_index=IGNORE)
        opt.zero_grad()
        loss.backward()
        opt.step()

model.eval()
with torch.no_grad():
    pred = model(x_val).argmax(1)
valid = m_val != IGNORE
ious = []
for c in range(3):
    p, t = (pred == c) & valid, (m_val == c) & valid
    ious.append(((p & t).sum() / (p | t).sum()).item())
print(f"METRIC {sum(ious) / 3:.4f}")
'''


def script(bug: bool) -> str:
    return _SCRIPT.replace("__FILL__", "0" if bug else "IGNORE")
