"""Steps per second of overt's engine on 1 vs 2 (or N) processes, with the all-reduce cost separated.

    python benchmarks/distributed.py [--nproc 2] [--model mid] [--steps 300] [--batch 64]

Three runs of the same model (fresh, same seed) on synthetic data, ``--steps`` optimizer steps
per process, per-process micro-batch ``--batch``:

- ``1 process``: the engine alone (strategy none);
- ``N processes, ddp``: the engine under DDP (gradients all-reduced every step);
- ``N processes, no sync``: the same N processes, each training alone (strategy none):
  what N processes cost without any gradient communication (CPU cores shared, memory);

plus the time of one all-reduce of a buffer as large as the model's gradients, measured by
itself.  ``ddp - no sync`` per step is the communication the gradient sync costs on top of
the parallel compute.  Steps/s are per process; samples/s are over all processes.

On CPU the processes use gloo; with CUDA (one GPU per process) the same script uses nccl
(``--device cuda``).  On a 2-core VM two processes compete for the same cores, so expect the
2-process samples/s to stay near the 1-process figure: the script measures overheads, not a
speed-up that 2 shared cores cannot give.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402
from torch import nn  # noqa: E402
from torch.utils.data import TensorDataset  # noqa: E402

MODELS = {
    "tiny": lambda: nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10)),
    "mid": lambda: nn.Sequential(nn.Linear(64, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(),
                                 nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10)),
}


def _train(args, strategy: str, world: int) -> dict:
    from overt.compose import Trainer  # the engine alone runs one process; the composition picks DDP

    torch.manual_seed(0)
    n = args.steps * args.batch * world
    g = torch.Generator().manual_seed(0)
    data = TensorDataset(torch.randn(n, 64, generator=g), torch.randint(0, 10, (n,), generator=g))
    model = MODELS[args.model]()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    trainer = Trainer(model, opt, nn.CrossEntropyLoss(), data, epochs=1, batch_size=args.batch, log_every=50,
                      progress="off", guards=False, checkpoint=False, strategy=strategy, device=args.device)
    start = time.perf_counter()
    summary = trainer.fit()
    wall = time.perf_counter() - start
    return {"steps": summary["steps"], "wall": wall, "params": sum(p.numel() for p in model.parameters())}


def _allreduce_ms(numel: int, device: str, repeats: int = 20) -> float:
    import torch.distributed as dist

    buf = torch.randn(numel, device=device)
    dist.all_reduce(buf)
    times = []
    for _ in range(repeats):
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        dist.all_reduce(buf)
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    return 1000 * sorted(times)[len(times) // 2]


def _rank_main(rank: int, world: int, port: int, args, out: str) -> None:
    code = 1
    try:
        os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), LOCAL_RANK=str(rank),
                          WORLD_SIZE=str(world), LOCAL_WORLD_SIZE=str(world))
        torch.set_num_threads(1)
        from overt.distributed.group import init_from_env, teardown

        init_from_env(args.device)
        device = f"cuda:{rank}" if args.device == "cuda" else "cpu"
        result = {"ddp": _train(args, "ddp", world), "nosync": _train(args, "none", world)}
        result["allreduce_ms"] = _allreduce_ms(result["ddp"]["params"], device)
        Path(out, f"{rank}.json").write_text(json.dumps(result))
        teardown()
        code = 0
    finally:
        sys.stdout.flush()
        os._exit(code)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--nproc", type=int, default=2)
    p.add_argument("--model", choices=sorted(MODELS), default="mid")
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--device", default="cpu", help="cpu (gloo) or cuda (nccl, one GPU per process)")
    args = p.parse_args()
    torch.set_num_threads(1)

    import importlib

    importlib.import_module("torch._dynamo")  # DDP imports it: once here, inherited by the forked workers
    import torch.multiprocessing as mp

    single = _train(args, "none", 1)
    with tempfile.TemporaryDirectory() as out, socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        s.close()
        method = "spawn" if args.device == "cuda" else "fork"
        mp.start_processes(_rank_main, args=(args.nproc, port, args, out), nprocs=args.nproc, join=True,
                           start_method=method)
        ranks = [json.loads(Path(out, f"{r}.json").read_text()) for r in range(args.nproc)]

    def per_step(r):
        return r["wall"] / r["steps"]

    ddp = max(per_step(r["ddp"]) for r in ranks)  # the job is as fast as its slowest rank
    nosync = max(per_step(r["nosync"]) for r in ranks)
    allreduce = max(r["allreduce_ms"] for r in ranks)
    one = per_step(single)
    n = args.nproc
    print(f"model {args.model} ({single['params']:,} parameters), batch {args.batch} per process, "
          f"{args.steps} steps, device {args.device}, torch {torch.__version__}")
    print(f"{'run':<24}{'steps/s':>10}{'samples/s':>12}{'ms/step':>10}")
    for name, t, procs in (("1 process", one, 1), (f"{n} processes, ddp", ddp, n), (f"{n} processes, no sync", nosync, n)):
        print(f"{name:<24}{1 / t:>10.1f}{procs * args.batch / t:>12.0f}{1000 * t:>10.2f}")
    print(f"gradient sync per step (ddp - no sync): {1000 * (ddp - nosync):.2f} ms; "
          f"one all-reduce of {single['params']:,} floats by itself: {allreduce:.2f} ms")


if __name__ == "__main__":
    main()
