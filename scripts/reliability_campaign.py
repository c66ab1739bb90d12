"""An adversarial campaign on report, doctor, recipe loading, run locking, full disks and FSDP resume.

Each trial runs a real ``python -m overt ...`` command in a subprocess and is classified:

- survived: a clear overt error (exit 2, no traceback) or a correct answer;
- traceback: a Python traceback on stderr;
- hang: the command did not end within ``--timeout`` seconds (it is killed);
- data lost: a checkpoint that verified before the trial no longer does, or a finished run's
  files are gone.

Surfaces: ``overt report`` on damaged run files; ``overt doctor`` on unusable inputs; recipe files
that fail to import (``overt train``/``overt doctor``); two processes on one run; a save on a full
disk (a small tmpfs, mounted when running as root; skipped otherwise); FSDP kill and resume with
gloo (``--fsdp``, slow).  Run from the repository root::

    python scripts/reliability_campaign.py              # all but FSDP
    python scripts/reliability_campaign.py --fsdp       # FSDP kill/resume trials too

Prints one line per trial and the tally; exits 1 if any trial did not survive.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
TALLY = {"tried": 0, "survived": 0, "tracebacks": 0, "data lost": 0, "hangs": 0}


def overt(*args: str, timeout: float, cwd: Path | None = None) -> tuple[int | None, str]:
    """Exit code (None on a hang) and stderr of ``python -m overt *args``."""
    proc = subprocess.Popen([sys.executable, "-m", "overt", *args], env=ENV, cwd=cwd or REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        _, err = proc.communicate(timeout=timeout)
        return proc.returncode, err
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        return None, ""


def verified(run: Path) -> set[str]:
    """Names of the checkpoints of ``run`` that verify."""
    from overt.checkpoint.store import list_checkpoints, verify_and_read

    good = set()
    for entry in list_checkpoints(run / "checkpoints"):
        try:
            verify_and_read(entry.path)
            good.add(entry.path.name)
        except Exception:
            pass
    return good


def record(name: str, code: int | None, err: str, ok_codes: tuple[int, ...], lost: bool = False) -> None:
    TALLY["tried"] += 1
    if code is None:
        outcome = "hangs"
    elif "Traceback" in err:
        outcome = "tracebacks"
    elif lost:
        outcome = "data lost"
    elif code in ok_codes:
        outcome = "survived"
    else:
        outcome = f"unexpected exit {code}"
    if outcome in TALLY:
        TALLY[outcome] += 1
    last = next((line for line in reversed(err.strip().splitlines()) if line.strip()), "")[:110]
    print(f"{'ok ' if outcome == 'survived' else 'BAD'} {name:<44} exit {code}  {outcome}  | {last}", flush=True)


def train(run: Path, *extra: str, timeout: float) -> None:
    code, err = overt("train", "digits", f"run_dir={run}", "epochs=1", "progress=off", "tensorboard=false",
                      *extra, timeout=timeout)
    if code != 0:
        raise SystemExit(f"setup run failed: {err[-2000:]}")


# -- report -----------------------------------------------------------------------------------

def _edit(path: Path, **changes) -> None:
    data = json.loads(path.read_text())
    data.update(changes)
    path.write_text(json.dumps(data))


REPORT_CASES = {
    "nan best": lambda r: _edit(r / "summary.json", best={"metric": "val/loss", "mode": "min", "value": "nan",
                                                          "step": 1}),
    "inf metric": lambda r: (r / "metrics.jsonl").open("a").write('{"step": 9, "epoch": 0, "val/loss": "inf"}\n'),
    "non-numeric step": lambda r: (r / "metrics.jsonl").write_text('{"step": "abc", "epoch": 0, "x": 1}\n'),
    "step a dict": lambda r: (r / "metrics.jsonl").write_text('{"step": {}, "epoch": []}\n'),
    "huge step": lambda r: (r / "metrics.jsonl").write_text('{"step": 1e300, "epoch": 0, "x": 1}\n'),
    "binary metrics": lambda r: (r / "metrics.jsonl").write_bytes(os.urandom(65536)),
    "empty metrics": lambda r: (r / "metrics.jsonl").write_text(""),
    "deeply nested metrics": lambda r: (r / "metrics.jsonl").write_text("[" * 100000 + "\n"),
    "metrics a folder": lambda r: ((r / "metrics.jsonl").unlink(), (r / "metrics.jsonl").mkdir()),
    "metrics a FIFO": lambda r: ((r / "metrics.jsonl").unlink(), os.mkfifo(r / "metrics.jsonl")),
    "metrics -> /dev/zero": lambda r: ((r / "metrics.jsonl").unlink(), (r / "metrics.jsonl").symlink_to("/dev/zero")),
    "summary wrong types": lambda r: _edit(r / "summary.json", status=1, epochs="x", steps=None, final=[],
                                           best="b", findings=3),
    "summary a list": lambda r: (r / "summary.json").write_text("[1]"),
    "summary nested deep": lambda r: (r / "summary.json").write_text('{"a":' * 50000 + "1" + "}" * 50000),
    "status wrong types": lambda r: (r / "status.json").write_text('{"status": 5, "step": "x"}'),
    "guards wrong types": lambda r: ((r / "summary.json").unlink(), (r / "guards.json").write_text('{"findings": 1}')),
    "bad yaml": lambda r: (r / "config.yaml").write_text("a: [\n"),
    "yaml alias bomb": lambda r: (r / "config.yaml").write_text(
        "a: &a [x,x,x,x,x,x,x,x,x]\n" + "".join(f"{chr(98 + i)}: &{chr(98 + i)} [" + ",".join(
            [f"*{chr(97 + i)}"] * 9) + "]\n" for i in range(9))),
    "yaml python tag": lambda r: (r / "config.yaml").write_text("x: !!python/object/apply:os.system [echo pwned]\n"),
    "config not utf-8": lambda r: (r / "config.yaml").write_bytes(b"\xff\xfe\x00a: 1"),
}


def report_trials(base: Path, finished: Path, timeout: float) -> None:
    for name, damage in REPORT_CASES.items():
        run = base / f"report-{len(os.listdir(base))}"
        shutil.copytree(finished, run, symlinks=True)
        damage(run)
        code, err = overt("report", str(run), timeout=timeout)
        record(f"report: {name}", code, err, (0,))
    run = base / "report-out"
    shutil.copytree(finished, run)
    (base / "a-file").write_text("x")
    code, err = overt("report", str(run), "--out", str(base / "a-file" / "sub"), timeout=timeout)
    record("report: --out under a file", code, err, (2,))
    code, err = overt("report", str(base / "no-such-run"), timeout=timeout)
    record("report: missing run", code, err, (2,))


# -- doctor and recipes -------------------------------------------------------------------------

RECIPE = """
import torch
from torch import nn
from torch.utils.data import TensorDataset
import overt

