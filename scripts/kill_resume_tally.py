"""Kill a training run at many random points, resume each, and tally bit-identical results.

Each trial runs ``overt train`` on the digits recipe (dropout, shuffling, gradient
accumulation, a per-step OneCycle schedule, clipping; checkpoints every few steps),
sends a real SIGKILL (or ``--signal``) to the process right before a random forward
pass, runs ``overt resume`` on the run directory (repeatedly, if it is stopped again),
and compares the SHA-256 of the final weights with an uninterrupted run::

    python scripts/kill_resume_tally.py --trials 20
    python scripts/kill_resume_tally.py --trials 10 --workers 2 --signal SIGTERM
    python scripts/kill_resume_tally.py --trials 20 --in-save     # SIGKILL inside fsync/rename of a save

With ``--in-save`` the kill points are the checkpoint store's durable operations instead of
forward passes: right before or right after a random one of the run's file fsyncs, folder
fsyncs and renames (saves and deletions of old checkpoints, in the background thread too),
through the test hook in tests/checkpoint/kill_recipe.py.

Prints one line per trial and the tally; exits 1 if any trial differs.
"""

from __future__ import annotations

import argparse
import shutil
import hashlib
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RECIPE = REPO / "tests" / "checkpoint" / "kill_recipe.py"


def overt(args: list[str], **env: str) -> subprocess.CompletedProcess:
    environ = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""), **env}
    for key in ("OVERT_TEST_SIGNAL_AT", "OVERT_TEST_SIGNAL", "OVERT_TEST_KILL_AT_SAVE_POINT",
                "OVERT_TEST_SAVE_POINTS_FILE"):
        if key not in env:
            environ.pop(key, None)
    return subprocess.run([sys.executable, "-m", "overt", *args], cwd=REPO, env=environ,
                          capture_output=True, text=True, timeout=600)


def weights_hash(run_dir: Path) -> str:
    return hashlib.sha256((run_dir / "model.safetensors").read_bytes()).hexdigest()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--workers", type=int, default=0, help="DataLoader worker processes")
    parser.add_argument("--every", type=int, default=4, help="checkpoint every N optimizer steps")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--signal", default="SIGKILL", help="SIGKILL (default), SIGTERM, SIGINT, ...")
    parser.add_argument("--foreground", action="store_true", help="write checkpoints in the foreground")
    parser.add_argument("--seed", type=int, default=None, help="seed of the kill points (default: random)")
    parser.add_argument("--in-save", action="store_true",
                        help="SIGKILL right before/after a random fsync or rename of the checkpoint store")
    args = parser.parse_args()

    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(2**31)
    rng = random.Random(seed)
    settings = [f"num_workers={args.workers}", f"checkpoint_every_steps={args.every}", f"epochs={args.epochs}",
                f"checkpoint_background={'false' if args.foreground else 'true'}"]
    # forward passes in the run: training micro-batches plus validation batches, per epoch
    n_train, n_val, batch = 1437, 360, 32
    calls = args.epochs * (-(-n_train // batch) + -(-n_val // (2 * batch)))
    with tempfile.TemporaryDirectory(prefix="overt-tally-") as tmp:
        ref = Path(tmp) / "reference"
        count_file = Path(tmp) / "save-points"
        done = overt(["train", str(RECIPE), f"run_dir={ref}", *settings], OVERT_TEST_SAVE_POINTS_FILE=str(count_file))
        if done.returncode != 0:
            print(done.stderr, file=sys.stderr)
            return 2
        if args.in_save:
            calls = int(count_file.read_text())
            what = "SIGKILL at a random one of {} points before/after an fsync or rename of a checkpoint save"
        else:
            what = f"{args.signal} before a random one of {{}} forward passes"
        print(f"kill points: {what.format(calls)} (seed {seed}); settings: {' '.join(settings)}")
        expected = weights_hash(ref)
        print(f"uninterrupted run: model.safetensors sha256 {expected}")
        same = 0
        start = time.perf_counter()
        for trial in range(args.trials):
            at = rng.randint(1, calls)
            run_dir = Path(tmp) / f"trial-{trial}"
            hook = ({"OVERT_TEST_KILL_AT_SAVE_POINT": str(at)} if args.in_save
                    else {"OVERT_TEST_SIGNAL_AT": str(at), "OVERT_TEST_SIGNAL": args.signal})
            first = overt(["train", str(RECIPE), f"run_dir={run_dir}", *settings], **hook)
            resumes = 0
            rc = first.returncode
            while rc != 0 and resumes < 3:
                ckpts = run_dir / "checkpoints"
                if not ckpts.is_dir() or not any(p.name.startswith("step-") for p in ckpts.iterdir()):
                    # killed before the first checkpoint: the only way on is to start again
                    shutil.rmtree(run_dir)
                    rc = overt(["train", str(RECIPE), f"run_dir={run_dir}", *settings]).returncode
                else:
                    rc = overt(["resume", str(run_dir)]).returncode
                resumes += 1
            ok = rc == 0 and weights_hash(run_dir) == expected
            same += ok
            point = f"save point {at:4d}" if args.in_save else f"signal before forward pass {at:4d}"
            print(f"trial {trial + 1:3d}: {point}, first exit {first.returncode:4d}, "
                  f"{resumes} resume(s): {'identical' if ok else 'DIFFERENT'}", flush=True)
        print(f"\n{same}/{args.trials} resumed runs bit-identical to the uninterrupted run "
              f"({time.perf_counter() - start:.0f}s)")
    return 0 if same == args.trials else 1


if __name__ == "__main__":
    sys.exit(main())
