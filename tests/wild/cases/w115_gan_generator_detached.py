"""A GAN whose generator step scores ``fake.detach()`` with the discriminator: the adversarial loss
has no path back to the generator, so the generator's optimizer steps on no adversarial gradient and
the generator keeps producing what its initial weights produce.

Source: nikhilsinghmus/image2reverb#37 (https://github.com/nikhilsinghmus/image2reverb/issues/37),
"Is fake_spec.detach() in Generator training step intentional?": ``d_fake2 = self.d(fake_spec.detach(),
f)`` / ``G_loss1 = F.mse_loss(d_fake2, torch.ones(...))`` -- "'.detach()' here would cut the gradient
path from 'd_fake2' back to 'fake_spec', meaning 'G_loss1' would not propagate gradients into the
Generator"; maintainer: "You're right, that `.detach()` should not be there for the generator step
and is a bug."  Here a least-squares GAN (the report's ``mse_loss`` against ones) learns a 2-D
mixture of four Gaussians; the report's generator also had an L1 term that kept training, this one
has only the adversarial term, so the cut path is the whole generator signal.  The buggy generator
step scores the detached samples, the twin the samples themselves.

Metric: mean distance of 1000 generated samples to the nearest mixture centre (plain ``python``, CPU,
seed 0; lower is better): bug 2.6336, twin 0.2958.
"""

REPORT = "N89"
MECHANISM = "generator-loss-detached"
SLUGS = ()
METRIC = ("sample_distance_to_modes", 2.6336, 0.2958)

_SCRIPT = '''
import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)
centres = torch.tensor([[2.0, 2.0], [-2.0, 2.0], [2.0, -2.0], [-2.0, -2.0]])


def data(n):
    return centres[torch.randint(4, (n,))] + 0.2 * torch.randn(n, 2)


model = nn.Sequential(nn.Linear(4, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 2))
disc = nn.Sequential(nn.Linear(2, 64), nn.LeakyReLU(0.2), nn.Linear(64, 1))
opt = torch.optim.Adam(model.parameters(), lr=1e-3, betas=(0.5, 0.999))          # the generator's
opt_d = torch.optim.Adam(disc.parameters(), lr=1e-3, betas=(0.5, 0.999))
#@guard
for step in range(2000):
    real = data(128)
    fake = model(torch.randn(128, 4))
    d_loss = F.mse_loss(disc(real), torch.ones(128, 1)) + F.mse_loss(disc(fake.detach()), torch.zeros(128, 1))
    opt_d.zero_grad()
    d_loss.backward()
    opt_d.step()

    d_fake2 = disc(__FAKE__)
    g_loss = F.mse_loss(d_fake2, torch.ones(128, 1))
    opt.zero_grad()
    g_loss.backward()
    opt.step()

model.eval()
with torch.no_grad():
    samples = model(torch.randn(1000, 4))
print(f"METRIC {torch.cdist(samples, centres).min(1).values.mean().item():.4f}")
'''


def script(bug: bool) -> str:
    return _SCRIPT.replace("__FAKE__", "fake.detach()" if bug else "fake")
