"""DDP model moved off and back onto its device after wrapping: gradients stop being synchronised.

Source: pytorch/pytorch#104336 (https://github.com/pytorch/pytorch/issues/104336), TrainCheck's
``pytorch-104336``: ``ddp_model.cpu(); ddp_model.cuda(rank)`` after ``DistributedDataParallel(...)``
replaces every parameter's data; DDP's gradient hooks stay on the old gradient accumulators, so
no all-reduce happens and each rank trains its own model.

CPU simulation (no GPU here): two gloo processes, and the round trip is ``double()`` then
``float()``, which replaces each parameter's data with a tensor of another type and back -- the
same mechanism (``param.data`` set to a tensor of another type resets its gradient accumulator,
dropping DDP's hooks).  The ranks see different shards of the data, so their weights drift.
"""

from tests.wild.cases.common import DDP_PRELUDE

WORLD = 2
SLUGS = ("ddp-out-of-sync",)

_SCRIPT = DDP_PRELUDE + '''model = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10))
ddp = DDP(model)
{move}
opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
loss_fn = nn.CrossEntropyLoss()
for epoch in range(2):
    sampler.set_epoch(epoch)
    for xb, yb in loader:
        opt.zero_grad()
        loss_fn(ddp(xb), yb).backward()
        opt.step()
'''


def script(bug: bool) -> str:
    move = "ddp.double(); ddp.float()  # offload and reload, as the report's cpu()/cuda() round trip" if bug else ""
    return _SCRIPT.format(move=move)
