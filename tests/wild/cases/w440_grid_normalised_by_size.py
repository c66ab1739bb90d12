"""Grid coordinates normalised by the image size instead of the size minus one: with ``align_corners=True``,
``grid_sample`` maps -1 and 1 to the centres of the first and last pixels, so a pixel coordinate ``x`` normalises
to ``x / (W - 1) * 2 - 1``; dividing by ``W`` instead shrinks the sampled region towards the top-left corner and
every sample point lands between pixels -- nothing fails.

Source: zju3dv/neuralbody#134 (https://github.com/zju3dv/neuralbody/pull/134), "fix grid_coords in
get_grid_coords": "the code on line 57 should be modified from `dhw = dhw / out_sh * 2 - 1` to
`dhw = dhw / (out_sh-1) * 2 - 1`. The original computation can cause a slight offset in the coordinates of pts
queried in F.grid_sample"; maintainer: "Thank you! I agree with you. But this fix is conflicted with the
pre-trained models, so I cannot merge it." Here a classifier reads each 8x8 digit through a 6x6 set of points
sampled with ``grid_sample(..., align_corners=True)`` at pixel positions between 1 and 6, normalised by ``W`` in
the buggy run and by ``W - 1`` in the twin. The reproduction replaces the repository's 3-D feature volumes by
digits and a classifier.

Metric: test accuracy (plain ``python``, CPU, seed 0): bug 0.8564, twin 0.8892
"""

from tests.wild.cases.common import PRELUDE

REPORT = "N414"
MECHANISM = "grid-normalised-by-size-not-size-minus-one"
SLUGS = ()
METRIC = ("test_accuracy", 0.8564, 0.8892)

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

_BUG = '''vgrid = uv.clone()
vgrid[..., 0] = vgrid[..., 0] / W * 2.0 - 1.0
vgrid[..., 1] = vgrid[..., 1] / H * 2.0 - 1.0'''
_FIX = '''vgrid = uv.clone()
vgrid[..., 0] = vgrid[..., 0] / (W - 1) * 2.0 - 1.0
vgrid[..., 1] = vgrid[..., 1] / (H - 1) * 2.0 - 1.0'''


def script(bug: bool) -> str:
    return _SCRIPT.replace("__GRID__", _BUG if bug else _FIX)
