"""Landmark targets encoded with a floor division and a missing pair of parentheses: ``offset // variance *
prior_size`` in place of ``offset / (variance * prior_size)``, so the targets the network regresses do not match
the decoder that turns its outputs back into positions, and predicted landmarks collapse toward the box centre --
with no error.

Source: ternaus/retinaface#37 (https://github.com/ternaus/retinaface/issues/37), "Fixed bug in the training
code!": "when training I noticed that it didn't learn the landmarks correctly (they would converge to the center
of the bbox) ... There seem to be missing parentheses in the encode_landm function, where the code is supposed to
divide by the variance times the prior boxes, it divides by only the variance and then multiplies by the prior
boxes"; original ``g_cxcy = g_cxcy // variances[0] * priors[:, :, 2:]``, fixed ``g_cxcy = g_cxcy /
(variances[0] * priors[:, :, 2:])``, in line with ``decode_landm`` (closed). Here a prior box of random size and
one landmark inside it are drawn; the network sees the landmark's position inside the box as two noisy 1-D
profiles plus the box size, regresses the encoded target with a smooth L1 loss, and its output is decoded with
RetinaFace's ``decode_landm``. The reproduction replaces the face images, the anchor matching and the five
landmarks by one landmark per synthetic prior.

Metric: mean landmark error on test, in units of the box size (lower is better) (plain ``python``, CPU, seed 0):
bug 0.2429, twin 0.0146
"""

REPORT = "N313"
MECHANISM = "landmark-target-floor-divided-without-parentheses"
SLUGS = ()
METRIC = ("test_landmark_error", 0.2429, 0.0146)

_SCRIPT = '''import torch
from torch import nn

torch.manual_seed(0)
VAR = (0.1, 0.2)
BINS = torch.linspace(-0.5, 0.5, 16)


def sample(n):
    wh = torch.rand(n, 2) * 0.25 + 0.05
    centre = torch.rand(n, 2) * 0.6 + 0.2
    rel = torch.rand(n, 2) - 0.5
    landm = centre + rel * wh
    prof = torch.exp(-((rel[:, :, None] - BINS) ** 2) / 0.005).flatten(1)
    feats = torch.cat([prof + 0.05 * torch.randn_like(prof), wh * 4], 1)
    priors = torch.cat([centre, wh], 1)
    return feats, priors, landm


def encode_landm(landm, priors):
    g_cxcy = landm - priors[:, :2]
    __ENCODE__
    return g_cxcy


def decode_landm(pre, priors):
    return priors[:, :2] + pre * VAR[0] * priors[:, 2:]


model = nn.Sequential(nn.Linear(34, 64), nn.ReLU(), nn.Linear(64, 2))
opt = torch.optim.Adam(model.parameters(), lr=3e-3)
#@guard
for step in range(1500):
    feats, priors, landm = sample(128)
    loss = nn.functional.smooth_l1_loss(model(feats), encode_landm(landm, priors))
    opt.zero_grad()
    loss.backward()
    opt.step()
with torch.no_grad():
    feats, priors, landm = sample(5000)
    err = ((decode_landm(model(feats), priors) - landm).abs() / priors[:, 2:]).mean().item()
print(f"METRIC {err:.4f}")
'''


def script(bug: bool) -> str:
    return _SCRIPT.replace('__ENCODE__', "g_cxcy = g_cxcy // VAR[0] * priors[:, 2:]" if bug
                           else "g_cxcy = g_cxcy / (VAR[0] * priors[:, 2:])")
