"""An accuracy that the metric already summed over the ranks is all-reduced with ``SUM`` again (and
divided by the world size once): every rank reports the sum of the ranks' accuracies, world-size
times the real one.

Source: Lightning-AI/pytorch-lightning#3713 (https://github.com/Lightning-AI/pytorch-lightning/issues/3713),
"AccuracyMetric automatically do ReduceOp.SUM in test_epoch_end": "my test_step vid_acc is 0.6~0.7,
normal, but in test_epoch_end, avg_acc_1=22.3333, avg_acc_2=714.6666. Does `test_vacc` is already
synced by `dist.ReduceOp.SUM` by default?"; maintainer: "Yes, class metrics automatically sync between
devices, with the default operation being `dist.ReduceOp.SUM`."  Also Lightning-AI/pytorch-lightning#2795.
Simulated in one process: the validation set is split over four ranks as a ``DistributedSampler``
would deal it, each rank's accuracy metric syncs by summing the four ranks' values (as that metric
did), and the epoch-end code then all-reduces the synced value with ``SUM`` again and divides by the
world size; the twin divides the synced sum by the world size without a second all-reduce.

Metric: the reported validation accuracy (plain ``python``, CPU, seed 0): bug 3.47, twin 0.8675.
"""

from tests.wild.cases.common import FIT, PRELUDE

REPORT = "N65"
MECHANISM = "metric-reduced-twice"
SLUGS = ()
METRIC = ("reported_val_accuracy", 3.47, 0.8675)

_SCRIPT = PRELUDE + FIT + '''
from torch.utils.data.distributed import DistributedSampler

WORLD = 4
model = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10))
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
#@guard
fit(model, opt, DataLoader(train_ds, batch_size=64, shuffle=True), 3)


def all_reduce_sum(values):
    """dist.all_reduce(t, op=ReduceOp.SUM) over the simulated ranks: every rank gets the sum."""
    total = sum(values)
    return [total.clone() for _ in values]


model.eval()
rank_acc = []
with torch.no_grad():
    for rank in range(WORLD):
        sampler = DistributedSampler(val_ds, num_replicas=WORLD, rank=rank, shuffle=False)
        xb, yb = next(iter(DataLoader(val_ds, batch_size=len(val_ds), sampler=sampler)))
        rank_acc.append((model(xb).argmax(1) == yb).float().mean())
synced = all_reduce_sum(rank_acc)                                  # the metric's own sync (ReduceOp.SUM)
__EPOCH_END__avg_acc = [acc / WORLD for acc in synced]
print(f"METRIC {avg_acc[0].item():.4f}")
'''


def script(bug: bool) -> str:
    return _SCRIPT.replace("__EPOCH_END__", "synced = all_reduce_sum(synced)  # test_epoch_end\n"
                           if bug else "")
