"""What do overt's guards cost inside Lightning, the Hugging Face Trainer and an Accelerate loop?

Per framework, the same training (an MLP 64-256-256-10 with dropout on batches of 32 random
digits-shaped inputs, SGD) runs alone and with overt's two lines (``OvertCallback``,
``OvertTrainerCallback``, ``overt.guard``), interleaved (alone, overt, alone, overt, ...) so a
changing machine load hits both alike.  The time per optimizer step is measured inside the
framework's own loop, from the start of step ``--warmup`` to the end of the last one (start-up,
the first steps and validation excluded); medians of ``--repeat`` runs, and the ratio overt /
alone (1.00: no cost), on wall time and on the process's CPU time (which a busy machine
disturbs less)::

    python benchmarks/frameworks_overhead.py                  # all three, 300 steps, 3 repeats
    python benchmarks/frameworks_overhead.py --only lightning --steps 500 --repeat 5
    python benchmarks/frameworks_overhead.py --ddp            # Lightning and HF under DDP, 2 processes

``--ddp``: Lightning (``strategy="ddp"``, ``devices=2``) and the HF Trainer (Accelerate's DDP)
in two CPU processes joined by gloo, started as torchrun starts its workers; both processes
run every repeat (alone, overt, alone, ...) in the same process group, and the figures are rank
0's (each step waits for the gradients' all-reduce, so both ranks step in lockstep).

One intra-op thread (``torch.set_num_threads(1)``) for both, so that a busy machine disturbs
less; the frameworks' progress bars, loggers and checkpoints are off.
"""

from __future__ import annotations

import argparse
import io
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def data(n: int = 4096) -> TensorDataset:
    g = torch.Generator().manual_seed(0)
    return TensorDataset(torch.rand(n, 64, generator=g), torch.randint(0, 10, (n,), generator=g))


def mlp() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Dropout(0.1), nn.Linear(256, 256), nn.ReLU(),
                         nn.Linear(256, 10))


class Clock:
    """Wall and CPU time from the start of step ``warmup`` to the end of the last step."""

    def __init__(self, warmup: int):
        self.warmup, self.steps = warmup, 0
        self.t0 = self.t1 = self.c0 = self.c1 = 0.0

    def begin(self) -> None:
        if self.steps == self.warmup:
            self.t0, self.c0 = time.perf_counter(), time.process_time()

    def end(self) -> None:
        self.steps += 1
        self.t1, self.c1 = time.perf_counter(), time.process_time()

    def per_step_ms(self) -> tuple[float, float]:
        n = self.steps - self.warmup
        return (self.t1 - self.t0) / n * 1e3, (self.c1 - self.c0) / n * 1e3


def lightning_run(steps: int, warmup: int, overt: bool, ddp: bool = False) -> tuple[float, float]:
    import lightning.pytorch as L

    clock = Clock(warmup)

    class Timing(L.Callback):
        def on_train_batch_start(self, *a):
            clock.begin()

        def on_train_batch_end(self, *a):
            clock.end()

    class Module(L.LightningModule):
        def __init__(self):
            super().__init__()
            self.net = mlp()

        def training_step(self, batch, i):
            x, y = batch
            return nn.functional.cross_entropy(self.net(x), y)

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.01, momentum=0.9)

    callbacks: list = [Timing()]
    if overt:
        from overt.integrations.lightning import OvertCallback

        callbacks.append(OvertCallback(stream=io.StringIO()))
    parallel = dict(strategy="ddp", devices=2) if ddp else dict(devices=1)
    trainer = L.Trainer(max_steps=steps, accelerator="cpu", **parallel, logger=False, enable_progress_bar=False,
                        enable_model_summary=False, enable_checkpointing=False, callbacks=callbacks,
                        default_root_dir=tempfile.mkdtemp())
    trainer.fit(Module(), DataLoader(data(), batch_size=32, shuffle=True))
    return clock.per_step_ms()


def hf_run(steps: int, warmup: int, overt: bool, ddp: bool = False) -> tuple[float, float]:
    """(Under ``ddp`` the Trainer finds the process group from the environment.)"""
    from transformers import Trainer, TrainerCallback, TrainingArguments

    clock = Clock(warmup)

    class Timing(TrainerCallback):
        def on_step_begin(self, *a, **k):
            clock.begin()

        def on_step_end(self, *a, **k):
            clock.end()

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.net = mlp()

        def forward(self, x, labels=None):
            logits = self.net(x)
            return {"loss": nn.functional.cross_entropy(logits, labels), "logits": logits}

    class Dicts(torch.utils.data.Dataset):
        def __init__(self):
            self.d = data()

        def __len__(self):
            return len(self.d)

        def __getitem__(self, i):
            x, y = self.d[i]
            return {"x": x, "labels": y}

    callbacks: list = [Timing()]
    if overt:
        from overt.integrations.hf import OvertTrainerCallback

        callbacks.append(OvertTrainerCallback(stream=io.StringIO()))
    model = Model()
    args = TrainingArguments(output_dir=tempfile.mkdtemp(), max_steps=steps, per_device_train_batch_size=32,
                             learning_rate=0.01, logging_steps=10 ** 6, save_strategy="no", report_to=[],
                             use_cpu=True, disable_tqdm=True, dataloader_num_workers=0)
    Trainer(model=model, args=args, train_dataset=Dicts(), callbacks=callbacks,
            optimizers=(torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9), None)).train()
    return clock.per_step_ms()


