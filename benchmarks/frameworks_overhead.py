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


def lightning_run(steps: int, warmup: int, overt: bool) -> tuple[float, float]:
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
    trainer = L.Trainer(max_steps=steps, accelerator="cpu", devices=1, logger=False, enable_progress_bar=False,
                        enable_model_summary=False, enable_checkpointing=False, callbacks=callbacks,
                        default_root_dir=tempfile.mkdtemp())
    trainer.fit(Module(), DataLoader(data(), batch_size=32, shuffle=True))
    return clock.per_step_ms()


def hf_run(steps: int, warmup: int, overt: bool) -> tuple[float, float]:
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--only", choices=list(RUNS), action="append")
    args = parser.parse_args()
    torch.set_num_threads(1)
    import logging
    import warnings

    warnings.filterwarnings("ignore")
    logging.disable(logging.WARNING)
    print(f"torch {torch.__version__}, {args.steps} steps (timed from step {args.warmup}), "
          f"median of {args.repeat}, 1 thread")
    print(f"{'framework':<12} {'alone ms/step':>14} {'+ overt ms/step':>16} {'ratio':>7}   "
          f"{'CPU alone':>10} {'CPU + overt':>12} {'CPU ratio':>10}")
    for name in args.only or list(RUNS):
        run = RUNS[name]
        run(args.warmup + 10, args.warmup, False)  # imports and first-call costs, for neither side
        alone, guarded = [], []
        for _ in range(args.repeat):
            alone.append(run(args.steps, args.warmup, False))
            guarded.append(run(args.steps, args.warmup, True))
        a, g = statistics.median(w for w, _ in alone), statistics.median(w for w, _ in guarded)
        ca, cg = statistics.median(c for _, c in alone), statistics.median(c for _, c in guarded)
        print(f"{name:<12} {a:>14.3f} {g:>16.3f} {g / a:>7.3f}   {ca:>10.3f} {cg:>12.3f} {cg / ca:>10.3f}",
              flush=True)


if __name__ == "__main__":
    main()
