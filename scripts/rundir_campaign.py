"""An adversarial campaign on the run directory (issue 34, items 10-13): planted links, run names
that leave the runs folder, folders overt did not write, and the recipe trust file.

Each trial runs real ``python -m overt ...`` commands in subprocesses (the tiny recipe, CPU) with
``--code PATH`` as the ``overt`` they import (default: this checkout), beside a folder
``elsewhere/`` that holds one precious file.  A trial is classified:

- clean: a clear overt error (exit 2, no traceback) or success, and nothing below;
- wrote outside: ``elsewhere/`` changed (a file written, replaced or added through a link or name);
- advised rm: the message suggests ``rm -r`` of a folder overt did not write;
- traceback: a Python traceback on stderr;
- trust lost: a damaged trust file was overwritten, or a recipe from inside a run directory was
  recorded as trusted (or imported without naming its file and hash).

Run from the repository root::

    python scripts/rundir_campaign.py                      # this checkout
    python scripts/rundir_campaign.py --code /tmp/base     # another copy of overt (e.g. main before the fix)
    python scripts/rundir_campaign.py --only names         # one surface (links, names, trust)

Prints one line per trial and the tally per surface; exits 1 if any trial was not clean.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Callable

REPO = Path(__file__).resolve().parents[1]
PRECIOUS = "precious\n"
MINE = "from overt.recipes import tiny\ndefaults = dict(tiny.defaults, epochs=1)\nbuild = tiny.build\n" \
       "build_model = tiny.build_model\n"


class Campaign:
    def __init__(self, code: Path, work: Path, timeout: float):
        self.work, self.timeout = work, timeout
        self.env = {**os.environ, "PYTHONPATH": str(code), "OMP_NUM_THREADS": "1",
                    "OVERT_TRUST_FILE": str(work / "state" / "trusted-recipes.json")}
        self.tally: dict[str, dict[str, int]] = {}
        self.n = 0

    def overt(self, *args: str, cwd: Path | None = None) -> tuple[int | None, str]:
        try:
            proc = subprocess.run([sys.executable, "-m", "overt", *args], env=self.env, cwd=cwd or self.work,
                                  capture_output=True, text=True, timeout=self.timeout)
        except subprocess.TimeoutExpired:
            return None, "(hang)"
        return proc.returncode, proc.stderr

    def fresh(self) -> tuple[Path, Path, Path]:
        """(trial folder, elsewhere/, the precious file in it)."""
        self.n += 1
        trial = self.work / f"trial-{self.n:03d}"
        elsewhere = trial / "elsewhere"
        elsewhere.mkdir(parents=True)
        (elsewhere / "victim.txt").write_text(PRECIOUS)
        return trial, elsewhere, elsewhere / "victim.txt"

    def record(self, surface: str, what: str, code: int | None, err: str, elsewhere: Path,
               extra: str | None = None) -> str:
        names = sorted(p.name for p in elsewhere.rglob("*"))
        victim = elsewhere / "victim.txt"
        if names != ["victim.txt"] or victim.is_symlink() or victim.read_bytes() != PRECIOUS.encode():
            verdict = "wrote outside"
        elif extra:
            verdict = extra
        elif "Traceback" in err:
            verdict = "traceback"
        elif code is None:
            verdict = "hang"
        else:
            verdict = "clean"
        row = self.tally.setdefault(surface, {})
        row["tried"] = row.get("tried", 0) + 1
        row[verdict] = row.get(verdict, 0) + 1
        last = err.strip().splitlines()[-1][:110] if err.strip() else ""
        print(f"{surface:8} {what:48} exit {code}  {verdict:14} {last}", flush=True)
        return verdict


def links(c: Campaign, base: Path) -> None:
    def copy(trial: Path) -> Path:
        run = trial / "run"
        shutil.copytree(base, run, symlinks=True)
        return run

    def plant_dir(name: str) -> Callable[[Path, Path], None]:
        def plant(run: Path, elsewhere: Path) -> None:
            shutil.rmtree(run / name, ignore_errors=True)
            (run / name).parent.mkdir(parents=True, exist_ok=True)
            (run / name).symlink_to(elsewhere, target_is_directory=True)
        return plant

    def plant_file(name: str) -> Callable[[Path, Path], None]:
        def plant(run: Path, elsewhere: Path) -> None:
            (run / name).parent.mkdir(parents=True, exist_ok=True)
            if (run / name).exists():
                (run / name).unlink()
            (run / name).symlink_to(elsewhere / "victim.txt")
        return plant

    def plant_guessed_temporaries(run: Path, elsewhere: Path) -> None:
        """``.NAME.tmp-<pid>`` for the next 400 pids, for every file a resume rewrites."""
        try:
            last = int(Path("/proc/sys/kernel/ns_last_pid").read_text())
        except OSError:
            last = os.getpid()
        for name in ("status.json", "config.yaml", "summary.json", "model.safetensors", "recipe_meta.json",
                     "recipe_source.json", "metrics.jsonl"):
            for pid in range(last + 1, last + 401):
                (run / f".{name}.tmp-{pid}").symlink_to(elsewhere / "victim.txt")

    report = ["report"]
    resume = ["resume", "{run}", "epochs=3", "progress=off", "tensorboard=true", "plots=true", "guards=false"]
    trials = [
        ("report/ a link", plant_dir("report"), report),
        ("report/report.md a link", plant_file("report/report.md"), report),
        ("report/overview.png a link", plant_file("report/overview.png"), report),
        ("report/loss.png a link", plant_file("report/loss.png"), report),
        ("report/metrics.csv a link (--csv)", plant_file("report/metrics.csv"), report + ["--csv"]),
        ("model.onnx a link", plant_file("model.onnx"), ["export", "{run}"]),
        ("model.pt2 a link", plant_file("model.pt2"), ["export", "{run}", "--format", "pt2"]),
        ("model.serving.json a link", plant_file("model.serving.json"), ["export", "{run}", "--format", "pt2"]),
        ("tb/ a link (resume)", plant_dir("tb"), resume),
        ("plots/ a link (resume)", plant_dir("plots"), resume),
        ("metrics.jsonl a link (resume)", plant_file("metrics.jsonl"), resume),
        ("status.json a link (resume)", plant_file("status.json"), resume),
        ("guards.json a link (resume guards)", plant_file("guards.json"), resume[:-1] + ["guards=true"]),
        ("400 guessed .NAME.tmp-<pid> links (resume)", plant_guessed_temporaries, resume),
    ]
    for what, plant, args in trials:
        trial, elsewhere, _ = c.fresh()
        run = copy(trial)
        plant(run, elsewhere)
        argv = (["report", str(run), *args[1:]] if args[0] == "report"
                else [a.replace("{run}", str(run)) for a in args])
        code, err = c.overt(*argv)
        c.record("links", what, code, err, elsewhere)


def names(c: Campaign) -> None:
    for name in ("../../x", "..", ".", "a/b", "/abs/x", "x/../../y"):
        trial, elsewhere, _ = c.fresh()
        runs = trial / "a" / "b" / "runs"  # the runs folder: a run belongs in a folder of its own inside it
        runs.mkdir(parents=True)
        code, err = c.overt("train", "tiny", f"runs_root={runs}", f"name={name.replace('/abs', str(trial))}",
                            "epochs=1", "progress=off", cwd=trial)
        strays = [p for p in trial.rglob("*") if elsewhere not in (p, *p.parents) and runs not in (p, *p.parents)
                  and p not in (trial / "a", trial / "a" / "b")]
        run_files = [p for p in runs.iterdir() if p.is_file()]  # a run written into the runs folder itself
        outside = "wrote outside" if strays or run_files else None
        c.record("names", f"name={name}", code, err, elsewhere,
                 outside or ("advised rm" if "rm -r" in err else None))
    for where in ("home", "cwd", "root"):
        trial, elsewhere, _ = c.fresh()
        home = elsewhere  # a folder of the user's files
        (home / "config.yaml").write_text("recipe: tiny\n")
        (home / "status.json").write_text("{}\n")
        target = {"home": str(home), "cwd": ".", "root": "/"}[where]
        code, err = c.overt("train", "tiny", f"run_dir={target}", "epochs=1", "progress=off", cwd=home)
        (home / "config.yaml").unlink()
        (home / "status.json").unlink()
        c.record("names", f"run_dir={target if where != 'home' else '$HOME'}", code, err, elsewhere,
                 "advised rm" if "rm -r" in err else None)
        if where != "root":
            (home / "config.yaml").write_text("recipe: tiny\n")
            code, err = c.overt("resume", target, cwd=home)
            (home / "config.yaml").unlink()
            for leftover in (home / ".lock",):
                leftover.unlink(missing_ok=True)
            c.record("names", f"resume {target if where != 'home' else '$HOME'}", code, err, elsewhere,
                     "advised rm" if "rm -r" in err else None)


def trust(c: Campaign, base: Path) -> None:
    store = Path(c.env["OVERT_TRUST_FILE"])
    for what, damage in (("trust file not JSON", b"not json {"), ("trust file nested 200k deep", b"[" * 200000),
                         ("trust file a JSON list", b"[1, 2]"), ("trust file not UTF-8", b"\xff\xfe{"),
                         ("trust file a folder", None)):
        trial, elsewhere, _ = c.fresh()
        shutil.rmtree(store.parent, ignore_errors=True)
        store.parent.mkdir(parents=True)
        if damage is None:
            store.mkdir()
        else:
            store.write_bytes(damage)
        recipe = trial / "mine.py"
        recipe.write_text(MINE)
        code, err = c.overt("train", str(recipe), f"run_dir={trial / 'run'}", "progress=off", "guards=false")
        kept = store.is_dir() if damage is None else store.read_bytes() == damage
        said = "trust file" in err
        c.record("trust", what, code, err, elsewhere, None if kept and said else "trust lost")
    shutil.rmtree(store.parent, ignore_errors=True)
    # a run directory from elsewhere holding its recipe: named before the import, never trusted
    trial, elsewhere, _ = c.fresh()
    downloaded = trial / "downloaded"
    shutil.copytree(base, downloaded)
    recipe = downloaded / "recipe.py"
    recipe.write_text(MINE)
    (downloaded / "config.yaml").write_text(f"recipe: {recipe}\nepochs: 1\n")
    code, err = c.overt("train", str(downloaded / "config.yaml"), f"run_dir={trial / 'mine'}", "progress=off",
                        "guards=false")
    digest = hashlib.sha256(recipe.read_bytes()).hexdigest()
    trusted = store.is_file() and digest in store.read_text()
    named = str(recipe) in err and digest in err
    c.record("trust", "train RUN/config.yaml (recipe inside the run)", code, err, elsewhere,
             "trust lost" if trusted or not named else None)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--code", default=str(REPO), help="the folder whose overt/ is imported (default: this one)")
    parser.add_argument("--timeout", type=float, default=300)
    parser.add_argument("--only", default="links,names,trust", help="surfaces to try, comma-separated")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="overt-rundir-") as tmp:
        c = Campaign(Path(args.code), Path(tmp), args.timeout)
        base = Path(tmp) / "base"
        code, err = c.overt("train", "tiny", f"run_dir={base}", "epochs=2", "progress=off", "tensorboard=true",
                            "guards=false")
        assert code == 0, err
        only = args.only.split(",")
        if "links" in only:
            links(c, base)
        if "names" in only:
            names(c)
        if "trust" in only:
            trust(c, base)
    print()
    print("| surface | tried | clean | wrote outside | advised rm | trust lost | tracebacks |")
    print("|---|---|---|---|---|---|---|")
    for surface, row in c.tally.items():
        print(f"| {surface} | {row['tried']} | {row.get('clean', 0)} | {row.get('wrote outside', 0)} | "
              f"{row.get('advised rm', 0)} | {row.get('trust lost', 0)} | {row.get('traceback', 0)} |")
    return 0 if all(row.get("clean", 0) == row["tried"] for row in c.tally.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
