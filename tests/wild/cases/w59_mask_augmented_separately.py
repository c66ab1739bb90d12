"""Segmentation data augmented with a random transform drawn separately for the image and for its
mask: the mask is shifted by one offset and the image by another, so the targets no longer lie on
the pixels they label.

Source: mdbloice/Augmentor#188 (https://github.com/mdbloice/Augmentor/issues/188), "Severe
misalignment between image and mask after random distortion": "Augmentor can not synchronize the
random distortion between image and label"; the maintainer fixed it in 0.2.6.  Here a small
convolutional network segments the ink of noisy digits; the training set's ``__getitem__`` shifts
image and mask by a random offset of up to two pixels in each direction (``torch.roll``), drawn
twice in the buggy script and once in the twin.

Metric: validation IoU of the ink mask (plain ``python``, CPU, seed 0): bug 0.1729, twin 0.7426.
"""

from tests.wild.cases.common import PRELUDE

REPORT = "N33"
MECHANISM = "augmentation-desynchronised"
SLUGS = ()
METRIC = ("val_iou", 0.1729, 0.7426)

_SCRIPT = PRELUDE + '''
from torch.utils.data import Dataset

g = torch.Generator().manual_seed(1)
images = (X.reshape(-1, 1, 8, 8) + 0.35 * torch.randn(len(X), 1, 8, 8, generator=g)).clamp(0, 1.5)
masks = (X.reshape(-1, 1, 8, 8) > 0.4).float()


def random_shift(t, draw):
    return torch.roll(t, shifts=(int(draw[0]), int(draw[1])), dims=(-2, -1))


class Segmentation(Dataset):
    def __init__(self, images, masks, augment):
        self.images, self.masks, self.augment = images, masks, augment

    def __len__(self):
        return len(self.images)

    def __getitem__(self, i):
        image, mask = self.images[i], self.masks[i]
        if self.augment:
            draw = torch.randint(-2, 3, (2,))
            image = random_shift(image, draw)
            mask = random_shift(mask, __MASK_DRAW__)
        return image, mask


model = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 8, 3, padding=1), nn.ReLU(),
                      nn.Conv2d(8, 1, 3, padding=1))
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
#@guard
loader = DataLoader(Segmentation(images[:1400], masks[:1400], augment=True), batch_size=64, shuffle=True)
for epoch in range(3):
    for xb, yb in loader:
        opt.zero_grad()
        loss = F.binary_cross_entropy_with_logits(model(xb), yb)
        loss.backward()
        opt.step()
model.eval()
with torch.no_grad():
    pred = model(images[1400:]) > 0
truth = masks[1400:] > 0.5
iou = ((pred & truth).sum() / (pred | truth).sum()).item()
print(f"METRIC {iou:.4f}")
'''


def script(bug: bool) -> str:
    return _SCRIPT.replace("__MASK_DRAW__", "torch.randint(-2, 3, (2,))" if bug else "draw")
