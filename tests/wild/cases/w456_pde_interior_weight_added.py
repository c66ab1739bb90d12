"""A physics-informed loss whose interior weight is added to the interior (PDE-residual) loss instead of
multiplying it: ``w + L_interior`` is ``L_interior`` plus a constant, so the weight meant to balance the residual
against the boundary term does nothing, the residual term (whose values are orders of magnitude larger) swamps the
boundary term, and the solution drifts from its boundary conditions -- no error, the loss still falls.

Source: neuraloperator/neuraloperator#619 (https://github.com/neuraloperator/neuraloperator/pull/619), "Fix the
small bug for PINO loss": "The original PINO code has a bug where the Poisson equation loss adds interior weights
with interior loss instead of multiplication. It is fixed to be multiplicatio now." (merged). Here a physics-informed
MLP solves the 1-D Poisson problem -u'' = f on (0, 1) with u(0) = u(1) = 0 and u = sin(3 pi x); the loss is
``WEIGHTS["interior"] * interior_loss + WEIGHTS["boundary"] * boundary_loss`` (the twin) or, as in the report,
``WEIGHTS["interior"] + interior_loss + ...`` (the bug). The reproduction departs from the report in the model (a
PINN on collocation points, not a neural operator on a Poisson data set) and in the weights (1e-3 and 1).

Metric: relative L2 error against the exact solution (lower is better; plain ``python``, CPU, seed 0): bug 0.0271,
twin 0.0026
"""

REPORT = "N430"
MECHANISM = "pde-loss-weight-added-not-multiplied"
SLUGS = ()
METRIC = ("test_rel_l2_error", 0.0271, 0.0026)

_SCRIPT = '''
import math
import torch
from torch import nn

torch.manual_seed(0)
K = 3
WEIGHTS = {"interior": 1e-3, "boundary": 1.0}


def exact(x):
    return torch.sin(K * math.pi * x)


def source(x):
    return (K * math.pi) ** 2 * torch.sin(K * math.pi * x)   # -u'' = f on (0, 1), u(0) = u(1) = 0


model = nn.Sequential(nn.Linear(1, 64), nn.Tanh(), nn.Linear(64, 64), nn.Tanh(), nn.Linear(64, 1))
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
#@guard
x_bc = torch.tensor([[0.0], [1.0]])
for step in range(2000):
    x = torch.rand(128, 1, requires_grad=True)
    u = model(x)
    du = torch.autograd.grad(u.sum(), x, create_graph=True)[0]
    d2u = torch.autograd.grad(du.sum(), x, create_graph=True)[0]
    interior_loss = (-d2u - source(x)).pow(2).mean()
    boundary_loss = model(x_bc).pow(2).mean()
    loss = __INTERIOR__ + WEIGHTS["boundary"] * boundary_loss
    opt.zero_grad()
    loss.backward()
    opt.step()
x_test = torch.linspace(0, 1, 501)[:, None]
with torch.no_grad():
    err = ((model(x_test) - exact(x_test)).norm() / exact(x_test).norm()).item()
print(f"METRIC {err:.4f}")
'''


def script(bug: bool) -> str:
    return _SCRIPT.replace("__INTERIOR__", 'WEIGHTS["interior"] + interior_loss' if bug
                           else 'WEIGHTS["interior"] * interior_loss')
