"""Federated averaging by a plain mean of the client models: a client with 20 examples weighs as
much as one with a thousand, so a crowd of small clients that each saw a single class pulls the
global model away from the data -- with no error.

Source: AshwinRJ/Federated-Learning-PyTorch#27 (https://github.com/AshwinRJ/Federated-Learning-PyTorch/issues/27),
"about the average_weights function": "In the original paper, it uses a weighted average here.
However, the implementation in average_weights is the simple average. Is there a bug or do I
misunderstand something?"; another user: "never found any weight for each client when do fedavg"
(the same in shaoxiongji/federated-learning#20, "Why does the FedAvg use a simple average without
weight?").  Here one client holds 1000 digits of every class and nine clients hold 20 digits each
of a single class; each of 10 rounds trains every client for 2 local epochs from the global model
and averages the ten models.  The buggy server averages them equally (``average_weights``); the
twin weighs each client by its number of examples, as FedAvg does.

Metric: accuracy of the global model on held-out digits (plain ``python``, CPU, seed 0): bug 0.7859,
twin 0.8942.
"""

from tests.wild.cases.common import PRELUDE

REPORT = "N118"
MECHANISM = "federated-average-unweighted"
SLUGS = ()
METRIC = ("global_test_accuracy", 0.7859, 0.8942)

_SCRIPT = PRELUDE + '''
import copy

xt, yt = X[:1400], Y[:1400]
clients = [(xt[:1000], yt[:1000])]
for digit in range(9):
    idx = (yt[1000:] == digit).nonzero().squeeze(1)[:20] + 1000
    clients.append((xt[idx], yt[idx]))
sizes = torch.tensor([float(len(cy)) for _, cy in clients])

model = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10))  # the global model: no optimizer of its own


def local_update(global_state, cx, cy):
    local = copy.deepcopy(model)
    local.load_state_dict(global_state)
    local_opt = torch.optim.SGD(local.parameters(), lr=0.05)
    for epoch in range(2):
        for xb, yb in DataLoader(TensorDataset(cx, cy), batch_size=10, shuffle=True):
            local_opt.zero_grad()
            F.cross_entropy(local(xb), yb).backward()
            local_opt.step()
    return local.state_dict()


weights = __WEIGHTS__
for round_ in range(10):
    states = [local_update(model.state_dict(), cx, cy) for cx, cy in clients]
    model.load_state_dict({k: sum(w * s[k] for w, s in zip(weights, states)) for k in states[0]})

model.eval()
with torch.no_grad():
    acc = (model(X[1400:]).argmax(1) == Y[1400:]).float().mean().item()
print(f"METRIC {acc:.4f}")
'''


def script(bug: bool) -> str:
    return _SCRIPT.replace("__WEIGHTS__", "torch.full((len(clients),), 1.0 / len(clients))  # a simple average"
                           if bug else "sizes / sizes.sum()  # weighted by each client's number of examples")
