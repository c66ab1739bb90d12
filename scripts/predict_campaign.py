"""Adversarial trials of `overt predict` / `overt export` and their run files (issue 34 items 6-9, 14, 17;
issue 35 items 2 and 7), each a real `python -m overt ...` command on a real digits run.

Each trial is classified: ``clean`` (the right answers, one per input row in order, or exit 2 with an
overt error and no traceback), ``traceback``, ``hang`` (killed at the timeout), ``silently wrong`` (exit
0 with answers that are not one per row in order, or a wrong class), ``noisy`` (a right result, but
warnings that are not overt's before its lines).  Prints the tally per surface as a Markdown table.

    python scripts/predict_campaign.py            # about 45 trials, 2-4 minutes on 2 busy cores
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any, Callable

REPO = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}


def overt(*args: str, stdin: str | None = None, timeout: float = 120) -> tuple[int | None, str, str]:
    try:
        proc = subprocess.run([sys.executable, "-m", "overt", *args], input=stdin, capture_output=True, text=True,
                              timeout=timeout, env=ENV, cwd=REPO)
    except subprocess.TimeoutExpired:
        return None, "", ""
    return proc.returncode, proc.stdout, proc.stderr


def python(code: str, timeout: float = 120) -> tuple[int | None, str, str]:
    try:
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout,
                              env=ENV, cwd=REPO)
    except subprocess.TimeoutExpired:
        return None, "", ""
    return proc.returncode, proc.stdout, proc.stderr


def verdict(result: tuple[int | None, str, str], expected: list[int] | None, names: str = "") -> str:
    """``expected``: the classes of the right answers; None: the right outcome is an overt error (exit 2)
    whose message contains ``names`` (the damaged file: an error for another reason does not count)."""
    code, out, err = result
    if code is None:
        return "hang"
    if "Traceback" in err:
        return "traceback"
    if code == 0 and expected is not None:
        got = [json.loads(line).get("class") for line in out.splitlines()]
        if got != expected:
            return "silently wrong"
        return "noisy" if "Warning" in err or "W1" in err else "clean"
    if code == 0 and expected is None:
        return "silently wrong"  # it should have refused
    if code in (1, 2) and "error" in err:
        return "clean" if names in err else "silently wrong"  # refused, but not for the damage planted
    return "traceback"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder")
    args = parser.parse_args()
    import numpy as np
    from sklearn.datasets import load_digits

    tmp = Path(tempfile.mkdtemp(prefix="predict-campaign-"))
    base = tmp / "digits"
    code, _, err = overt("train", "digits", f"run_dir={base}", "epochs=3", "progress=off", "tensorboard=false",
                         "keep_last=10", timeout=600)
    assert code == 0, err
    data = load_digits().data[:6]
    rows = "".join(",".join(f"{v:g}" for v in r) + "\n" for r in data)
    answers = overt("predict", str(base), "-", "--format", "csv", stdin=rows)[1]
    ref = [json.loads(line)["class"] for line in answers.splitlines()]
    assert len(ref) == 6
    (tmp / "rows.csv").write_text(rows)
    tally: dict[str, Counter] = defaultdict(Counter)
    notes: list[str] = []

    def trial(surface: str, name: str, run: Callable[[], tuple[int | None, str, str]], expected: list[int] | None,
              names: str = ""):
        outcome = verdict(run(), expected, names)
        tally[surface][outcome] += 1
        notes.append(f"{surface} | {name} | {outcome}")

    def csv(name: str, text: str, binary: bool = False) -> str:
        path = tmp / name
        path.write_bytes(text) if binary else path.write_text(text)  # type: ignore[arg-type]
        return str(path)

    def copy(name: str, damage: Callable[[Path], Any]) -> str:
        run = tmp / name
        shutil.copytree(base, run)
        damage(run)
        return str(run)

    # -- predict inputs -------------------------------------------------------------------------------------
    s = "predict inputs and scale"
    lines = rows.splitlines()
    header = ",".join(str(i) for i in range(64))
    floats = "".join(",".join(f"{v:.1f}" for v in r) + "\n" for r in data)
    cases: list[tuple[str, str, list[int] | None, tuple[str, ...]]] = [
        ("plain rows", rows, ref, ()),
        ("pandas header 0..63", header + "\n" + rows, ref, ()),
        ("pandas header, float cells", header + "\n" + floats, ref, ()),
        ("pandas index=True", "," + header + "\n" + "".join(f"{i}," + l + "\n" for i, l in enumerate(lines)), None,
         ()),
        ("named header pixel_i", ",".join(f"pixel_{i}" for i in range(64)) + "\n" + rows, None, ()),
        ("a record of empty cells", "\n".join(lines[:3] + ["," * 63] + lines[3:]) + "\n", None, ()),
        ("header only", header + "\n", None, ()),
        ("empty file", "", None, ()),
        ("blank lines between rows", "\n\n".join(lines) + "\n", ref, ()),
        ("CRLF line endings", "\r\n".join(lines) + "\r\n", ref, ()),
        ("quoted numbers", "".join(",".join(f'"{v:g}"' for v in r) + "\n" for r in data), ref, ()),
        ("semicolons", rows.replace(",", ";"), None, ()),
        ("a NaN cell", rows.replace("0", "nan", 1), None, ()),
        ("one row short", "\n".join(lines[:2] + [lines[2].rsplit(",", 1)[0]] + lines[3:]) + "\n", None, ()),
        ("CSV in a .txt file", rows, None, ("--format-txt",)),
        ("CSV in a .txt file with --format csv", rows, ref, ("--format-txt", "--format", "csv")),
    ]
    for name, text, expected, extra in cases:
        suffix = ".txt" if "--format-txt" in extra else ".csv"
        path = csv(name.replace(" ", "_").replace(".", "") + suffix, text)
        options = [e for e in extra if e != "--format-txt"]
        trial(s, name, lambda p=path, o=options: overt("predict", str(base), p, *o), expected)
    trial(s, "CSV piped without --format", lambda: overt("predict", str(base), stdin=rows), ref)
    np.save(tmp / "rows.npy", data)
    trial(s, ".npy rows", lambda: overt("predict", str(base), str(tmp / "rows.npy")), ref)
    big = np.tile(data, (2000, 1))
    np.savetxt(tmp / "big.csv", big, fmt="%g", delimiter=",")
    trial(s, "12,000 rows (three chunks)", lambda: overt("predict", str(base), str(tmp / "big.csv")), ref * 2000)
    bad = (rows * 2000).splitlines()
    bad[10000] = bad[10000].replace("0", "x", 1)
    path = csv("late-bad.csv", "\n".join(bad) + "\n")
    trial(s, "a bad cell on line 10001", lambda: overt("predict", str(base), path), None)

    # -- tampered run files ---------------------------------------------------------------------------------
    s = "tampered config.yaml / inputs.json / serving.json"

    def edit_json(name: str, change: Callable[[Any], Any]) -> Callable[[Path], None]:
        def damage(run: Path) -> None:
            path = run / name
            value = change(json.loads(path.read_text()))
            path.write_text(value if isinstance(value, str) else json.dumps(value))
        return damage

    def edit_config(line: str, new: str) -> Callable[[Path], None]:
        def damage(run: Path) -> None:
            path = run / "config.yaml"
            path.write_text(path.read_text().replace(line, new))
        return damage

    prep = lambda r, **kw: {**r, "preprocessing": {**r["preprocessing"], **kw}}  # noqa: E731
    damages: list[tuple[str, Callable[[Path], Any]]] = [
        ("inputs.json cut short", edit_json("inputs.json", lambda r: json.dumps(r)[:100])),
        ("inputs.json scale a string", edit_json("inputs.json", lambda r: prep(r, scale="16"))),
        ("inputs.json scale 0", edit_json("inputs.json", lambda r: prep(r, scale=0))),
        ("inputs.json width -1", edit_json("inputs.json", lambda r: prep(r, width=-1))),
        ("inputs.json width 2**40", edit_json("inputs.json", lambda r: prep(r, width=2 ** 40))),
        ("inputs.json task unknown", edit_json("inputs.json", lambda r: prep(r, task="magic"))),
        ("inputs.json labels a number", edit_json("inputs.json", lambda r: prep(r, labels=7))),
        ("inputs.json stats cut to 5 features", edit_json("inputs.json", lambda r: {
            **r, "stats": {**r["stats"], "mean": r["stats"]["mean"][:5]}})),
        ("inputs.json stats a number", edit_json("inputs.json", lambda r: {**r, "stats": 3})),
        ("inputs.json token pattern (a|a)*$", edit_json("inputs.json", lambda r: {
            **r, "preprocessing": {"tokens": {"vocab": ["a"], "pattern": "(a|a)*$"}}})),
        ("inputs.json a list", edit_json("inputs.json", lambda r: [1, 2])),
        ("inputs.json deleted", lambda run: (run / "inputs.json").unlink()),
        ("config.yaml hidden: 200000000", edit_config("hidden: 128", "hidden: 200000000")),
        ("config.yaml hidden: -5", edit_config("hidden: 128", "hidden: -5")),
        ("config.yaml hidden: wide", edit_config("hidden: 128", "hidden: wide")),
        ("config.yaml recipe: a list", edit_config("recipe: digits", "recipe: [1, 2]")),
        ("summary.json weights_sha256 a number", edit_json("summary.json", lambda r: {**r, "weights_sha256": 5})),
    ]
    for name, damage in damages:
        run = copy(name.replace(" ", "_").replace("*", "").replace("|", "").replace("$", "").replace(":", ""),
                   damage)
        damaged = "recipe module" if "recipe:" in name else name.split()[0]  # what the error must name
        trial(s, name, lambda r=run: overt("predict", r, str(tmp / "rows.csv"), timeout=60), None, damaged)

    # -- predict/export --checkpoint ------------------------------------------------------------------------
    s = "predict / export --checkpoint"
    steps = sorted((base / "checkpoints").glob("step-*"))

    def flip(path: Path) -> None:
        data = bytearray(path.read_bytes())
        data[-7] ^= 0x10
        path.write_bytes(bytes(data))

    def checked(name: str, run: str, which: str, must_say: str) -> None:
        code, out, err = overt("predict", run, str(tmp / "rows.csv"), "--checkpoint", which)
        outcome = verdict((code, out, err), None if code else [json.loads(x)["class"] for x in out.splitlines()])
        if code == 0 and must_say not in err:
            outcome = "silently wrong"  # a fallback that was not said
        tally[s][outcome] += 1
        notes.append(f"{s} | {name} | {outcome}")

    checked("best: the newest checkpoint's manifest missing", copy(
        "no-manifest", lambda r: (r / "checkpoints" / steps[-1].name / "manifest.json").unlink()), "best",
        "left out of the choice of the best")
    checked("last: the newest checkpoint's manifest missing", copy(
        "no-manifest-last", lambda r: (r / "checkpoints" / steps[-1].name / "manifest.json").unlink()), "last",
        "unusable")
    checked("best: the best checkpoint's weights flipped", copy(
        "flipped-best", lambda r: flip(r / "checkpoints" / steps[-1].name / "model.safetensors")), "best",
        "unusable")
    checked("last: the newest checkpoint's weights flipped", copy(
        "flipped-last", lambda r: flip(r / "checkpoints" / steps[-1].name / "model.safetensors")), "last",
        "unusable")
    checked("final weights flipped, --checkpoint last", copy(
        "flipped-final", lambda r: flip(r / "model.safetensors")), "last", "weights from")
    trial(s, "final weights flipped, --checkpoint final", lambda: overt(
        "predict", copy("flipped-final-2", lambda r: flip(r / "model.safetensors")), str(tmp / "rows.csv")), None,
        "model.safetensors")

    # -- export and serving ---------------------------------------------------------------------------------
    s = "export and serving"
    run = copy("exported", lambda r: None)
    result = overt("export", run, "--format", "onnx", timeout=300)
    noisy = "Warning" in result[2] or "torchvision" in result[2]
    tally[s]["noisy" if noisy else "clean" if result[0] == 0 else verdict(result, None)] += 1
    notes.append(f"{s} | export onnx: warnings before overt's lines | {'noisy' if noisy else 'clean'}")
    overt("export", run, "--format", "pt2", timeout=300)
    load = ("from overt.serving import load_exported\nfrom sklearn.datasets import load_digits\n"
            "import json\nprint(json.dumps(load_exported({!r}).predict(load_digits().data[:6])))")
    for model in ("model.onnx", "model.pt2"):
        code, out, err = python(load.format(str(Path(run) / model)))
        good = code == 0 and [a["class"] for a in json.loads(out)] == ref
        tally[s]["clean" if good else "traceback" if "Traceback" in err else "silently wrong"] += 1
        notes.append(f"{s} | onnx then pt2, load {model} | {'clean' if good else 'broken'}")
    trial(s, "--out into a missing folder", lambda: overt("export", str(base), "--out", str(tmp / "no/such/m.onnx")),
          None)
    for name, change in [("not JSON", lambda t: "{"), ("another model's", lambda t: json.dumps(
            {**json.loads(t), "model": "model.pt2", "format": "pt2"})),
            ("scale of 2 values", lambda t: json.dumps({**json.loads(t), "preprocessing": {
                **json.loads(t)["preprocessing"], "scale": [1, 2]}})),
            ("record stats a number", lambda t: json.dumps({**json.loads(t), "inputs": {"stats": 3}}))]:
        folder = tmp / f"serving-{len(notes)}"
        folder.mkdir()
        # an older overt wrote model.serving.json (shared by both formats)
        served = "model.onnx.serving.json" if (Path(run) / "model.onnx.serving.json").exists() else "model.serving.json"
        for f in ("model.onnx", served):
            shutil.copy(Path(run) / f, folder / f)
        spec = folder / served
        spec.write_text(change(spec.read_text()))
        code, out, err = python("from overt.errors import OvertError\nfrom overt.serving import load_exported\n"
                                f"try:\n    load_exported({str(folder / 'model.onnx')!r})\n"
                                "except OvertError as e:\n    print('overt error:', e); raise SystemExit(2)\n")
        outcome = "clean" if code == 2 else "traceback" if "Traceback" in err else "silently wrong"
        tally[s][outcome] += 1
        notes.append(f"{s} | load_exported: serving JSON {name} | {outcome}")

    print("| surface | tried | clean / clear error | raw tracebacks | hangs | silently wrong | noisy |")
    print("|---|---|---|---|---|---|---|")
    for surface, counts in tally.items():
        print(f"| {surface} | {sum(counts.values())} | {counts['clean']} | {counts['traceback']} | "
              f"{counts['hang']} | {counts['silently wrong']} | {counts['noisy']} |")
    print()
    for note in notes:
        if not note.endswith("clean"):
            print("not clean:", note)
    if not args.keep:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
