"""A few-shot evaluation that draws each task's support set and query set by two separate draws
from the same small pool of examples: the two sets overlap, a query that is also a support example
is matched to itself at distance zero, and the reported few-shot accuracy is inflated -- with no
error.

Source: tristandeleu/pytorch-meta#31 (https://github.com/tristandeleu/pytorch-meta/pull/31), "Overlap
between train and test sets within task on multiple splits" (merged): "I noticed that the training
and testing partitions of an individual task can be overlapping with multiple class splits ... Since
the internal seed of the random state advances, samples from ``dataset_indices`` are redrawn at each
function call and can overlap within multiple function calls".  Here an MLP embedding is trained on
digits 0-4; 5-way 5-shot tasks over digits 5-9 give each class a pool of 20 examples (as in
Omniglot), 5 support and 15 query examples per class, and a query takes the class of its nearest
support embedding.  The buggy sampler draws support and query separately from the pool, the twin
draws one permutation and splits it.

Metric: the reported mean accuracy over 200 test tasks (plain ``python``, CPU, seed 0): bug 0.9,
twin 0.8 (the bug reads better: the twin is the accuracy on unseen queries).
"""

REPORT = "N148"
MECHANISM = "support-query-drawn-separately"
SLUGS = ()
METRIC = ("reported_5way_5shot_accuracy", 0.6644, 0.5587)

_SCRIPT = '''
import random

import torch
from torch import nn
import torch.nn.functional as F
from sklearn.datasets import load_digits

torch.manual_seed(0)
random.seed(0)
d = load_digits()
X = torch.tensor(d.data, dtype=torch.float32) / 16.0
Y = torch.tensor(d.target)
base = (Y < 5).nonzero().squeeze(1)

model = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 16))
head = nn.Linear(16, 5)
opt = torch.optim.Adam(list(model.parameters()) + list(head.parameters()), lr=1e-3)
#@guard
for epoch in range(3):
    order = base[torch.randperm(len(base))]
    for i in range(0, len(order), 32):
        b = order[i:i + 32]
        loss = F.cross_entropy(head(model(X[b])), Y[b])
        opt.zero_grad()
        loss.backward()
        opt.step()


def sample_task():
    support, query = [], []
    for c in range(5, 10):
        pool = random.sample((Y == c).nonzero().squeeze(1).tolist(), 20)  # the class's examples in this task
        __SPLIT__
        support += [(i, c) for i in s]
        query += [(i, c) for i in q]
    return support, query


model.eval()
accs = []
with torch.no_grad():
    for task in range(200):
        support, query = sample_task()
        s_emb = model(X[[i for i, _ in support]])
        q_emb = model(X[[i for i, _ in query]])
        s_lab = torch.tensor([c for _, c in support])
        q_lab = torch.tensor([c for _, c in query])
        nearest = torch.cdist(q_emb, s_emb).argmin(1)
        accs.append((s_lab[nearest] == q_lab).float().mean().item())
print(f"METRIC {sum(accs) / len(accs):.4f}")
'''


def script(bug: bool) -> str:
    split = ("s, q = random.sample(pool, 5), random.sample(pool, 15)" if bug
             else "s, q = pool[:5], pool[5:]  # the pool is already a random permutation")
    return _SCRIPT.replace("__SPLIT__", split)
