"""The model is wrapped in DDP on one code path and left bare on another: ranks drift apart.

Source: TrainCheck's ``x-jxmnop-ddp-out-of-sync`` (https://x.com/jxmnop/status/1778520637193240892,
reproduced in https://github.com/OrderLab/TrainCheck-Evaluation-Workloads under
silent-issue-detection/bug-reprod-scripts/x-jxmnop-ddp-out-of-sync): with the Hugging Face
Trainer "sometimes the model is stored as an nn.Module, but sometimes it's wrapped in
DistributedDataParallel"; a run where it is not wrapped trains each rank on its own.

CPU simulation: two gloo processes; a ``get_model`` helper that returns the bare module when
a flag (here the buggy default) says the model was "already prepared".
"""

from tests.wild.cases.common import DDP_PRELUDE

WORLD = 2
SLUGS = ("ddp-out-of-sync",)

_SCRIPT = DDP_PRELUDE + '''

def get_model(module, prepared={prepared}):
    return module if prepared else DDP(module)


model = get_model(nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10)))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
loss_fn = nn.CrossEntropyLoss()
for epoch in range(2):
    sampler.set_epoch(epoch)
    for xb, yb in loader:
        opt.zero_grad()
        loss_fn(model(xb), yb).backward()
        opt.step()
'''


def script(bug: bool) -> str:
    return _SCRIPT.format(prepared=bug)
