"""Federated averaging that adds every sampled client's weights times ``client_subset / num_clients``: the
coefficients sum to ``client_subset ** 2 / num_clients``, which is one only when 10 of 100 clients take part; with 20
of 100 the "average" is four times the clients' mean, the global model is rescaled at every round and its accuracy
falls -- nothing fails until the weights overflow.

Source: ssg-research/WAFFLE#6 (https://github.com/ssg-research/WAFFLE/issues/6), "Workers stop training if number of
clients partificpating in every round is changed from the default value": ``updated_w[i] += (client_subset *
param.get())/num_clients``; "In the default case client_subset = 10 & num_clients = 100 ... every client weight being
weighed by 0.1 ... In modified case: Every client weight is being weighed by 0.2 and seems weight aggregation is going
wrong"; maintainer: "Thanks for catching the bug. You are right, the logic should be like above to make federated
averaging correct for different client subsets ... solves NaN issue." Here 100 clients hold 14 digits each, 20 are
sampled per round for 30 rounds, each runs 5 full-batch SGD steps on a copy of the global MLP, and the server
steps its SGD (learning rate 1) along the difference between the global and the combined weights, which sets the
global weights to the combination; the bug adds ``client_subset * p / num_clients``, the twin (the
maintainer's fix) ``p / client_subset``. The reproduction replaces PySyft's remote workers and the watermarking task by
local copies and digits.

Metric: test accuracy of the global model on 397 held-out digits (plain ``python``, CPU, seed 0): bug 0.8111, twin
0.8917
"""

REPORT = "N349"
MECHANISM = "fedavg-coefficients-do-not-sum-to-one"
SLUGS = ()
METRIC = ('test_accuracy', 0.8111, 0.8917)

_SCRIPT = '''import copy
import torch
from torch import nn
import torch.nn.functional as F
from sklearn.datasets import load_digits

torch.manual_seed(0)
X, y = load_digits(return_X_y=True)
X = torch.tensor(X, dtype=torch.float32) / 16.0
y = torch.tensor(y)
perm = torch.randperm(len(y))
tr, te = perm[:1400], perm[1400:]
num_clients, client_subset = 100, 20
shards = tr.chunk(num_clients)
model = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10))
opt = torch.optim.SGD(model.parameters(), lr=1.0)
#@guard
for rnd in range(30):
    chosen = torch.randperm(num_clients)[:client_subset]
    updated = [torch.zeros_like(p) for p in model.parameters()]
    for c in chosen.tolist():
        local = copy.deepcopy(model)
        lopt = torch.optim.SGD(local.parameters(), lr=0.1)
        idx = shards[c]
        for _ in range(5):
            loss = F.cross_entropy(local(X[idx]), y[idx])
            lopt.zero_grad()
            loss.backward()
            lopt.step()
        with torch.no_grad():
            for u, p in zip(updated, local.parameters()):
__AGG__    for p, u in zip(model.parameters(), updated):
        p.grad = p.detach() - u
    opt.step()
with torch.no_grad():
    acc = (model(X[te]).argmax(1) == y[te]).float().mean().item()
print(f"METRIC {acc:.4f}")
'''


def script(bug: bool) -> str:
    s = _SCRIPT
    s = s.replace('__AGG__', '                u += client_subset * p / num_clients\n' if bug
                  else '                u += p / client_subset\n')
    return s
