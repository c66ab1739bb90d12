"""A physics-informed fit whose derivative term is computed with ``torch.autograd.grad`` but without
``create_graph=True``: the derivative comes back as a constant with no graph, so the residual of the
differential equation contributes a number to the loss and nothing to the gradient, and the network
learns only its boundary value -- with no error, and a loss that still prints.

Source: pytorch/pytorch#31984 (https://github.com/pytorch/pytorch/issues/31984), "Question about how
to predict the derivation of the output?": "I check the grad_fn of variable ``loss_z``, find
``loss_y.grad_fn = <MseLossBackward ...>``, but ``loss_z.grad_fn = None``. So although ``loss_z``
decreases" the derivative loss does not train the model.  Here an MLP ``u(x)`` is fitted to the
equation ``u'(x) = cos(3x)`` on ``[0, 2]`` with ``u(0) = 0`` (the solution is ``sin(3x) / 3``), as a
physics-informed network is: one boundary term and the residual of the equation at 200 collocation
points; the buggy script takes the derivative with ``create_graph=False``, the twin with
``create_graph=True``.

Metric: mean squared error against the exact solution on 500 test points (plain ``python``, CPU,
seed 0): bug 0.0542, twin 0.0003 (lower is better).
"""

REPORT = "N126"
MECHANISM = "derivative-term-without-graph"
SLUGS = ()
METRIC = ("test_mse", 0.0542, 0.0003)

_SCRIPT = '''
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(1, 32), nn.Tanh(), nn.Linear(32, 32), nn.Tanh(), nn.Linear(32, 1))
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
#@guard
x0 = torch.zeros(1, 1)
for step in range(600):
    x = (torch.rand(200, 1) * 2.0).requires_grad_(True)  # collocation points
    u = model(x)
    du = torch.autograd.grad(u.sum(), x, retain_graph=True, create_graph=__CREATE_GRAPH__)[0]
    residual = du - torch.cos(3 * x)
    loss = model(x0).pow(2).mean() + residual.pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()

xs = torch.linspace(0, 2, 500).unsqueeze(1)
with torch.no_grad():
    mse = (model(xs) - torch.sin(3 * xs) / 3).pow(2).mean().item()
print(f"METRIC {mse:.4f}")
'''


def script(bug: bool) -> str:
    return _SCRIPT.replace("__CREATE_GRAPH__", "False" if bug else "True")
