"""A flow-matching sampler that walks the time axis the other way round from training: the velocity field
is learned with ``x_t = (1 - t) * noise + t * data`` (t = 0 is noise, t = 1 is data), but the Euler sampler
starts from noise and queries the model with t running from 1 down to 0, so every step asks for the
velocity of the wrong point of the path -- the samples miss the data, with no error.

Source: lucidrains/rectified-flow-pytorch#14 (https://github.com/lucidrains/rectified-flow-pytorch/issues/14),
"Bug in nano_flow.py": the reporter first pointed at the step size ("`delta` ... should be `1 / (steps -
1)`"); the maintainer then: "i found the actual bug.. turns out i inverted the direction from noise to data
... thanks for raising this issue to make me reexamine the logic".  Here a small MLP learns the velocity of
a 2-D mixture of four Gaussians (the report's NanoFlow wraps an image model) and 40 Euler steps draw 1000
samples.  The buggy sampler's times are ``torch.linspace(1, 0, steps + 1)``, the twin's ``torch.linspace(0,
1, steps + 1)``; both start from the same noise and take the same steps.

Metric: fraction of samples within 0.5 of a mode of the data (plain ``python``, CPU, seed 0): bug 0.564,
twin 0.888
"""

REPORT = "N189"
MECHANISM = "sampler-time-axis-reversed"
SLUGS = ()
METRIC = ("samples_near_a_mode", 0.564, 0.888)

_SCRIPT = '''
import torch
from torch import nn

torch.manual_seed(0)
modes = torch.tensor([[2.0, 2.0], [-2.0, 2.0], [2.0, -2.0], [-2.0, -2.0]])


def data(n):
    return modes[torch.randint(0, 4, (n,))] + 0.2 * torch.randn(n, 2)


model = nn.Sequential(nn.Linear(3, 128), nn.SiLU(), nn.Linear(128, 128), nn.SiLU(), nn.Linear(128, 2))
opt = torch.optim.Adam(model.parameters(), lr=2e-3)
#@guard
for step in range(1500):
    x1 = data(256)
    x0 = torch.randn_like(x1)
    t = torch.rand(256, 1)
    xt = (1 - t) * x0 + t * x1
    loss = ((model(torch.cat([xt, t], 1)) - (x1 - x0)) ** 2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()

steps = 40
__TIMES__
x = torch.randn(1000, 2)
with torch.no_grad():
    for i in range(steps):
        t = torch.full((len(x), 1), float(times[i]))
        x = x + model(torch.cat([x, t], 1)) / steps
near = (torch.cdist(x, modes).min(dim=1).values < 0.5).float().mean()
print(f"METRIC {near.item():.4f}")
'''


def script(bug: bool) -> str:
    times = "times = torch.linspace(1, 0, steps + 1)" if bug else "times = torch.linspace(0, 1, steps + 1)"
    return _SCRIPT.replace("__TIMES__", times)
