"""A weight-clipped WGAN whose generator step backpropagates its critic score with the critic's own
sign (``g_cost.backward(one)`` where the fix has ``mone``): the generator minimises the critic's
score of its samples instead of maximising it and is pushed away from the data -- with no error.

Source: Zeleni9/pytorch-wgan#51 (https://github.com/Zeleni9/pytorch-wgan/issues/51), "WGAN with
clipping should backward the negative critic loss for generator training": "The cost should be used
for backward"; the maintainer's fix, #53: "Changed ``g_loss.backward(one)`` to
``g_loss.backward(mone)`` in the generator training step. The generator should maximize the critic's
output on fake images ... Using backward(one) was training the generator in the wrong direction".
Here the generator maps 4-d noise to 1-d samples of a target distributed as N(3, 0.3) and a
clipped critic trains five steps per generator step, as in the repository; the buggy generator step
is ``backward(one)``, the twin's ``backward(mone)``.

Metric: the 1-D Wasserstein distance between 2000 generated and 2000 real samples (plain ``python``,
CPU, seed 0): bug 6984.6152, twin 0.1844 (lower is better).
"""

REPORT = "N142"
MECHANISM = "generator-objective-sign-inverted"
SLUGS = ()
METRIC = ("wasserstein_distance", 6984.6152, 0.1844)

_SCRIPT = '''
import torch
from torch import nn

torch.manual_seed(0)


def real_batch(n):
    return 3.0 + 0.3 * torch.randn(n, 1)


G = nn.Sequential(nn.Linear(4, 32), nn.ReLU(), nn.Linear(32, 32), nn.ReLU(), nn.Linear(32, 1))
D = nn.Sequential(nn.Linear(1, 32), nn.ReLU(), nn.Linear(32, 32), nn.ReLU(), nn.Linear(32, 1))
model = G
opt = torch.optim.RMSprop(G.parameters(), lr=2e-3)
d_opt = torch.optim.RMSprop(D.parameters(), lr=2e-3)
#@guard
one = torch.tensor(1.0)
mone = one * -1
for it in range(600):
    for _ in range(5):  # critic steps
        for p in D.parameters():
            p.data.clamp_(-0.1, 0.1)
        D.zero_grad()
        d_real = D(real_batch(64)).mean()
        d_real.backward(mone)
        d_fake = D(G(torch.randn(64, 4)).detach()).mean()
        d_fake.backward(one)
        d_opt.step()
    G.zero_grad()
    g_cost = D(G(torch.randn(64, 4))).mean()
    g_cost.backward(__SIGN__)
    opt.step()

with torch.no_grad():
    fake = G(torch.randn(2000, 4)).squeeze(1).sort().values
real = real_batch(2000).squeeze(1).sort().values
print(f"METRIC {(fake - real).abs().mean().item():.4f}")
'''


def script(bug: bool) -> str:
    return _SCRIPT.replace("__SIGN__", "one" if bug else "mone")
