"""Run a function on N local CPU processes joined in a gloo process group (torch's own spawn)."""

from __future__ import annotations

import json
import os
import socket
import sys
from pathlib import Path
from typing import Any, Callable

import torch
import torch.multiprocessing as mp
from torch import nn


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _entry(rank: int, fn: Callable[..., Any], world: int, port: int, out_dir: str, args: tuple) -> None:
    # os._exit: gloo's threads can abort during normal interpreter teardown, after the results are written
    code = 1
    try:
        import torch
        import torch.distributed as dist

        os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), LOCAL_RANK=str(rank),
                          WORLD_SIZE=str(world), LOCAL_WORLD_SIZE=str(world))
        torch.set_num_threads(1)
        dist.init_process_group("gloo", rank=rank, world_size=world)
        try:
            result = fn(rank, world, Path(out_dir), *args)
        finally:
            if dist.is_initialized():  # `overt run` in the rank destroys the group itself at exit
                dist.destroy_process_group()
        Path(out_dir, f"result-{rank}.json").write_text(json.dumps(result))
        code = 0
    except BaseException:
        import traceback

        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def run_ranks(fn: Callable[..., Any], out_dir: Path, *args: Any, world: int = 2) -> list[Any]:
    """``fn(rank, world, out_dir, *args)`` on ``world`` processes; returns each rank's (JSON) result."""
    import torch._dynamo  # noqa: F401  DDP imports it (seconds): once here, inherited by every forked child

    out_dir.mkdir(parents=True, exist_ok=True)
    # fork: the children inherit the imported torch instead of importing it again (seconds per process)
    mp.start_processes(_entry, args=(fn, world, free_port(), str(out_dir), args), nprocs=world, join=True,
                       start_method="fork")
    return [json.loads((out_dir / f"result-{r}.json").read_text()) for r in range(world)]


def build_trainer(run_dir, strategy, callbacks=()):
    """The small digits run the multi-process scenarios share (2 epochs of 200 samples)."""
    import overt
    from sklearn.datasets import load_digits
    from torch.utils.data import TensorDataset

    d = load_digits()
    x = torch.tensor(d.data[:200], dtype=torch.float32) / 16.0
    y = torch.tensor(d.target[:200])
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Dropout(0.1), nn.Linear(32, 10))
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    return overt.Trainer(model, opt, nn.CrossEntropyLoss(), TensorDataset(x, y), TensorDataset(x[:50], y[:50]),
                         epochs=2, batch_size=8, log_every=3, progress="off", strategy=strategy,
                         checkpoint_background=False, run_dir=run_dir, callbacks=list(callbacks), seed=1)


def whole_weights(trainer):
    """The model's whole weights as lists (FSDP2 shards gathered first)."""
    from overt.distributed.callback import full_state_dict

    whole = full_state_dict(trainer.model) if trainer.strategy == "fsdp" else trainer.model.state_dict()
    return {k: v.flatten().tolist() for k, v in whole.items()}
