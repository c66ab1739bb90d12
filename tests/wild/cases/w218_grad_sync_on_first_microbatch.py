"""Gradient accumulation under data parallelism whose ``no_sync()`` window is off by one micro-batch: the
gradients are all-reduced after the *first* micro-batch of each accumulation window and kept rank-local for
the others, so the step applies mostly the rank's own gradients and the replicas drift apart -- with no
error.

Source: modelscope/FunASR#3472 (https://github.com/modelscope/FunASR/pull/3472), "fix(train): align DDP
no_sync with gradient accumulation" (merged); the maintainer's review: "Verified against current main and with
a two-rank CPU/Gloo DDP reproduction. The old batch_idx % accum_grad condition synchronizes the first
microbatch and suppresses synchronization on the optimizer-step microbatch, leaving rank-local accumulated
gradients (4.0 vs 7.0 in the reproduction). The proposed (batch_idx + 1) % accum_grad condition keeps early
microbatches inside no_sync() and synchronizes the final microbatch".  Here two ranks are simulated in one
process (two replicas of one MLP, and an all-reduce that averages their accumulated ``.grad`` the way DDP's
reducer does on a synchronised backward), each rank reading its own shard of scikit-learn's digits (rank 0
the digits 0-4, rank 1 the digits 5-9, as shards written by source are); four micro-batches per step.  The
buggy window syncs when ``batch_idx % accum == 0``, the twin when ``(batch_idx + 1) % accum == 0``; rank 0's
model is the one evaluated (and saved).

Metric: test accuracy of rank 0's model on every digit (plain ``python``, CPU, seed 0): bug 0.4383, twin
0.7607
"""

REPORT = "N192"
MECHANISM = "grad-sync-window-off-by-one-microbatch"
SLUGS = ()
METRIC = ("rank0_test_accuracy", 0.4383, 0.7607)

_SCRIPT = '''
import copy
import torch
from torch import nn
import torch.nn.functional as F
from sklearn.datasets import load_digits

torch.manual_seed(0)
d = load_digits()
X = torch.tensor(d.data, dtype=torch.float32) / 16.0
Y = torch.tensor(d.target)
Xtr, Ytr, Xte, Yte = X[:1400], Y[:1400], X[1400:], Y[1400:]
shards = [(Xtr[Ytr < 5], Ytr[Ytr < 5]), (Xtr[Ytr >= 5], Ytr[Ytr >= 5])]

model = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10))
replicas = [model, copy.deepcopy(model)]
opts = [torch.optim.SGD(r.parameters(), lr=0.1) for r in replicas]
opt = opts[0]


def all_reduce_grads():
    """What DDP's reducer does on a synchronised backward: every rank's .grad becomes the mean."""
    for ps in zip(*(r.parameters() for r in replicas)):
        mean = torch.stack([p.grad for p in ps]).mean(0)
        for p in ps:
            p.grad.copy_(mean)


accum = 4
#@guard
for epoch in range(15):
    perms = [torch.randperm(len(s[1])) for s in shards]
    n = min(len(p) for p in perms) // 32
    for batch_idx in range(n):
        for rank, (r, (xs, ys), perm) in enumerate(zip(replicas, shards, perms)):
            b = perm[batch_idx * 32:(batch_idx + 1) * 32]
            (F.cross_entropy(r(xs[b]), ys[b]) / accum).backward()
        if __SYNC__:
            all_reduce_grads()
        if (batch_idx + 1) % accum == 0:
            for o in opts:
                o.step()
                o.zero_grad()

with torch.no_grad():
    acc = (replicas[0](Xte).argmax(1) == Yte).float().mean()
print(f"METRIC {acc.item():.4f}")
'''


def script(bug: bool) -> str:
    sync = "batch_idx % accum == 0" if bug else "(batch_idx + 1) % accum == 0"
    return _SCRIPT.replace("__SYNC__", sync)
