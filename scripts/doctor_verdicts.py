"""Record, and compare, the doctor's per-probe verdicts and summaries: on every built-in recipe
(``overt doctor RECIPE``, small settings) and on the planted-bug setups of ``tests/doctor``.

    python scripts/doctor_verdicts.py record OUT.json        # with the code to record on the path
    python scripts/doctor_verdicts.py compare BEFORE.json AFTER.json

``record`` runs every case and writes ``{case: {probe: [verdict, summary]}}``; ``compare``
prints, per case, each probe whose verdict differs (always) and whose summary differs once
times, rates and memory are masked (they vary from run to run).  Exit 1 when a verdict differs.
Data comes from ``../shared/data`` beside the checkout; a recipe whose data is missing is left out.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DATA = REPO.parent / "shared" / "data"
if not DATA.exists():  # a worktree beside the main checkout
    DATA = Path("/work/shared/data")

#: small settings: the step counts decide, not the machine's speed
SMALL = ["overfit_steps=100", "overfit_time_s=600", "resume_steps=2", "determinism_steps=2", "parity_steps=2",
         "throughput_steps=10", "throughput_time_s=1", "lr_find_steps=30"]


def recipe_cases(tmp: Path) -> dict[str, list[str]]:
    """(case name -> ``overt doctor`` arguments) for the built-in recipes."""
    from overt.recipes.house_prices import write_synthetic_csv

    write_synthetic_csv(tmp / "houses.csv", rows=300, seed=0)
    cases = {
        "digits": ["digits", "--lr-find"],
        "digits accumulate=4 clip=0.5 bf16": ["digits", "accumulate=4", "clip_grad_norm=0.5", "precision=bf16"],
        "tiny": ["tiny"],
        "house-prices": ["house-prices", f"csv={tmp / 'houses.csv'}"],
        "resnet": ["resnet", "limit=256"],
        "finetune": ["finetune", "limit=256"],
    }
    if (DATA / "sentiment-sentences").exists():
        cases["sentiment"] = ["sentiment", f"data_dir={DATA / 'sentiment-sentences'}"]
    if (DATA / "mnist-t10k").exists():
        cases["mnist"] = ["mnist", f"data_dir={DATA / 'mnist-t10k'}", "limit=1024"]
    if (DATA / "tinyshakespeare").exists():
        cases["char-rnn"] = ["char-rnn", f"text={DATA / 'tinyshakespeare' / 'input.txt'}", "limit_chars=20000"]
    return cases


def run_recipe(args: list[str], out: Path) -> dict[str, list[str]]:
    cmd = [sys.executable, "-m", "overt", "doctor", *args, *SMALL, f"out={out}", "--quiet"]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO)
    report = out / "readiness.json"
    if not report.exists():
        return {"(command)": [f"exit {proc.returncode}", proc.stderr.strip().splitlines()[-1:][0] if proc.stderr
                              else ""]}
    return {p["name"]: [p["verdict"], p["summary"]] for p in json.loads(report.read_text())["probes"]}


def planted_cases() -> dict[str, dict[str, list[str]]]:
    """The doctor on the clean digits setup and on each planted-bug twin of tests/doctor/helpers."""
    import overt
    from tests.doctor import helpers as h

    train, val = h.digits()
    fast = {**h.FAST, "progress": False}

    def doctor(model=None, lr=3e-3, data=None, **kw):
        model, opt, loss = h.setup(model, lr=lr)
        r = overt.doctor(model, opt, loss, data if data is not None else train, val, **{**fast, **kw})
        return {p.name: [p.verdict.value, p.summary] for p in r.probes}

    cases = {
        "clean": lambda: doctor(),
        "clean accumulate=4": lambda: doctor(accumulate=4),
        "clean clip_grad_norm=0.01": lambda: doctor(clip_grad_norm=0.01),
        "clean precision=bf16": lambda: doctor(precision="bf16"),
        "lr=0": lambda: doctor(lr=0.0),
        "lr=10": lambda: doctor(lr=10.0),
        "SoftmaxMLP": lambda: doctor(h.SoftmaxMLP()),
        "PlainListMLP": lambda: doctor(h.PlainListMLP()),
        "UnusedLayer": lambda: doctor(h.UnusedLayer()),
        "Detached": lambda: doctor(h.Detached()),
        "NanGrad": lambda: doctor(h.NanGrad()),
        "FunctionalDropout": lambda: doctor(h.FunctionalDropout()),
        "UnbufferedState": lambda: doctor(h.UnbufferedState()),
        "OffsetInputs bf16": lambda: doctor(h.OffsetInputs(), precision="bf16"),
        "NoisyDataset": lambda: doctor(data=h.NoisyDataset(train)),
        "MSELoss": lambda: _mse(train, val, fast),
    }
    return {name: fn() for name, fn in cases.items()}


def _mse(train, val, fast):
    from torch import nn

    import overt
    from tests.doctor import helpers as h

    model, opt, _ = h.setup()
    r = overt.doctor(model, opt, nn.MSELoss(), train, val, **fast)
    return {p.name: [p.verdict.value, p.summary] for p in r.probes}


def record(path: Path) -> None:
    sys.path.insert(0, str(REPO))
    results: dict[str, dict[str, list[str]]] = {}
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        for name, args in recipe_cases(tmp).items():
            results[f"recipe {name}"] = run_recipe(args, tmp / name.replace(" ", "_"))
            print(f"recorded recipe {name}", file=sys.stderr, flush=True)
    for name, verdicts in planted_cases().items():
        results[f"planted {name}"] = verdicts
    path.write_text(json.dumps(results, indent=1))
    print(f"wrote {path}", file=sys.stderr)


#: numbers that change between runs: times, rates, memory
_VARYING = re.compile(r"[\d.,]+ ?(s|ms|MiB|MB|samples/s|GFLOP/s)\b|x[\d.]+ faster|[\d.]+x faster")


def mask(summary: str) -> str:
    return _VARYING.sub("#", summary)


def compare(before: dict, after: dict) -> int:
    verdict_changes = 0
    for case in sorted(set(before) | set(after)):
        a, b = before.get(case, {}), after.get(case, {})
        lines = []
        for probe in list(dict.fromkeys([*a, *b])):
            va, vb = a.get(probe, ["(absent)", ""]), b.get(probe, ["(absent)", ""])
            if va[0] != vb[0]:
                verdict_changes += 1
                lines.append(f"  {probe}: VERDICT {va[0]} -> {vb[0]}\n    before: {va[1]}\n    after:  {vb[1]}")
            elif mask(va[1]) != mask(vb[1]):
                lines.append(f"  {probe}: summary\n    before: {va[1]}\n    after:  {vb[1]}")
        print(f"{case}: {'same' if not lines else ''}")
        for line in lines:
            print(line)
    print(f"\n{verdict_changes} verdict change(s)")
    return 1 if verdict_changes else 0


def main(argv: list[str]) -> int:
    if len(argv) == 2 and argv[0] == "record":
        record(Path(argv[1]))
        return 0
    if len(argv) == 3 and argv[0] == "compare":
        return compare(json.loads(Path(argv[1]).read_text()), json.loads(Path(argv[2]).read_text()))
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
