"""unsharded-sampler, widened (overt/guards/shardsplit.py, issue 33 w340): the samplers of data-parallel ranks,
simulated in one process, whose slices of an epoch overlap because each rank shuffles with its own seed are
named, with the attribute they differ in; one shared seed (a hand-written sharded sampler, torch's
``DistributedSampler`` with its padding), samplers that draw with replacement and a single rank stay quiet.  On
digits, under ``overt.guard``: four ranks' batches averaged into one step, as DDP's all-reduce does."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch.utils.data import DistributedSampler

from tests.guards.helpers import digits, guarded, mlp, slugs

SLUG = "unsharded-sampler"
WORLD = 4


class ShardSampler:
    def __init__(self, n, rank, world, seed, replacement=False):
        self.n, self.rank, self.world, self.seed, self.replacement = n, rank, world, seed, replacement

    def __iter__(self):
        g = torch.Generator().manual_seed(self.seed)
        if self.replacement:
            return iter(torch.randint(0, self.n, (self.n // self.world,), generator=g).tolist())
        order = torch.randperm(self.n, generator=g)
        return iter(order[self.rank::self.world].tolist())


def _train(samplers, steps=6, batch=16):
    x, y = digits()
    torch.manual_seed(0)
    model = mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    g = guarded(model, opt, check_every=2)
    iters = [iter(s) for s in samplers]
    for _ in range(steps):
        idx = torch.tensor([[next(it) for _ in range(batch)] for it in iters]).flatten()
        opt.zero_grad()
        F.cross_entropy(model(x[idx]), y[idx]).backward()
        opt.step()
    return g.report()


def test_ranks_seeded_apart_are_named_with_the_seed():
    n = len(digits()[0])
    findings = _train([ShardSampler(n, r, WORLD, seed=1000 * r) for r in range(WORLD)])
    assert SLUG in slugs(findings)
    f = next(f for f in findings if f.slug == SLUG)
    assert "ranks 0, 1, 2, 3 (world 4) are no partition" in f.message and "seed (0, 1000, 2000, 3000)" in f.message
    assert "test_shard_split.py" in f.where


def test_distributed_samplers_seeded_per_rank_are_named():
    x, _ = digits()
    samplers = [DistributedSampler(range(len(x)), num_replicas=WORLD, rank=r, seed=r) for r in range(WORLD)]
    assert SLUG in slugs(_train(samplers))


def test_one_shared_seed_is_quiet():
    n = len(digits()[0])
    assert SLUG not in slugs(_train([ShardSampler(n, r, WORLD, seed=7) for r in range(WORLD)]))
    x, _ = digits()  # 1797 samples over 4 ranks: three padded repeats
    samplers = [DistributedSampler(range(len(x)), num_replicas=WORLD, rank=r, seed=7) for r in range(WORLD)]
    assert SLUG not in slugs(_train(samplers))


def test_sampling_with_replacement_and_a_single_rank_are_quiet():
    n = len(digits()[0])
    assert SLUG not in slugs(_train([ShardSampler(n, r, WORLD, seed=r, replacement=True) for r in range(WORLD)]))
    assert SLUG not in slugs(_train([ShardSampler(n, 1, WORLD, seed=1)]))