def build(cfg):
    model = nn.Linear(4, 2)
    train = TensorDataset(torch.randn({n}, 4), torch.randint(0, 2, ({n},)))
    return overt.Recipe(model={model}, optimizer=torch.optim.SGD(model.parameters(), lr=0.1),
                        loss_fn=nn.CrossEntropyLoss(), train_data=train)
"""

BROKEN_RECIPES = {
    "syntax error": "def build(cfg)\n    return 1\n",
    "raises at import": "raise RuntimeError('no GPU here')\n",
    "imports a missing module": "import no_such_module_xyz\n",
    "no build function": "x = 1\n",
    "build raises": "def build(cfg):\n    raise ValueError('bad')\n",
    "build returns None": "def build(cfg):\n    return None\n",
    "sys.exit at import": "import sys\nsys.exit(0)\n",
    "not UTF-8": None,
}


def doctor_and_recipe_trials(base: Path, timeout: float) -> None:
    fast = ["overfit_steps=20", "throughput_steps=3", "resume_steps=1", "determinism_steps=2", "parity_steps=1",
            "batch_size=4", "--quiet"]
    for name, (n, model) in {"empty training set": (0, "model"), "model None": (16, "None")}.items():
        path = base / f"recipe-{name.replace(' ', '-')}.py"
        path.write_text(RECIPE.format(n=n, model=model))
        code, err = overt("doctor", str(path), f"out={base / ('doc-' + name.replace(' ', '-'))}", *fast,
                          timeout=timeout)
        record(f"doctor: {name}", code, err, (2,))
    good = base / "recipe-good.py"
    good.write_text(RECIPE.format(n=16, model="model"))
    (base / "doc-file").write_text("x")
    code, err = overt("doctor", str(good), f"out={base / 'doc-file'}", *fast, timeout=timeout)
    record("doctor: out= a file", code, err, (2,))
    for name, text in BROKEN_RECIPES.items():
        path = base / f"broken-{name.replace(' ', '-')}.py"
        if text is None:
            path.write_bytes(b"# \xff\xfe\ndef build(cfg):\n    pass\n")
        else:
            path.write_text(text)
        for command in ("train", "doctor"):
            args = [f"run_dir={base / ('run-' + path.stem + command)}", "progress=off"] if command == "train" else \
                [f"out={base / ('doc-' + path.stem)}", *fast]
            code, err = overt(command, str(path), *args, timeout=timeout)
            # doctor reports a recipe whose build() raises as a failed probe (exit 1), the rest are usage errors
            record(f"{command}: recipe {name}", code, err, (1, 2) if command == "doctor" else (2,))


# -- two processes on one run ---------------------------------------------------------------------

def two_process_trials(base: Path, trials: int, timeout: float) -> None:
    for i in range(trials):
        run = base / f"race-{i}"
        cmd = [sys.executable, "-m", "overt", "train", "digits", f"run_dir={run}", "epochs=1", "progress=off",
               "tensorboard=false"]
        procs = [subprocess.Popen(cmd, env=ENV, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                 for _ in range(2)]
        results = []
        for proc in procs:
            try:
                _, err = proc.communicate(timeout=timeout)
                results.append((proc.returncode, err))
            except subprocess.TimeoutExpired:
                proc.kill()
                results.append((None, ""))
        codes = sorted(c for c, _ in results if c is not None)
        err = "\n".join(e for _, e in results)
        lost = not (run / "model.safetensors").is_file() or not verified(run)
        # exactly one wins (0); the other is refused (2), or both finish one after the other
        ok = codes in ([0, 2], [0, 0]) and len(codes) == 2
        record(f"two processes on one run #{i + 1}", None if len(codes) < 2 else (0 if ok else codes[-1]), err,
               (0,), lost=lost)


# -- full disk ------------------------------------------------------------------------------------

def full_disk_trials(base: Path, sizes_k: list[int], timeout: float) -> None:
    if os.geteuid() != 0:
        print("skip full disk: mounting a tmpfs needs root", flush=True)
        return
    for size in sizes_k:
        mnt = base / f"tmpfs-{size}k"
        mnt.mkdir()
        if subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}k", "tmpfs", str(mnt)]).returncode != 0:
            print("skip full disk: mount failed", flush=True)
            return
        try:
            run = mnt / "run"
            code, err = overt("train", "digits", f"run_dir={run}", "epochs=3", "progress=off", "tensorboard=false",
                              "checkpoint_every_steps=5", "keep_last=3", timeout=timeout)
            good = verified(run) if run.is_dir() else set()
            listed = {p.name for p in (run / "checkpoints").iterdir()} if (run / "checkpoints").is_dir() else set()
            lost = bool({n for n in listed if n.startswith("step-")} - good)
            status = {}
            try:
                status = json.loads((run / "status.json").read_text())
            except Exception:
                pass
            still_running = status.get("status") == "running"
            note = "\nstatus.json still running" if still_running else ""
            record(f"full disk ({size} KiB tmpfs)", code, err + note, (0, 1, 2), lost=lost or still_running)
        finally:
            subprocess.run(["umount", str(mnt)])


# -- FSDP kill and resume ---------------------------------------------------------------------------

def fsdp_trials(base: Path, trials: int, timeout: float) -> None:
    for i in range(trials):
        run = base / f"fsdp-{i}"
        cmd = [sys.executable, "-m", "overt", "train", "digits", f"run_dir={run}", "epochs=3", "progress=off",
               "strategy=fsdp", "nproc=2", "checkpoint_every_steps=5", "checkpoint_background=false",
               "tensorboard=false"]
        proc = subprocess.Popen(cmd, env=ENV, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                start_new_session=True)
        deadline = time.monotonic() + timeout
        want = 1 + i % 3
        while time.monotonic() < deadline and proc.poll() is None:
            ckpts = run / "checkpoints"
            if ckpts.is_dir() and len([p for p in ckpts.iterdir() if p.name.startswith("step-")]) >= want:
                break
            time.sleep(0.05)
        before = verified(run)
        subprocess.run(["pkill", "-KILL", "-s", str(proc.pid)])  # the whole session: launcher and workers
        proc.communicate()
        code, err = overt("resume", str(run), timeout=timeout)
        summary = {}
        try:
            summary = json.loads((run / "summary.json").read_text())
        except Exception:
            pass
        lost = not before <= (verified(run) | before) or summary.get("epochs") != 3
        record(f"FSDP SIGKILL after {want} checkpoint(s), resume #{i + 1}", code, err, (0,), lost=lost)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--timeout", type=float, default=300, help="seconds before a command counts as hung")
    parser.add_argument("--races", type=int, default=3, help="two-processes-on-one-run trials")
    parser.add_argument("--disk-sizes", default="120,250,400,800", help="tmpfs sizes in KiB for the full-disk trials")
    parser.add_argument("--fsdp", type=int, default=0, metavar="N", help="FSDP kill/resume trials (slow)")
    parser.add_argument("--only", default="", help="comma-separated: report,doctor,race,disk,fsdp")
    args = parser.parse_args()
    only = set(filter(None, args.only.split(",")))
    sys.path.insert(0, str(REPO))
    with tempfile.TemporaryDirectory(prefix="overt campaign ") as tmp:
        base = Path(tmp)
        if not only or "report" in only:
            finished = base / "finished"
            train(finished, "checkpoint=false", timeout=args.timeout)
            report_trials(base, finished, args.timeout)
        if not only or "doctor" in only:
            doctor_and_recipe_trials(base, args.timeout)
        if not only or "race" in only:
            two_process_trials(base, args.races, args.timeout)
        if not only or "disk" in only:
            full_disk_trials(base, [int(s) for s in args.disk_sizes.split(",") if s], args.timeout)
        if args.fsdp and (not only or "fsdp" in only):
            fsdp_trials(base, args.fsdp, args.timeout)
    print("tally: " + ", ".join(f"{k} {v}" for k, v in TALLY.items()), flush=True)
    return 0 if TALLY["survived"] == TALLY["tried"] else 1


if __name__ == "__main__":
    sys.exit(main())
