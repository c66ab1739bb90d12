"""A loss normalised by the global token count on each rank and then averaged again by data
parallelism: each rank's gradient is already its share of the global mean, and averaging the ranks
divides it by the world size once more, so the run trains at ``lr / world_size``.

Source: verl-project/verl-SpeCo#29 (https://github.com/verl-project/verl-SpeCo/pull/29, merged),
"fix(trainer): stop scaling drafter gradients down by world size": "each rank's backward only
carries its own local contribution divided by the global token count. FSDP's gradient reduction
then averages across ranks on top of that, so the synchronized gradient ends up divided by the
participating world size: a W-rank run silently trains with an effective learning rate of
`lr / W`".  Simulated in one process: each global batch of 256 digits is split over 8 ranks, each
rank's loss is its summed cross-entropy over the global sample count, and the ranks' gradients are
averaged as ``DistributedDataParallel`` averages them (each rank's backward scaled by 1/8 into the
shared gradients).  The twin multiplies each rank's loss by the world size, as the fix does.

Metric: validation accuracy (plain ``python``, CPU, seed 0): bug 0.3149, twin 0.7179.
"""

from tests.wild.cases.common import PRELUDE, VAL_ACCURACY

REPORT = "N49"
MECHANISM = "gradient-scaled-by-world-size"
SLUGS = ()
METRIC = ("val_accuracy", 0.3149, 0.7179)

_SCRIPT = PRELUDE + '''
WORLD = 8
model = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10))
opt = torch.optim.SGD(model.parameters(), lr=0.5)
#@guard
loader = DataLoader(train_ds, batch_size=256, shuffle=True)


def ddp_backward(rank_losses):
    """What DistributedDataParallel does with one loss per rank: the gradients are averaged."""
    for loss in rank_losses:
        (loss / WORLD).backward()


for epoch in range(4):
    for xb, yb in loader:
        global_count = len(yb)
        rank_losses = []
        for x_rank, y_rank in zip(xb.chunk(WORLD), yb.chunk(WORLD)):   # each rank's shard
            local_sum = F.cross_entropy(model(x_rank), y_rank, reduction="sum")
            rank_losses.append(__RANK_LOSS__)
        opt.zero_grad()
        ddp_backward(rank_losses)
        opt.step()
''' + VAL_ACCURACY


def script(bug: bool) -> str:
    loss = "local_sum / global_count" if bug else "local_sum * WORLD / global_count"
    return _SCRIPT.replace("__RANK_LOSS__", loss)
