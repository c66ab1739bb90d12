"""``ToTensor()`` applied to a segmentation mask: it rescales uint8 values from [0, 255] to [0, 1],
so class ids 1..10 become 0.004..0.04, and ``.long()`` turns every pixel into class 0 (background).
The network is trained to predict background everywhere; nothing fails.

Source: pytorch/vision#2497 (https://github.com/pytorch/vision/issues/2497), "Grayscale image mask is
transformed in a performance decreasing way with ToTensor()": "the performance was incredibly bad and
the models could not even overfit on a simple dataset. ... the values become some float values
because of the [0,255] to [0,1] rescaling"; also pytorch/pytorch#53959 ("you should not apply
`ToTensor` on mask ... as it also scales the data") and albumentations#148.  torchvision is not
installed here, so ``to_tensor`` below does what ``torchvision.transforms.functional.to_tensor``
does to a uint8 image (HWC to CHW, divided by 255).  The task: per-pixel segmentation of digits
(class = digit + 1 on the stroke pixels, 0 elsewhere) with a small convolutional network; the twin
converts the mask with ``torch.as_tensor``.

Metric: foreground pixel accuracy on validation images (plain ``python``, CPU, seed 0): bug 0, twin 0.4155.
"""

from tests.wild.cases.common import FIT

REPORT = "N55"
MECHANISM = "mask-rescaled-by-to-tensor"
SLUGS = ()
METRIC = ("val_foreground_accuracy", 0.0, 0.4155)

_SCRIPT = '''
import numpy as np
import torch
from torch import nn
import torch.nn.functional as F
from sklearn.datasets import load_digits
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(0)
digits = load_digits()


def to_tensor(pic):
    """torchvision.transforms.functional.to_tensor for a uint8 HxW or HxWxC array."""
    t = torch.from_numpy(np.ascontiguousarray(pic))
    if t.ndim == 2:
        t = t[:, :, None]
    return t.permute(2, 0, 1).float().div(255)


class Segmentation(Dataset):
    def __init__(self, images, labels):
        self.images = (images / 16.0 * 255).astype(np.uint8).reshape(-1, 8, 8)
        self.masks = np.where(self.images > 96, labels[:, None, None] + 1, 0).astype(np.uint8)

    def __len__(self):
        return len(self.images)

    def __getitem__(self, i):
        image = to_tensor(self.images[i])
        mask = __MASK__
        return image, mask


train_ds = Segmentation(digits.data[:1400], digits.target[:1400])
val_ds = Segmentation(digits.data[1400:], digits.target[1400:])
model = nn.Sequential(nn.Conv2d(1, 32, 3, padding=1), nn.ReLU(), nn.Conv2d(32, 32, 3, padding=2, dilation=2),
                      nn.ReLU(), nn.Conv2d(32, 11, 1))
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
#@guard
''' + FIT + '''
fit(model, opt, DataLoader(train_ds, batch_size=32, shuffle=True), 4)

model.eval()
hit = total = 0
with torch.no_grad():
    for i in range(len(val_ds)):
        image = to_tensor(val_ds.images[i])[None]
        truth = torch.as_tensor(val_ds.masks[i]).long()
        pred = model(image).argmax(1)[0]
        fg = truth > 0
        hit += (pred[fg] == truth[fg]).sum().item()
        total += fg.sum().item()
print(f"METRIC {hit / total:.4f}")
'''


def script(bug: bool) -> str:
    return _SCRIPT.replace("__MASK__", "to_tensor(self.masks[i])[0].long()" if bug
                           else "torch.as_tensor(self.masks[i]).long()")
