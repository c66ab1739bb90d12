"""A hand-written inverse 2-D FFT that rebuilds the discarded half of the spectrum by conjugate symmetry with a
plain ``flip``: with the kept ``kx`` modes stored as ``[0, 1, ..., m-1, -m, ..., -1]``, ``flip(-2)`` yields
``[-1, ..., -m, m-1, ..., 1, 0]``, so every mode is paired with its neighbour's conjugate instead of its own
(``0`` with ``-1``, ``1`` with ``-2``, ...) and the operator's output carries an artefact it cannot learn
away -- with no error.

Source: neuraloperator/Geo-FNO#16 (https://github.com/neuraloperator/Geo-FNO/pull/16), "fixed bug in ifft2d when
reconstructing discarded modes in elas_geofno_v2.py" (merged): "When reconstructing the discarded ky modes in
ifft2d, the following line (line 142) is used: u_ft2 = u_ft[..., 1:].flip(-1, -2).conj() The stored kx modes
are ordered like [0,1,..., N - 1, -N, -(N - 1), ..., -1]. Applying flip(-2) gives [-1, ..., -N, N - 1, ..., 1,
0]. This pairs the 0 mode with -1, 1 mode with -2 etc., which is incorrect and shows up as a central vertical
artifact. My proposed edit fixes this error, getting rid of the artifact and leading to a decrease in loss of
15-20%"; maintainer: "Thank you Martin for helping us find the bug!".  Here a small Fourier neural operator whose
spectral layers invert with such an ``ifft2d`` (kept modes, conjugate half rebuilt, full ``torch.fft.ifft2``)
learns a diffusion operator (a smoothing in Fourier space) on random periodic fields of 16x16.  The buggy
rebuild is ``u_ft[..., 1:].flip(-1, -2).conj()``, the twin rolls the flipped ``kx`` axis by one so that
every mode meets the conjugate of its own negative.

Metric: relative L2 test error (plain ``python``, CPU, seed 0): bug 0.0826, twin 0.0056 (lower is better)
"""

REPORT = "N191"
MECHANISM = "conjugate-modes-paired-off-by-one"
SLUGS = ()
METRIC = ("test_relative_l2", 0.0826, 0.0056)

_SCRIPT = '''
import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)
g = torch.Generator().manual_seed(1)
S, M, W = 16, 6, 8  # grid, kept modes per axis, channels
k = torch.fft.fftfreq(S) * S
k2 = k[:, None] ** 2 + k[None, :] ** 2


def fields(n):
    coef = torch.randn(n, S, S, dtype=torch.cfloat, generator=g) * torch.exp(-k2 / 8)
    a = torch.fft.ifft2(coef).real
    a = a / a.std(dim=(1, 2), keepdim=True)
    u = torch.fft.ifft2(torch.fft.fft2(a) * torch.exp(-0.05 * k2)).real
    return a[:, None], u[:, None]


def ifft2d(u_ft):
    """u_ft: (batch, channels, 2M, M) kept modes, kx in [0..M-1, -M..-1], ky in [0..M-1]."""
    u_ft2 = __REBUILD__
    full = torch.zeros(u_ft.shape[0], u_ft.shape[1], S, S, dtype=torch.cfloat)
    rows = torch.cat([torch.arange(M), torch.arange(S - M, S)])
    full[:, :, rows, :M] = u_ft
    full[:, :, rows, S - M + 1:] = u_ft2
    return torch.fft.ifft2(full).real


class SpectralConv2d(nn.Module):
    def __init__(self):
        super().__init__()
        self.weights = nn.Parameter(torch.randn(W, W, 2 * M, M, dtype=torch.cfloat) / W)

    def forward(self, x):
        x_ft = torch.fft.fft2(x)
        rows = torch.cat([torch.arange(M), torch.arange(S - M, S)])
        kept = x_ft[:, :, rows, :M]
        return ifft2d(torch.einsum("bixy,ioxy->boxy", kept, self.weights))


class FNO(nn.Module):
    def __init__(self):
        super().__init__()
        self.lift = nn.Conv2d(1, W, 1)
        self.spectral = nn.ModuleList(SpectralConv2d() for _ in range(2))
        self.pointwise = nn.ModuleList(nn.Conv2d(W, W, 1) for _ in range(2))
        self.proj = nn.Conv2d(W, 1, 1)

    def forward(self, a):
        x = self.lift(a)
        for i, (sc, pw) in enumerate(zip(self.spectral, self.pointwise)):
            x = sc(x) + pw(x)
            x = F.gelu(x) if i == 0 else x
        return self.proj(x)


a_tr, u_tr = fields(800)
a_te, u_te = fields(200)
model = FNO()
opt = torch.optim.Adam(model.parameters(), lr=5e-3)
#@guard
for epoch in range(40):
    perm = torch.randperm(800)
    for i in range(0, 800, 50):
        b = perm[i:i + 50]
        loss = F.mse_loss(model(a_tr[b]), u_tr[b])
        opt.zero_grad()
        loss.backward()
        opt.step()

with torch.no_grad():
    err = (model(a_te) - u_te).flatten(1).norm(dim=1) / u_te.flatten(1).norm(dim=1)
print(f"METRIC {err.mean().item():.4f}")
'''

_BUG = "u_ft[..., 1:].flip(-1, -2).conj()"
_TWIN = "torch.roll(u_ft[..., 1:].flip(-1, -2), 1, dims=-2).conj()"


def script(bug: bool) -> str:
    return _SCRIPT.replace("__REBUILD__", _BUG if bug else _TWIN)
