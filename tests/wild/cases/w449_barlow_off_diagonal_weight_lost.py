"""The Barlow Twins redundancy term without its weight: the loss is the on-diagonal invariance term plus
``lambda`` (5e-3 in the paper) times the off-diagonal redundancy term, and an off-diagonal term added without its
``lambda`` outweighs the invariance term by the number of off-diagonal entries -- nothing fails, the loss falls.

Source: IgorSusmelj/barlowtwins#1 (https://github.com/IgorSusmelj/barlowtwins/pull/1), "Fix buggy loss": "The
off-diagonal elements were not really multiplied by the `lambda_param`. I fixed it ... With this setup I'm at 56%
accuracy after 48 epochs on CIFAR-10" (merged). Here an MLP encoder with a projector is pretrained with the Barlow
Twins loss on pairs of noisy, shifted views of 1400 digits, and a linear probe trained on the frozen encoder
features of 300 labelled digits is tested on the held-out digits; the buggy loss adds the off-diagonal term
unweighted, the twin multiplies it by ``lambda``. The reproduction replaces the repository's ResNet on CIFAR-10 by
an MLP on digits.

Metric: linear-probe test accuracy (plain ``python``, CPU, seed 0): bug 0.7330, twin 0.8111
"""

from tests.wild.cases.common import PRELUDE

REPORT = "N423"
MECHANISM = "redundancy-term-weight-lost"
SLUGS = ()
METRIC = ("test_accuracy", 0.733, 0.8111)

_SCRIPT = PRELUDE + '''


def view(x):
    img = x.view(-1, 8, 8)
    dy, dx = torch.randint(-1, 2, (2,)).tolist()
    img = torch.roll(img, (dy, dx), (1, 2))
    return (img.reshape(-1, 64) + 0.3 * torch.randn(len(x), 64)).clamp(0, 1)


def off_diagonal(c):
    n = c.shape[0]
    return c.flatten()[:-1].view(n - 1, n + 1)[:, 1:].flatten()


encoder = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 64))
projector = nn.Sequential(nn.Linear(64, 256), nn.BatchNorm1d(256), nn.ReLU(), nn.Linear(256, 256))
model = nn.Sequential(encoder, projector)
bn = nn.BatchNorm1d(256, affine=False)
lambda_param = 5e-3
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
#@guard
for step in range(600):
    idx = torch.randint(0, 1400, (256,))
    z_a, z_b = model(view(X[idx])), model(view(X[idx]))
    c = bn(z_a).T @ bn(z_b) / 256
    on_diag = (torch.diagonal(c) - 1).pow(2).sum()
    off_diag = off_diagonal(c).pow(2).sum()
    __LOSS__
    opt.zero_grad()
    loss.backward()
    opt.step()

model.eval()
with torch.no_grad():
    feats = encoder(X)
probe = nn.Linear(64, 10)
popt = torch.optim.Adam(probe.parameters(), lr=1e-2)
for _ in range(300):
    ploss = F.cross_entropy(probe(feats[:300]), Y[:300])
    popt.zero_grad()
    ploss.backward()
    popt.step()
with torch.no_grad():
    acc = (probe(feats[1400:]).argmax(1) == Y[1400:]).float().mean().item()
print(f"METRIC {acc:.4f}")
'''

_BUG = "loss = on_diag + off_diag"
_FIX = "loss = on_diag + lambda_param * off_diag"


def script(bug: bool) -> str:
    return _SCRIPT.replace("__LOSS__", _BUG if bug else _FIX)
