"""Distributed evaluation that gathers the ranks' predictions one rank after the other and scores
them against the labels in dataset order: ``DistributedSampler`` deals the samples out in turn
(rank 0 gets 0, 2, 4, ..., rank 1 gets 1, 3, 5, ...), so the gathered predictions belong to other
samples than the labels they are compared with.

Source: open-mmlab/mmpretrain#173 (https://github.com/open-mmlab/mmpretrain/issues/173), "Incorrect
order of samples in distributed test": "After `results=np.vstack(results)`, its order won't still
match gt_label's order"; the reporter traced it to the result-collection code of
``mmcls/apis/test.py``.  Simulated on CPU without a process group: the two ranks' shards come from
``DistributedSampler(val_ds, num_replicas=2, rank=r, shuffle=False)`` and are evaluated one after
the other, as ``all_gather`` would return them, and cut to the data set's length (the sampler pads
397 samples to 398); the twin puts each prediction back at its sample's index before scoring.

Metric: the reported validation accuracy (plain ``python``, CPU, seed 0): bug 0.1058, twin 0.8816.
"""

from tests.wild.cases.common import FIT, PRELUDE

REPORT = "N36"
MECHANISM = "eval-order-mismatch"
SLUGS = ()
METRIC = ("val_accuracy", 0.1058, 0.8816)

_SCRIPT = PRELUDE + FIT + '''
from torch.utils.data.distributed import DistributedSampler

model = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10))
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
#@guard
fit(model, opt, DataLoader(train_ds, batch_size=64, shuffle=True), 4)

WORLD = 2
model.eval()
gathered, gathered_index = [], []
with torch.no_grad():
    for rank in range(WORLD):                                     # what each rank computes
        sampler = DistributedSampler(val_ds, num_replicas=WORLD, rank=rank, shuffle=False)
        loader = DataLoader(val_ds, batch_size=50, sampler=sampler)
        gathered.append(torch.cat([model(xb).argmax(1) for xb, _ in loader]))
        gathered_index.append(torch.tensor(list(sampler)))
preds = torch.cat(gathered)                                       # all_gather: rank 0's, then rank 1's
index = torch.cat(gathered_index)
labels = val_ds.tensors[1]
__ALIGN__
acc = (preds == labels).float().mean().item()
print(f"METRIC {acc:.4f}")
'''


def script(bug: bool) -> str:
    if bug:
        align = "preds = preds[: len(val_ds)]                                  # the sampler's padding cut off"
    else:
        align = ("ordered = torch.empty(len(val_ds), dtype=preds.dtype)\n"
                 "ordered[index] = preds                                        # each prediction at its sample\n"
                 "preds = ordered")
    return _SCRIPT.replace("__ALIGN__", align)
