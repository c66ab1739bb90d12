"""How long does saving a checkpoint block training?  Foreground vs background writes.

A model of ~100 MB of float32 weights (and, separately, the same model with its AdamW
state, ~300 MB in all) is saved with ``Checkpointer(background=False)`` and
``Checkpointer(background=True)``.  "blocking" is the time ``save()`` takes -- what the
training loop waits; "until durable" is until the checkpoint is renamed into place after
its files were fsynced.  Median of ``--repeat`` saves::

    python benchmarks/checkpoint_background.py
    python benchmarks/checkpoint_background.py --dir /path/on/the/training/disk --repeat 5
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import torch
from torch import nn


def build(mb: int) -> tuple[nn.Module, torch.optim.Optimizer]:
    width = 2048
    layers = max(1, round(mb * 2**20 / 4 / (width * width + width)))
    model = nn.Sequential(*[nn.Linear(width, width) for _ in range(layers)])
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    model(torch.randn(2, width)).sum().backward()
    opt.step()  # creates the moment buffers
    return model, opt


def measure(root: Path, objects: dict, background: bool, repeat: int) -> tuple[float, float]:
    from overt.checkpoint import Checkpointer

    blocking, durable = [], []
    ckpt = Checkpointer(root / ("bg" if background else "fg"), keep_last=1, background=background)
    for step in range(1, repeat + 1):
        start = time.perf_counter()
        ckpt.save(step, objects)
        blocked = time.perf_counter() - start
        ckpt.wait()
        durable.append(time.perf_counter() - start)
        blocking.append(blocked)
    return statistics.median(blocking), statistics.median(durable)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mb", type=int, default=100, help="model size in MB of float32 weights")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--dir", default=None, help="where to write (default: a temporary folder)")
    args = parser.parse_args()
    torch.manual_seed(0)
    model, opt = build(args.mb)
    size = sum(p.numel() * p.element_size() for p in model.parameters()) / 2**20
    print(f"model: {size:.0f} MB of weights; torch {torch.__version__}, {torch.get_num_threads()} threads")
    with tempfile.TemporaryDirectory(dir=args.dir, prefix="overt-ckpt-bench-") as tmp:
        for label, objects in (("model", {"model": model}), ("model + AdamW", {"model": model, "optimizer": opt})):
            for background in (False, True):
                blocked, durable = measure(Path(tmp), objects, background, args.repeat)
                mode = "background" if background else "foreground"
                print(f"{label:<14} {mode:<10}  blocking {blocked * 1000:8.1f} ms   "
                      f"until durable {durable * 1000:8.1f} ms")


if __name__ == "__main__":
    main()