def accelerate_run(steps: int, warmup: int, overt: bool) -> tuple[float, float]:
    from accelerate import Accelerator

    import overt as ov

    accelerator = Accelerator(cpu=True)
    model = mlp()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    loader = DataLoader(data(), batch_size=32, shuffle=True)
    model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
    guard = ov.guard(model, optimizer, stream=io.StringIO()) if overt else None
    clock = Clock(warmup)
    done = 0
    while done < steps:
        for x, y in loader:
            clock.begin()
            loss = nn.functional.cross_entropy(model(x), y)
            accelerator.backward(loss)
            optimizer.step()
            optimizer.zero_grad()
            clock.end()
            done += 1
            if done == steps:
                break
    if guard is not None:
        guard.report(quiet=True)
    return clock.per_step_ms()


RUNS = {"lightning": lightning_run, "hf": hf_run, "accelerate": accelerate_run}
DDP_RUNS = ("lightning", "hf")


def measure(run: Any, steps: int, warmup: int, repeat: int, **kw: Any) -> tuple[list, list]:
    """(alone, guarded): ``repeat`` runs each, interleaved, after one untimed run of each side."""
    run(warmup + 10, warmup, False, **kw)  # imports and first-call costs, for neither side
    run(warmup + 10, warmup, True, **kw)
    alone, guarded = [], []
    for _ in range(repeat):
        alone.append(run(steps, warmup, False, **kw))
        guarded.append(run(steps, warmup, True, **kw))
    return alone, guarded


def _ddp_rank(rank: int, port: int, names: list[str], steps: int, warmup: int, repeat: int, out: str) -> None:
    import json
    import os

    import torch.distributed as dist

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), LOCAL_RANK=str(rank),
                      WORLD_SIZE="2", LOCAL_WORLD_SIZE="2", GROUP_RANK="0")
    torch.set_num_threads(1)
    _quiet()
    dist.init_process_group("gloo", rank=rank, world_size=2)
    results = {name: measure(RUNS[name], steps, warmup, repeat, ddp=True) for name in names}
    dist.destroy_process_group()
    if rank == 0:
        Path(out).write_text(json.dumps(results))


def measure_ddp(names: list[str], steps: int, warmup: int, repeat: int) -> dict[str, tuple[list, list]]:
    """``measure`` of each framework in two gloo processes (rank 0's figures)."""
    import json
    import socket

    import torch.multiprocessing as mp

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    out = Path(tempfile.mkdtemp()) / "ddp.json"
    mp.start_processes(_ddp_rank, args=(port, names, steps, warmup, repeat, str(out)), nprocs=2, join=True,
                       start_method="spawn")
    return json.loads(out.read_text())


def _quiet() -> None:
    import logging
    import warnings

    warnings.filterwarnings("ignore")
    logging.disable(logging.WARNING)


def _row(name: str, alone: list, guarded: list) -> str:
    a, g = statistics.median(w for w, _ in alone), statistics.median(w for w, _ in guarded)
    ca, cg = statistics.median(c for _, c in alone), statistics.median(c for _, c in guarded)
    return f"{name:<14} {a:>14.3f} {g:>16.3f} {g / a:>7.3f}   {ca:>10.3f} {cg:>12.3f} {cg / ca:>10.3f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--only", choices=list(RUNS), action="append")
    parser.add_argument("--ddp", action="store_true", help="Lightning and the HF Trainer under DDP, 2 processes")
    args = parser.parse_args()
    torch.set_num_threads(1)
    _quiet()
    where = "DDP, 2 gloo processes, rank 0's figures" if args.ddp else "1 process"
    print(f"torch {torch.__version__}, {args.steps} steps (timed from step {args.warmup}), "
          f"median of {args.repeat}, 1 thread per process, {where}")
    print(f"{'framework':<14} {'alone ms/step':>14} {'+ overt ms/step':>16} {'ratio':>7}   "
          f"{'CPU alone':>10} {'CPU + overt':>12} {'CPU ratio':>10}")
    if args.ddp:
        names = [n for n in (args.only or DDP_RUNS) if n in DDP_RUNS]
        for name, (alone, guarded) in measure_ddp(names, args.steps, args.warmup, args.repeat).items():
            print(_row(f"{name}-ddp", alone, guarded), flush=True)
        return
    for name in args.only or list(RUNS):
        alone, guarded = measure(RUNS[name], args.steps, args.warmup, args.repeat)
        print(_row(name, alone, guarded), flush=True)


if __name__ == "__main__":
    main()
