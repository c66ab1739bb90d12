"""Channels-last camera images turned into channels-first with ``reshape`` instead of
``permute``: the tensor has the right shape, but each "channel" plane is a strip of interleaved
pixels from across the image, so the convolutions see no spatial structure -- with no error.

Source: Selen-Suyue/DensePolicy2D#3 (https://github.com/Selen-Suyue/DensePolicy2D/issues/3), "a
mirror question about inference code": "we usually transform a b x h x w x c to b x c x h x w by
using img.permute(0,3,1,2).contiguous() ... while the results of permute and reshape are
different ... so if reshape is used, the operations will apply to a pretend image"; maintainer:
"Got it! I will update my code."  Here digits become colour images (each a random tint of the
digit, shifted by up to a pixel, stored channels-last as a camera gives them) read by a small CNN
with global pooling; the buggy script feeds ``obs.reshape(-1, 3, 8, 8)``, the twin
``obs.permute(0, 3, 1, 2)``.

Metric: validation accuracy (plain ``python``, CPU, seed 0): bug 0.7809, twin 0.8866.
"""

from tests.wild.cases.common import PRELUDE

REPORT = "N110"
MECHANISM = "channels-last-reshaped-not-permuted"
SLUGS = ()
METRIC = ("val_accuracy", 0.7809, 0.8866)

_SCRIPT = PRELUDE + '''
g = torch.Generator().manual_seed(1)
tint = 0.3 + 0.7 * torch.rand(len(X), 1, 1, 3, generator=g)
obs = X.reshape(-1, 8, 8, 1) * tint  # (N, H, W, C): channels last, as the camera delivers them
shift = torch.randint(-1, 2, (len(X), 2), generator=g)  # the camera jitters by a pixel
obs = torch.stack([torch.roll(o, (int(dy), int(dx)), dims=(0, 1)) for o, (dy, dx) in zip(obs, shift)])


def to_chw(o):
    return __LAYOUT__


model = nn.Sequential(nn.Conv2d(3, 32, 3, padding=1), nn.ReLU(), nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(),
                      nn.AdaptiveMaxPool2d(1), nn.Flatten(), nn.Linear(64, 10))
opt = torch.optim.Adam(model.parameters(), lr=2e-3)
#@guard
loader = DataLoader(TensorDataset(obs[:1400], Y[:1400]), batch_size=64, shuffle=True)
for epoch in range(8):
    model.train()
    for ob, yb in loader:
        opt.zero_grad()
        F.cross_entropy(model(to_chw(ob)), yb).backward()
        opt.step()

model.eval()
with torch.no_grad():
    acc = (model(to_chw(obs[1400:])).argmax(1) == Y[1400:]).float().mean().item()
print(f"METRIC {acc:.4f}")
'''


def script(bug: bool) -> str:
    return _SCRIPT.replace("__LAYOUT__", "o.reshape(-1, 3, 8, 8)" if bug else "o.permute(0, 3, 1, 2)")
