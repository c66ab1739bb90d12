"""Adversarial trials of how runs end: signals to distributed jobs, a killed launcher, a damaged
FSDP2 checkpoint, FSDP2 resumes under CPU load, and a full disk.  Prints one line per trial and a
tally (tried / survived / tracebacks / data lost / hangs) as a markdown table::

    python scripts/stop_trials.py --trials 4                 # every surface, 4 trials each
    python scripts/stop_trials.py --only disk --trials 20    # one surface

Surfaces (each trial is a real run of ``overt train``/``overt resume``, digits recipe, CPU, gloo):

- ``term-all``: ``overt train ... nproc=2`` gets SIGTERM on the launcher and both workers at once
  (what ``scancel`` does) at a random moment; survived = exit 143, one "stopped" message, status
  ``stopped``, and ``overt resume`` ends with the bytes of an uninterrupted run;
- ``kill-worker``: rank 1 SIGKILLed (the OOM killer) and rank 0 SIGTERMed; survived = exit 1 naming
  the killed rank, and ``overt resume`` finishes bit-identically;
- ``kill-launcher``: SIGKILL of the launcher's process group; survived = no worker alive afterwards,
  the run directory unlocked, and ``overt resume`` finishes bit-identically;
- ``fsdp-damaged``: a byte flipped in a random shard of the newest FSDP2 checkpoint; survived =
  resume names it, falls back to the previous one and finishes bit-identically;
- ``fsdp-load``: ``overt resume nproc=2 strategy=fsdp`` while other processes load every core;
  survived = exit 0, bit-identical, no "terminate called" on stderr;
- ``disk``: the run directory on a small tmpfs (Linux, root: ``mount -t tmpfs``) whose free space is
  a random size between 0 and a whole run; survived = exit 0 (it fit) or exit 2 with overt's
  "disk is full" error, ``status.json`` ``completed`` or ``failed`` with the reason, every checkpoint
  left verifies; then, with the ballast removed, ``overt resume`` finishes.

"tracebacks": a Python traceback on stderr; "data lost": a checkpoint that verified before the
trial no longer does, or a finished resume differs from the uninterrupted run; "hangs": a command
that did not end within its time limit (killed).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
ARGS = ["digits", "epochs=6", "checkpoint_every_steps=5", "log_every=2", "progress=off",
        "checkpoint_background=false", "tensorboard=false"]
LIMIT_S = 400


def env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""),
            "OMP_NUM_THREADS": "1"}


@dataclass
class Outcome:
    survived: bool = True
    traceback: bool = False
    lost: bool = False
    hang: bool = False
    notes: list[str] = field(default_factory=list)

    def fail(self, note: str) -> None:
        self.survived = False
        self.notes.append(note)

    def seen(self, stderr: str) -> None:
        if "Traceback (most recent call last)" in stderr:
            self.traceback = True
            self.survived = False
            self.notes.append("traceback")


def overt(out: Outcome, *args: str, limit: float = LIMIT_S) -> subprocess.CompletedProcess | None:
    try:
        done = subprocess.run([sys.executable, "-m", "overt", *args], capture_output=True, text=True, env=env(),
                              timeout=limit, cwd=REPO)
    except subprocess.TimeoutExpired:
        out.hang = True
        out.fail(f"`overt {args[0]}` hung")
        return None
    out.seen(done.stderr)
    return done


def start(*args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "overt", *args], env=env(), cwd=REPO, start_new_session=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def finish(out: Outcome, proc: subprocess.Popen) -> str:
    try:
        _, err = proc.communicate(timeout=LIMIT_S)
    except subprocess.TimeoutExpired:
        out.hang = True
        out.fail("the job hung")
        for pid in [proc.pid, *children(proc.pid)]:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        _, err = proc.communicate()
    out.seen(err)
    return err


def children(parent: int) -> list[int]:
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if int(Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[1]) == parent:
                    out.append(int(entry))
            except (OSError, ValueError):
                pass
    return out


def rank_of(pid: int) -> int | None:
    try:
        for item in Path(f"/proc/{pid}/environ").read_text().split("\0"):
            if item.startswith("RANK="):
                return int(item[5:])
    except (OSError, ValueError):
        pass
    return None


def alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def verified(run: Path) -> dict[str, bool]:
    """Each checkpoint of ``run`` -> whether it verifies (shards included)."""
    sys.path.insert(0, str(REPO))
    from overt.checkpoint.callback import _newest_usable  # noqa: F401  (the same checks as resume)
    from overt.checkpoint.checkpointer import Restored
    from overt.checkpoint.codec import CheckpointError
    from overt.checkpoint.store import list_checkpoints, verify_and_read
    from overt.distributed.dcp import verify_shards

    out = {}
    for entry in list_checkpoints(run / "checkpoints"):
        try:
            restored = Restored(verify_and_read(entry.path))
            if restored.meta.get("sharded"):
                verify_shards(restored)
            out[entry.path.name] = True
        except CheckpointError:
            out[entry.path.name] = False
    return out


def check_kept(out: Outcome, before: dict[str, bool], run: Path) -> None:
    """A checkpoint that verified before and exists but no longer verifies, or a newest valid
    checkpoint older than before, is lost data (one deleted by keep_last's rotation after a newer
    save is not)."""
    after = verified(run)
    for name, ok in before.items():
        if ok and name in after and not after[name]:
            out.lost = True
            out.fail(f"checkpoint {name} damaged")
    newest_before = max((n for n, ok in before.items() if ok), default="")
    newest_after = max((n for n, ok in after.items() if ok), default="")
    if newest_after < newest_before:
        out.lost = True
        out.fail(f"newest valid checkpoint went back from {newest_before} to {newest_after or 'none'}")


def resume_to_end(out: Outcome, run: Path, reference: Path, *extra: str) -> None:
    for _ in range(3):
        done = overt(out, "resume", str(run), *extra)
        if done is None:
            return
        if done.returncode == 0:
            break
        if done.returncode != 143:
            out.fail(f"resume exit {done.returncode}: {done.stderr.strip().splitlines()[-1:]}")
            return
    if digest(run / "model.safetensors") != digest(reference / "model.safetensors"):
        out.lost = True
        out.fail("resumed weights differ from the uninterrupted run")


def wait_for(out: Outcome, path: Path, proc: subprocess.Popen) -> bool:
    start_t = time.monotonic()
    while not path.exists():
        if proc.poll() is not None or time.monotonic() - start_t > LIMIT_S:
            out.fail(f"{path.name} never appeared")
            finish(out, proc)
            return False
        time.sleep(0.01)
    return True


# -- surfaces ---------------------------------------------------------------------------------------

def term_all(work: Path, rng: random.Random, ref: Path) -> Outcome:
    out, run = Outcome(), work / "run"
    proc = start("train", *ARGS, f"run_dir={run}", "nproc=2")
    if not wait_for(out, run / "checkpoints" / "step-000005" / "manifest.json", proc):
        return out
    time.sleep(rng.uniform(0, 3))
    gap = rng.choice([0.0, rng.uniform(0.05, 1.0)])  # at once, or the launcher's copy a little later
    for pid in children(proc.pid):
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    time.sleep(gap)
    os.kill(proc.pid, signal.SIGTERM)
    out.notes.append(f"gap {gap:.2f} s")
    err = finish(out, proc)
    if proc.returncode == 0:
        out.notes.append("finished before the signal")
        return out
    if proc.returncode != 143:
        out.fail(f"exit {proc.returncode}")
    if err.count("stopped on SIGTERM") != 1:
        out.fail(f"{err.count('stopped on SIGTERM')} 'stopped' messages")
    status = json.loads((run / "status.json").read_text()).get("status")
    if status != "stopped":
        out.fail(f"status.json says {status}")
    resume_to_end(out, run, ref, "nproc=2")
    return out


def kill_worker(work: Path, rng: random.Random, ref: Path) -> Outcome:
    out, run = Outcome(), work / "run"
    proc = start("train", *ARGS, f"run_dir={run}", "nproc=2")
    if not wait_for(out, run / "checkpoints" / "step-000005" / "manifest.json", proc):
        return out
    time.sleep(rng.uniform(0, 3))
    before = verified(run)
    ranks = {rank_of(p): p for p in children(proc.pid)}
    os.kill(ranks[1], signal.SIGKILL)
    os.kill(ranks[0], signal.SIGTERM)
    err = finish(out, proc)
    if proc.returncode != 1:
        out.fail(f"exit {proc.returncode}")
    elif "rank 1: killed by SIGKILL" not in err:
        out.fail("the killed rank is not named")
    check_kept(out, before, run)
    resume_to_end(out, run, ref, "nproc=2")
    return out


def kill_launcher(work: Path, rng: random.Random, ref: Path) -> Outcome:
    out, run = Outcome(), work / "run"
    args = [a for a in ARGS if not a.startswith("epochs=")]
    proc = subprocess.Popen([sys.executable, "-m", "overt", "train", *args, "epochs=500", f"run_dir={run}",
                             "nproc=2"], env=env(), cwd=REPO, start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    while not (run / "checkpoints" / "step-000005" / "manifest.json").exists() and proc.poll() is None:
        time.sleep(0.01)
    time.sleep(rng.uniform(0, 3))
    workers = children(proc.pid)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    deadline = time.monotonic() + 60
    while any(alive(p) for p in workers) and time.monotonic() < deadline:
        time.sleep(0.1)
    left = [p for p in workers if alive(p)]
    if left:
        out.hang = True
        out.fail(f"{len(left)} worker(s) outlived the launcher")
        for pid in left:
            os.kill(pid, signal.SIGKILL)
        time.sleep(1)
    elif (run / "summary.json").exists():
        out.fail("the workers trained to the end after the launcher was killed")
    done = overt(out, "resume", str(run), "nproc=2", "epochs=6")
    if done is not None and done.returncode != 0:
        out.fail(f"resume exit {done.returncode}: {done.stderr.strip().splitlines()[-1:]}")
    return out


def fsdp_damaged(work: Path, rng: random.Random, ref: Path) -> Outcome:
    out, run = Outcome(), work / "run"
    shutil.copytree(ref, run)
    for name in ("summary.json", "model.safetensors"):
        (run / name).unlink()
    newest = sorted((run / "checkpoints").glob("step-*"))[-1]
    shard = rng.choice(sorted((newest / "dcp").iterdir()))
    data = bytearray(shard.read_bytes())
    data[rng.randrange(len(data))] ^= 0xFF
    shard.write_bytes(bytes(data))
    done = overt(out, "resume", str(run), "nproc=2")
    if done is None:
        return out
    if done.returncode != 0:
        out.fail(f"resume exit {done.returncode}: {done.stderr.strip().splitlines()[-1:]}")
    elif f"{newest.name} is unusable" not in done.stderr:
        out.fail("the damaged checkpoint was not named")
    elif digest(run / "model.safetensors") != digest(ref / "model.safetensors"):
        out.lost = True
        out.fail("resumed weights differ")
    return out


def fsdp_load(work: Path, rng: random.Random, ref: Path) -> Outcome:
    out, run = Outcome(), work / "run"
    shutil.copytree(ref, run)
    for name in ("summary.json", "model.safetensors"):
        (run / name).unlink()
    steps = sorted((run / "checkpoints").glob("step-*"))
    for extra in steps[rng.randrange(1, len(steps)):]:  # as if killed after a random checkpoint
        shutil.rmtree(extra)
    burners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(os.cpu_count() or 2)]
    try:
        done = overt(out, "resume", str(run), "nproc=2")
    finally:
        for b in burners:
            b.kill()
            b.wait()
    if done is None:
        return out
    if "terminate called" in done.stderr:
        out.fail("terminate called (abort) on a rank")
    if done.returncode != 0:
        out.fail(f"resume exit {done.returncode}: {done.stderr.strip().splitlines()[-2:]}")
    elif digest(run / "model.safetensors") != digest(ref / "model.safetensors"):
        out.lost = True
        out.fail("resumed weights differ")
    return out


def disk(work: Path, rng: random.Random, ref: Path | None) -> Outcome:
    out = Outcome()
    mount = work / "tmpfs"
    mount.mkdir()
    total = 4 << 20
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={total}", "tmpfs", str(mount)], check=True)
    try:
        free = shutil.disk_usage(mount).free
        room = rng.randrange(0, 1_600_000)  # a whole 6-epoch digits run with keep_last needs about 1.5 MB
        (mount / "ballast").write_bytes(b"\0" * max(0, free - room))
        run = mount / "run"
        done = overt(out, "train", *ARGS, f"run_dir={run}")
        if done is None:
            return out
        out.notes.append(f"room {room // 1000} kB, exit {done.returncode}")
        status = json.loads((run / "status.json").read_text()).get("status") if (run / "status.json").exists() \
            else None
        if done.returncode == 0:
            if status != "completed":
                out.fail(f"exit 0 but status.json says {status}")
            return out
        if done.returncode != 2 or "disk is full" not in done.stderr:
            out.fail(f"exit {done.returncode}: {done.stderr.strip().splitlines()[-1:]}")
        if run.exists() and status not in ("failed", None):
            out.fail(f"status.json says {status}")
        if status == "failed":
            reason = json.loads((run / "status.json").read_text()).get("error", "")
            if "disk is full" not in reason and "No space" not in reason:
                out.fail(f"status.json's reason does not say the disk is full: {reason[:80]}")
        if not run.exists() or not (run / "checkpoints").is_dir():
            return out
        before = verified(run)
        (mount / "ballast").unlink()
        check_kept(out, before, run)
        if any(before.values()):
            done = overt(out, "resume", str(run))
            if done is not None and done.returncode != 0:
                out.fail(f"resume after freeing space: exit {done.returncode}")
        return out
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


SURFACES = {"term-all": (term_all, "ddp"), "kill-worker": (kill_worker, "ddp"),
            "kill-launcher": (kill_launcher, "ddp"), "fsdp-damaged": (fsdp_damaged, "fsdp"),
            "fsdp-load": (fsdp_load, "fsdp"), "disk": (disk, None)}


def reference(work: Path, kind: str) -> Path:
    """An uninterrupted run to compare the resumed weights with."""
    run = work / f"reference-{kind}"
    extra = {"ddp": ["nproc=2"], "fsdp": ["nproc=2", "strategy=fsdp"]}[kind]
    done = subprocess.run([sys.executable, "-m", "overt", "train", *ARGS, f"run_dir={run}", *extra],
                          capture_output=True, text=True, env=env(), timeout=LIMIT_S, cwd=REPO)
    if done.returncode != 0:
        raise SystemExit(f"the reference run failed:\n{done.stderr[-3000:]}")
    return run


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=4)
    parser.add_argument("--only", action="append", choices=sorted(SURFACES), help="a surface (repeatable)")
    parser.add_argument("--seed", type=int, default=2026)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    names = args.only or list(SURFACES)
    rows = []
    with tempfile.TemporaryDirectory(prefix="overt-stops-") as tmp:
        refs: dict[str, Path] = {}
        for name in names:
            fn, kind = SURFACES[name]
            if kind is not None and kind not in refs:
                refs[kind] = reference(Path(tmp), kind)
            tally = {"tried": 0, "survived": 0, "tracebacks": 0, "data lost": 0, "hangs": 0}
            for trial in range(args.trials):
                work = Path(tmp) / f"{name}-{trial}"
                work.mkdir()
                began = time.monotonic()
                out = fn(work, rng, refs.get(kind))
                tally["tried"] += 1
                tally["survived"] += out.survived
                tally["tracebacks"] += out.traceback
                tally["data lost"] += out.lost
                tally["hangs"] += out.hang
                verdict = "survived" if out.survived else "FAILED"
                print(f"{name:14s} trial {trial + 1:2d}: {verdict} ({time.monotonic() - began:.0f} s) "
                      f"{'; '.join(out.notes)}", flush=True)
                shutil.rmtree(work, ignore_errors=True)
            rows.append((name, tally))
    print("\n| surface | tried | survived | tracebacks | data lost | hangs |\n|---|---|---|---|---|---|")
    for name, t in rows:
        print(f"| {name} | {t['tried']} | {t['survived']} | {t['tracebacks']} | {t['data lost']} | {t['hangs']} |")
    return 0 if all(t["survived"] == t["tried"] for _, t in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
