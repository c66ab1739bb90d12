"""Data-parallel ranks that each seed their sampler differently: every rank shuffles the dataset into its own
permutation and takes its slice of it, so the slices overlap -- some samples are drawn by two ranks in an epoch
and others by none -- with no error.

Source: NVlabs/LongLive#71 (https://github.com/NVlabs/LongLive/issues/71), "DDP training ranks use divergent
DistributedSampler seeds": "`trainer/diffusion.py` derives the sampler seed from the current time multiplied by
the global rank ... Rank zero therefore always uses seed zero while the other ranks use different permutations
... With different seeds, samples can overlap between ranks and other samples can be skipped"; maintainer: "We
fix this in #74" ("Share the data sampler seed across ranks", merged). Here four ranks are simulated in one
process with a sampler written like ``DistributedSampler`` (a seeded permutation, then ``order[rank::world]``),
and their batches' gradients are averaged as DDP's all-reduce does; the data are 2048 items, each with its own
embedding row and a random label, trained for one epoch, so an item the epoch never drew keeps its initial
embedding. The bug seeds rank r with ``T * r`` (T a fixed stand-in for the time), the twin with one shared seed.
The reproduction replaces the video diffusion model and its prompts by per-item embeddings.

Metric: accuracy over the training items after one epoch (plain ``python``, CPU, seed 0): bug 0.7310, twin 1.0000
"""

REPORT = "N314"
MECHANISM = "sampler-seed-differs-across-ranks"
SLUGS = ()
METRIC = ("epoch_item_accuracy", 0.7310, 1.0000)

_SCRIPT = '''import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)
N, WORLD, BATCH = 2048, 4, 16
T = 1732770000
ids = torch.arange(N)
labels = torch.randint(0, 8, (N,))


class ShardSampler:
    def __init__(self, n, rank, world, seed):
        self.n, self.rank, self.world, self.seed = n, rank, world, seed

    def __iter__(self):
        g = torch.Generator().manual_seed(self.seed)
        order = torch.randperm(self.n, generator=g)
        return iter(order[self.rank::self.world].tolist())


samplers = [ShardSampler(N, rank, WORLD, __SEED__) for rank in range(WORLD)]
model = nn.Embedding(N, 8)
nn.init.zeros_(model.weight)
opt = torch.optim.SGD(model.parameters(), lr=2.0)
#@guard
iters = [iter(s) for s in samplers]
for step in range(N // (WORLD * BATCH)):
    idx = torch.tensor([[next(it) for _ in range(BATCH)] for it in iters]).flatten()
    loss = F.cross_entropy(model(ids[idx]), labels[idx])
    opt.zero_grad()
    loss.backward()
    opt.step()
with torch.no_grad():
    acc = (model(ids).argmax(1) == labels).float().mean().item()
print(f"METRIC {acc:.4f}")
'''


def script(bug: bool) -> str:
    return _SCRIPT.replace('__SEED__', "T * rank" if bug else "T")
