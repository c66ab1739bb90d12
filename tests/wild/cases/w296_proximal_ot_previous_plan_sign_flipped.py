"""A proximal-point optimal-transport solver whose kernel uses ``C + beta * log(T)`` where its own subproblem has
``C - beta * log(T)``: each outer step divides by the previous plan instead of weighting by it, so after an even
number of steps the Sinkhorn scalings cancel the cost and the "exact" transport plan is close to uniform. A model
trained to match a target point cloud through that plan pulls every point towards the target's mean -- with no
error.

Source: PythonOT/POT#842 (https://github.com/PythonOT/POT/issues/842), "Incorrect sign of the previous transport
plan in proximal_bregman_log_plan_batch": "The current implementation uses ``K_proj = -(C + inner_reg * log_T) /
(reg + inner_reg)`` ... which reverses the contribution of the previous transport plan" (labels: bug; fixed by
#844, merged). Here a linear map of 64 Gaussian points is trained with Adam to match a fixed anisotropic target
cloud, the loss being the transport cost under the plan of a hand-written log-domain proximal-point solver (six
outer steps, ``reg = 0``, ``inner_reg = 0.1 * mean(C)``); the buggy kernel adds ``inner_reg * log_T``, the twin
subtracts it. POT's batched solver is replaced by this small torch solver.

Metric: exact OT cost (mean squared distance under the optimal assignment, ``scipy``) between the mapped points and
the target, lower is better (plain ``python``, CPU, seed 0): bug 2.9578, twin 0.1365
"""

REPORT = "N270"
MECHANISM = "proximal-plan-weighted-by-its-inverse"
SLUGS = ()
METRIC = ("exact_ot_cost", 2.9578, 0.1365)

_SCRIPT = '''import torch
from torch import nn
from scipy.optimize import linear_sum_assignment

torch.manual_seed(0)
n = 64
z = torch.randn(n, 2)
y = torch.randn(n, 2) * torch.tensor([2.0, 0.5]) + torch.tensor([3.0, -1.0])


def sinkhorn_log(log_k, iters=30):
    f = torch.zeros(log_k.shape[0])
    g = torch.zeros(log_k.shape[1])
    log_a = torch.full((log_k.shape[0],), -torch.log(torch.tensor(float(log_k.shape[0]))))
    log_b = torch.full((log_k.shape[1],), -torch.log(torch.tensor(float(log_k.shape[1]))))
    for _ in range(iters):
        f = log_a - torch.logsumexp(log_k + g[None, :], 1)
        g = log_b - torch.logsumexp(log_k + f[:, None], 0)
    return log_k + f[:, None] + g[None, :]


def proximal_plan(C, inner_reg, outer=6):
    log_t = torch.full(C.shape, -torch.log(torch.tensor(float(C.numel()))))
    for _ in range(outer):
        log_k = -(C __SIGN__ inner_reg * log_t) / inner_reg
        log_t = sinkhorn_log(log_k)
    return log_t.exp()


model = nn.Linear(2, 2)
opt = torch.optim.Adam(model.parameters(), lr=0.05)
#@guard
for step in range(120):
    x = model(z)
    C = torch.cdist(x, y) ** 2
    with torch.no_grad():
        plan = proximal_plan(C, inner_reg=0.1 * C.mean())
    loss = (plan * C).sum()
    opt.zero_grad()
    loss.backward()
    opt.step()
with torch.no_grad():
    C = (torch.cdist(model(z), y) ** 2).numpy()
r, c = linear_sum_assignment(C)
print(f"METRIC {C[r, c].mean():.4f}")
'''


def script(bug: bool) -> str:
    return _SCRIPT.replace('__SIGN__', '+' if bug else '-')
