"""ddp-out-of-sync: two CPU processes (gloo); replicas that drift apart are reported, DDP is quiet."""

from __future__ import annotations

import json
import os
import socket
import sys

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn.functional as F
from torch import nn

pytestmark = pytest.mark.skipif(not dist.is_available() or not dist.is_gloo_available(),
                                reason="torch.distributed with gloo is not available")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _worker(rank: int, world: int, port: int, wrap: bool, out_dir: str) -> None:
    # exit with os._exit: gloo's threads can abort ("terminate called without an active
    # exception") during normal interpreter teardown, after the results are written
    code = 1
    try:
        _train_rank(rank, world, port, wrap, out_dir)
        code = 0
    except BaseException:
        import traceback

        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def _train_rank(rank: int, world: int, port: int, wrap: bool, out_dir: str) -> None:
    import io

    import overt

    from .helpers import batches

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    try:
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
        findings = g.report(quiet=True)
        with open(os.path.join(out_dir, f"rank{rank}.json"), "w") as fh:
            json.dump([f.to_dict() for f in findings], fh)
    finally:
        dist.destroy_process_group()


def _run(wrap: bool, tmp_path) -> list[list[dict]]:
    mp.spawn(_worker, args=(2, _free_port(), wrap, str(tmp_path)), nprocs=2, join=True)
    return [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(2)]


def test_replicas_without_ddp_drift_apart(tmp_path):
    for findings in _run(wrap=False, tmp_path=tmp_path):
        assert [f["slug"] for f in findings] == ["ddp-out-of-sync"]
        assert "differ" in findings[0]["message"] and "Sequential.0.weight" in findings[0]["message"]


def test_ddp_replicas_stay_in_sync(tmp_path):
    for findings in _run(wrap=True, tmp_path=tmp_path):
        assert findings == []
