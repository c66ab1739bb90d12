"""unsharded-sampler and unset-epoch: two gloo processes, planted bugs and their clean twins."""

from __future__ import annotations

import io

import pytest
import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

from tests.distributed.procs import run_ranks

pytestmark = pytest.mark.skipif(not dist.is_available() or not dist.is_gloo_available(),
                                reason="torch.distributed with gloo is not available")


def _loop(loader, sampler, set_epoch: bool) -> list[dict]:
    import overt

    torch.manual_seed(0)
    model = nn.parallel.DistributedDataParallel(nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 3)))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    guard = overt.guard(model, opt, stream=io.StringIO())
    for epoch in range(2):
        if set_epoch and sampler is not None:
            sampler.set_epoch(epoch)
        for x, y in loader:
            opt.zero_grad()
            F.cross_entropy(model(x), y).backward()
            opt.step()
    return [f.to_dict() for f in guard.report(quiet=True)]


def _scenarios(rank, world, out_dir):
    g = torch.Generator().manual_seed(1)
    data = TensorDataset(torch.randn(64, 8, generator=g), torch.randint(0, 3, (64,), generator=g))
    sharded = DistributedSampler(data, shuffle=True, seed=0)
    unset = DistributedSampler(data, shuffle=True, seed=0)
    return {
        "unsharded": _loop(DataLoader(data, batch_size=8, shuffle=True), None, False),
        "sharded": _loop(DataLoader(data, batch_size=8, sampler=sharded), sharded, True),
        "unset": _loop(DataLoader(data, batch_size=8, sampler=unset), unset, False),
    }


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    return run_ranks(_scenarios, tmp_path_factory.mktemp("sampler-guards"))


def _slugs(findings):
    return sorted({f["slug"] for f in findings})


def test_unsharded_training_loader_is_reported_on_every_rank_with_its_rank(results):
    for rank, res in enumerate(results):
        found = [f for f in res["unsharded"] if f["slug"] == "unsharded-sampler"]
        assert len(found) == 1, res["unsharded"]
        assert f"on rank {rank}" in found[0]["where"] and "RandomSampler" in found[0]["message"]


def test_distributed_sampler_without_set_epoch_is_reported(results):
    for res in results:
        assert _slugs(res["unset"]) == ["unset-epoch"]


def test_sharded_loader_with_set_epoch_is_quiet(results):
    for res in results:
        assert res["sharded"] == []
