"""Contrastive pretraining whose two "views" come from one call of the random augmentation: both
views get the same random shift and noise, so every positive pair is identical, the task is solved
without learning any invariance, and the representation ignores what the augmentations were meant
to teach.

Source: Project-MONAI/tutorials#468 (https://github.com/Project-MONAI/tutorials/pull/468, merged),
"Augmentation fix for determinism": "The same augmentation call on two images will lead to exact same
augmentation hence two calls are made to get different views"; Project-MONAI/tutorials#467, "SSL
random augmentations broken with 0.8.0": "with MONAI 0.8.0 the behaviour of the random transforms
changed and the same random transform states will be applied to both image keys".  Here a SimCLR
encoder (NT-Xent, temperature 0.2) is pretrained on digits whose augmentation shifts the 8x8 image by
up to two pixels and adds noise; the buggy pipeline draws the augmentation once and applies it to
both views, the twin draws it for each view; the frozen encoder is then probed with 1-nearest
neighbour from clean training digits to shifted validation digits.

Metric: probe accuracy on shifted validation digits (plain ``python``, CPU, seed 0): bug 0.1537,
twin 0.3678.
"""

from tests.wild.cases.common import PRELUDE

REPORT = "N96"
MECHANISM = "contrastive-views-identical"
SLUGS = ()
METRIC = ("probe_shifted_val_accuracy", 0.1537, 0.3678)

_SCRIPT = PRELUDE + '''

def augment(x, g):
    """A random shift of up to two pixels each way (one shift per call), then noise."""
    img = x.view(-1, 8, 8)
    dx, dy = torch.randint(-2, 3, (2,), generator=g).tolist()
    img = torch.roll(img, shifts=(dy, dx), dims=(1, 2))
    return (img.flatten(1) + 0.1 * torch.randn(img.shape[0], 64, generator=g)).clamp(0, 1)


def two_views(x, g):
__VIEWS__


def nt_xent(z1, z2, tau=0.2):
    z = F.normalize(torch.cat([z1, z2]), dim=1)
    sim = z @ z.t() / tau
    sim.fill_diagonal_(float("-inf"))
    n = len(z1)
    target = torch.cat([torch.arange(n, 2 * n), torch.arange(n)])
    return F.cross_entropy(sim, target)


model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 32))
opt = torch.optim.Adam(model.parameters(), lr=2e-3)
#@guard
g = torch.Generator().manual_seed(1)
for step in range(400):
    idx = torch.randint(1400, (128,), generator=g)
    v1, v2 = two_views(X[idx], g)
    opt.zero_grad()
    nt_xent(model(v1), model(v2)).backward()
    opt.step()

model.eval()
with torch.no_grad():
    bank = F.normalize(model(X[:1400]), dim=1)
    shifted = torch.cat([augment(X[1400 + k:1401 + k], g) for k in range(len(X) - 1400)])
    query = F.normalize(model(shifted), dim=1)
    pred = Y[:1400][(query @ bank.t()).argmax(1)]
print(f"METRIC {(pred == Y[1400:]).float().mean().item():.4f}")
'''

_BUG = """    view = augment(x, g)                                       # one draw for both keys
    return view, view"""
_FIX = """    return augment(x, g), augment(x, g)                        # one draw per view"""


def script(bug: bool) -> str:
    return _SCRIPT.replace("__VIEWS__", _BUG if bug else _FIX)
