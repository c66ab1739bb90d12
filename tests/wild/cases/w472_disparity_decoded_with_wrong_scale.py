"""Ground-truth disparities stored on disk as ``disparity * 100`` in a 16-bit image and decoded with ``/ 1024``:
every training target is about ten times too small, the network learns to predict them, and its disparities are
wrong by a factor of ten on any data decoded correctly -- the loss falls as usual.

Source: pytorch/vision#7129 (https://github.com/pytorch/vision/issues/7129), "Wrong disparity scale in InStereo2k
dataset": "https://github.com/YuhuaXu/StereoDataset describes the disparities as multiplied by 100 but in the code
they are divided by 1024"; maintainer: "any chance you remember why 1024 was used instead of 100?" (labels: bug;
fix #7453 reviewed). Here a small stereo network (1-D convolutional features, a correlation cost volume over 16
candidate disparities and a soft-argmin) is trained on synthetic left/right scanline pairs whose disparities are
stored as ``disp * 100`` and read back with ``stored / 1024`` (the bug) or ``stored / 100`` (the twin); it is
evaluated on pairs whose disparities are published in pixels. The reproduction departs from the report in the data
(synthetic 1-D scanlines instead of InStereo2k images) and the network (a toy correlation network instead of
torchvision's RAFT-Stereo or CREStereo).

Metric: end-point error in pixels (lower is better; plain ``python``, CPU, seed 0): bug 4.1266, twin 0.0599
"""

REPORT = "N446"
MECHANISM = "stored-target-decoded-with-wrong-scale"
SLUGS = ()
METRIC = ("test_epe", 4.1266, 0.0599)

_SCRIPT = '''
import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)
g = torch.Generator().manual_seed(0)
WIDTH, MAX_DISP = 96, 16


def scanline_pairs(n):
    """Left/right scanlines of a textured surface at a true disparity of 0-15 pixels, and the disparity
    ground truth as stored on disk: a 16-bit integer, the disparity times 100."""
    base = F.avg_pool1d(torch.randn(n, 1, WIDTH + MAX_DISP + 4, generator=g), 5, 1).squeeze(1)
    disp = torch.randint(0, MAX_DISP, (n,), generator=g)
    cols = torch.arange(WIDTH)
    left = base[:, MAX_DISP + cols]
    right = base[torch.arange(n)[:, None], MAX_DISP + cols[None, :] - disp[:, None]]
    stored = (disp.float() * 100).round().to(torch.int32)
    return torch.stack([left, right], 1), stored


def read_disparity(stored):
    return __DECODE__


class StereoNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.feat = nn.Sequential(nn.Conv1d(1, 16, 5, padding=2), nn.ReLU(), nn.Conv1d(16, 16, 5, padding=2))
        self.scale = nn.Parameter(torch.tensor(1.0))

    def forward(self, pair):
        fl = self.feat(pair[:, :1])
        fr = self.feat(pair[:, 1:])
        cost = torch.stack([(fl[..., :WIDTH - MAX_DISP] * fr[..., k:WIDTH - MAX_DISP + k]).mean((1, 2))
                            for k in range(MAX_DISP)], 1)
        weights = (cost * self.scale).softmax(dim=1)  # soft-argmin over the candidate disparities
        return (weights * torch.arange(MAX_DISP, dtype=cost.dtype)).sum(1)


train_x, train_stored = scanline_pairs(3000)
train_d = read_disparity(train_stored)
test_x, test_stored = scanline_pairs(600)
test_d = test_stored.float() / 100.0  # evaluation set published in pixels

model = StereoNet()
opt = torch.optim.Adam(model.parameters(), lr=2e-3)
#@guard
for epoch in range(8):
    perm = torch.randperm(len(train_x))
    for i in range(0, len(perm), 64):
        idx = perm[i:i + 64]
        loss = F.smooth_l1_loss(model(train_x[idx]), train_d[idx])
        opt.zero_grad()
        loss.backward()
        opt.step()
model.eval()
with torch.no_grad():
    epe = (model(test_x) - test_d).abs().mean().item()
print(f"METRIC {epe:.4f}")
'''


def script(bug: bool) -> str:
    return _SCRIPT.replace("__DECODE__", "stored.float() / 1024.0" if bug else "stored.float() / 100.0")
