"""Distributed evaluation with a ``DistributedSampler``: the sampler pads the evaluation set with
repeated samples so that every rank gets the same number, and the correct predictions summed over
all ranks count those repeats, divided by the size of the data set.

Source: pytorch/pytorch#25162 (https://github.com/pytorch/pytorch/issues/25162), "Incorrect
Validation Accuracy Due to Distributed Sampler": "The new `DistributedSampler` pads the number of
samples to make it divisible by the number of processes ... `DistributedSampler` duplicates the last
few samples instead of dropping them. This will definitely cause incorrect validation accuracy when
you want to use distributed validation."  Here the ranks are simulated in one process: an MLP is
trained on digits, and an evaluation set of 100 digits is dealt to 64 ranks by
``DistributedSampler(shuffle=False)`` (2 samples per rank, 28 of them repeats); each rank counts its
correct predictions, the counts are summed (as an all-reduce would) and divided by the size of the
evaluation set.  The buggy script counts every prediction the sampler handed out, the twin each
dataset index once.

Metric: the reported validation accuracy (plain ``python``, CPU, seed 0): bug 0.89, twin 0.7
(the twin's number is the real accuracy of the model on the 100 samples).
"""

from tests.wild.cases.common import FIT, PRELUDE

REPORT = "N77"
MECHANISM = "distributed-eval-padding-counted"
SLUGS = ()
METRIC = ("reported_val_accuracy", 0.89, 0.7)

_SCRIPT = PRELUDE + FIT + '''
from torch.utils.data.distributed import DistributedSampler

WORLD = 64
model = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
#@guard
fit(model, opt, DataLoader(train_ds, batch_size=64, shuffle=True), 3)

eval_ds = TensorDataset(X[1400:1500], Y[1400:1500])
model.eval()
hits, seen = [], []                                           # per rank: what the sampler handed out
with torch.no_grad():
    for rank in range(WORLD):
        sampler = DistributedSampler(eval_ds, num_replicas=WORLD, rank=rank, shuffle=False)
        for idx in sampler:
            xb, yb = eval_ds[idx]
            hits.append(int(model(xb[None]).argmax(1).item() == yb.item()))
            seen.append(idx)
__COUNT__
print(f"METRIC {acc:.4f}")
'''

_BUG = '''acc = sum(hits) / len(eval_ds)                                 # all-reduced correct count'''
_FIX = '''first = {}
for idx, hit in zip(seen, hits):
    first.setdefault(idx, hit)                                # the sampler's repeats counted once
acc = sum(first.values()) / len(eval_ds)'''


def script(bug: bool) -> str:
    return _SCRIPT.replace("__COUNT__", _BUG if bug else _FIX)
