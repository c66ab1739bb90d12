"""ddp-out-of-sync: two CPU processes (gloo); replicas that drift apart are reported, DDP is quiet."""

from __future__ import annotations

import pytest
import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

pytestmark = pytest.mark.skipif(not dist.is_available() or not dist.is_gloo_available(),
                                reason="torch.distributed with gloo is not available")


def _train_rank(rank: int, world: int, out_dir, wrap: bool) -> list[dict]:
    import io

    import overt

    from .helpers import batches

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10))
    if wrap:
        model = nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    g = overt.guard(model, opt, check_every=4, stream=io.StringIO())
    for xb, yb in batches(16, 8, start=rank * 8):  # each rank sees its own shard
        opt.zero_grad()
        F.cross_entropy(model(xb), yb).backward()
        opt.step()
    return [f.to_dict() for f in g.report(quiet=True)]


def _run(wrap: bool, tmp_path) -> list[list[dict]]:
    from tests.distributed.procs import run_ranks

    return run_ranks(_train_rank, tmp_path, wrap)


def test_replicas_without_ddp_drift_apart(tmp_path):
    for findings in _run(wrap=False, tmp_path=tmp_path):
        assert [f["slug"] for f in findings] == ["ddp-out-of-sync"]
        assert "differ" in findings[0]["message"] and "Sequential.0.weight" in findings[0]["message"]


def test_ddp_replicas_stay_in_sync(tmp_path):
    for findings in _run(wrap=True, tmp_path=tmp_path):
        assert findings == []
