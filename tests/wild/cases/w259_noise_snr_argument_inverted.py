"""A noise augmentation whose signal-to-noise argument works backwards: the noise level is the signal level
times ``10 ** (snr / 20)`` instead of divided by it, so the "10 to 30 dB SNR" meant as mild noise buries every
training clip 10 to 30 dB under the noise -- with no error.

Source: iver56/audiomentations#86 (https://github.com/iver56/audiomentations/issues/86), "SNR inverse
chracteristics": "Signal-to-noise ratio (SNR) is defined as the ratio of the power of a signal ... to the power
of background noise. But the "AddGaussianSNR" method has arguments which have inverse chracteristics. When you
increase SNR in the method the real SNR decreases. Should be the opposite."; maintainer: "I agree. This is
confusing behavior and we should change it. We should also use dB" (fixed in #108).  Here eight classes of
noisy tones (the class sets the frequency, phase and amplitude random) are classified from their log magnitude
spectrum by an MLP; every training batch goes through an ``AddGaussianSNR``-like function with an SNR drawn in
[10, 30] dB, the test clips are not augmented.  The buggy noise level multiplies the clip's RMS by the
ratio, the twin divides it.  audiomentations works on numpy waveforms; the augmentation is written in torch.

Metric: test accuracy (plain ``python``, CPU, seed 0): bug 0.1280, twin 0.9910
"""

REPORT = "N233"
MECHANISM = "augmentation-snr-inverted"
SLUGS = ()
METRIC = ("test_accuracy", 0.1280, 0.9910)

_SCRIPT = '''import math
import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)
L, K = 256, 8
t = torch.arange(L) / L


def clips(n):
    y = torch.randint(0, K, (n,))
    freq = 6 + 4 * y + torch.randint(-1, 2, (n,))
    phase = 2 * math.pi * torch.rand(n, 1)
    amp = 0.5 + torch.rand(n, 1)
    x = amp * torch.sin(2 * math.pi * freq[:, None] * t + phase) + 0.3 * torch.randn(n, L)
    return x, y


x_tr, y_tr = clips(2000)
x_te, y_te = clips(1000)


def add_gaussian_snr(x, min_snr_db=10.0, max_snr_db=30.0):
    snr_db = min_snr_db + (max_snr_db - min_snr_db) * torch.rand(len(x), 1)
    rms = x.pow(2).mean(1, keepdim=True).sqrt()
    noise_rms = rms __OP__ 10 ** (snr_db / 20)
    return x + noise_rms * torch.randn_like(x)


class Spectrum(nn.Module):
    def forward(self, x):
        return torch.log1p(torch.fft.rfft(x).abs())


model = nn.Sequential(Spectrum(), nn.Linear(L // 2 + 1, 64), nn.ReLU(), nn.Linear(64, K))
opt = torch.optim.Adam(model.parameters(), lr=3e-3)
#@guard
for step in range(300):
    i = torch.randint(0, len(x_tr), (128,))
    loss = F.cross_entropy(model(add_gaussian_snr(x_tr[i])), y_tr[i])
    opt.zero_grad()
    loss.backward()
    opt.step()
with torch.no_grad():
    acc = (model(x_te).argmax(1) == y_te).float().mean().item()
print(f"METRIC {acc:.4f}")
'''


def script(bug: bool) -> str:
    s = _SCRIPT
    s = s.replace('__OP__', '*' if bug else '/')
    return s
