"""``F.grid_sample`` given pixel coordinates: the sampling grid must be normalised to ``[-1, 1]``, and a grid in
pixel units puts almost every sample point outside the image, where the zero padding is read instead of the
image -- nothing fails, the sampled features are simply mostly zeros.

Source: cvg/nice-slam#26 (https://github.com/cvg/nice-slam/issues/26), "Grid Normalization: potential bug at
src.utils.Mesher": "Here, vgrid, i.e., uv, is the projected coordinates, while F.grid_sample requires the
coordinates to be normalized into [-1, 1]", with the fix ``vgrid[..., 0] = (vgrid[..., 0] / (W-1) * 2.0 - 1.0)``
(and the same for y); maintainer: "I think you are right. Since this part is only cleaning the mesh to make it
nicer, I got careless . Sorry for this bug!". Here a classifier reads each 8x8 digit through a 6x6 set of points
sampled with ``grid_sample(..., align_corners=True)`` at pixel positions between 1 and 6, as the repository
samples a depth map at projected pixels; the twin normalises the grid as the fix does. The reproduction
replaces the repository's depth maps and mesh culling by digits and a classifier.

Metric: test accuracy (plain ``python``, CPU, seed 0): bug 0.1184, twin 0.8892
"""

from tests.wild.cases.common import PRELUDE

REPORT = "N413"
MECHANISM = "sampling-grid-in-pixel-units"
SLUGS = ()
METRIC = ("test_accuracy", 0.1184, 0.8892)

_SCRIPT = PRELUDE + '''

H = W = 8
ys, xs = torch.meshgrid(torch.linspace(1, 6, 6), torch.linspace(1, 6, 6), indexing="ij")
uv = torch.stack([xs, ys], dim=-1)  # pixel coordinates (x, y) of the sample points
__GRID__
vgrid = vgrid.reshape(1, 6, 6, 2)


class Glimpse(nn.Module):
    def __init__(self):
        super().__init__()
        self.head = nn.Sequential(nn.Linear(36, 128), nn.ReLU(), nn.Linear(128, 10))

    def forward(self, x):
        img = x.view(-1, 1, H, W)
        grid = vgrid.expand(img.shape[0], -1, -1, -1)
        sampled = F.grid_sample(img, grid, padding_mode="zeros", align_corners=True)
        return self.head(sampled.flatten(1))


model = Glimpse()
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
#@guard
loader = DataLoader(train_ds, batch_size=64, shuffle=True)
for epoch in range(30):
    for xb, yb in loader:
        loss = F.cross_entropy(model(xb), yb)
        opt.zero_grad()
        loss.backward()
        opt.step()
model.eval()
with torch.no_grad():
    acc = (model(X[1400:]).argmax(1) == Y[1400:]).float().mean().item()
print(f"METRIC {acc:.4f}")
'''

_BUG = "vgrid = uv.clone()"
_FIX = '''vgrid = uv.clone()
vgrid[..., 0] = vgrid[..., 0] / (W - 1) * 2.0 - 1.0
vgrid[..., 1] = vgrid[..., 1] / (H - 1) * 2.0 - 1.0'''


def script(bug: bool) -> str:
    return _SCRIPT.replace("__GRID__", _BUG if bug else _FIX)
