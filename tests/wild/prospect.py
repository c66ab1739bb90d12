"""Which generic runtime observable tells a wild case's buggy script from its twin? (issue 33, session 51)

Step 1 (``run``): for each case, the buggy script at seed 0 and its twin at seeds 0 and 1 run under
``tests/wild/prospect_child.py`` (generic observers: module outputs, optimizer steps, the loss, probes on
checked steps), each writing ``<case>_<b|t><seed>.json`` into a folder.

Step 2 (``table``): each run becomes a vector of scalar observables; for each observable and case we ask
(a) does the bug differ from the twin beyond run-to-run noise (twin seed 0 vs seed 1), and (b) does the
bug's value lie outside the range that every twin run keeps (a bound a guard could check without a twin).

    PYTHONPATH=$PWD python -m tests.wild.prospect run DIR w347 w337 ...   (serial; see docs/wild.md)
    PYTHONPATH=$PWD python -m tests.wild.prospect table DIR

``python -m tests.wild.prospect_child s.py out.json 0 --edit`` adds the evaluation-boundary probe (the first
evaluation call of a model sharing parameters with the trained one, against the weights the last step left).
"""

from __future__ import annotations

import json
import math
import os
import statistics
import subprocess
import sys
from pathlib import Path

#: observable -> which side is suspect ("hi": large values, "lo": small ones, "abs": far from 0)
OBS = {
    "loss_ratio": "hi",        # late loss / early loss
    "upd_rel_med": "lo",       # median over params of |update| / |weight|
    "upd_rel_max": "hi",
    "grad_none_frac": "hi",    # share of optimizer elements with no or zero gradient
    "stuck_frac": "hi",        # share with a gradient but no update
    "grad_rel_spread": "hi",   # log10 max/min over params of |grad|/|weight|
    "grad_cos": "lo",          # gradient direction agreement across consecutive steps
    "mode_skew": "hi",         # same input, train vs eval mode: max over modules |mean diff| / train std
    "mode_std": "hi",          # same input: max over modules |log std ratio|
    "mode_skew_top": "hi",     # same, for the model's output only
    "mode_ent": "abs",         # same input: output entropy eval - train (normalised)
    "couple_eval": "hi",       # eval mode: change of other samples' outputs when sample 0 is replaced
    "couple_train": "hi",
    "nat_skew": "hi",          # evaluation forwards vs late training forwards: max over modules, mean diff / std
    "dead_max": "hi",          # max over modules of the fraction of exact zeros (late training)
    "in_skew": "hi",           # model input, evaluation vs training: mean diff / std
    "ent_eval": "lo",          # output entropy (normalised) in evaluation
    "ent_gap": "abs",          # output entropy evaluation - late training
}


def _case_module(short: str):
    from tests.wild import harness

    for m in harness.cases():
        if harness.case_id(m).split("_")[0] == short:
            return m
    raise SystemExit(f"no case {short}")


def run(out_dir: Path, shorts: list[str]) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    for short in shorts:
        case = _case_module(short)
        for tag, bug, off in (("b0", True, 0), ("t0", False, 0), ("t1", False, 1)):
            out = out_dir / f"{short}_{tag}.json"
            if out.exists():
                continue
            work = out_dir / f"d_{short}_{tag}"
            work.mkdir(exist_ok=True)
            (work / "s.py").write_text(case.script(bug))
            subprocess.run([sys.executable, "-m", "tests.wild.prospect_child", "s.py", str(out.resolve()), str(off)],
                           cwd=work, env=env, timeout=600, capture_output=True)


def _med(xs):
    xs = [x for x in xs if x is not None and math.isfinite(x)]
    return statistics.median(xs) if xs else None


def observe(rec: dict) -> dict:
    """The scalar observables of one run (None where the run gives no evidence)."""
    o: dict = {k: None for k in OBS}
    steps = max(rec.get("steps", 0), 1)
    loss = [v for _, v in rec.get("loss", []) if math.isfinite(v)]
    if len(loss) >= 10:
        n = max(1, len(loss) // 10)
        a, b = statistics.mean(loss[:n]), statistics.mean(loss[-n:])
        if a > 0 and b >= 0:
            o["loss_ratio"] = b / a
    meds, mxs, spreads = [], [], []
    last = None
    for e in rec.get("opt", []):
        rel = [r[3] / r[2] for r in e["rows"] if r[2] > 0]
        if e["step"] >= 2 and rel:
            meds.append(statistics.median(rel))
            mxs.append(max(rel))
        gr = [r[4] / r[2] for r in e["rows"] if r[2] > 0 and r[4]]
        if len(gr) >= 2 and min(gr) > 0:
            spreads.append(math.log10(max(gr) / min(gr)))
        last = e
    o["upd_rel_med"] = _med(meds)
    o["upd_rel_max"] = max(mxs) if mxs else None
    o["grad_rel_spread"] = _med(spreads)
    if last:
        tot = sum(r[1] for r in last["rows"]) or 1
        o["grad_none_frac"] = sum(r[1] for r in last["rows"] if not r[4]) / tot
        o["stuck_frac"] = sum(r[1] for r in last["rows"] if r[4] and r[3] == 0) / tot
    cos = [c for s, c in rec.get("cos", []) if s >= 3]
    o["grad_cos"] = statistics.mean(cos) if cos else None
    # same-input probes, the later half of them
    probes = [p for p in rec.get("probe", []) if "train" in p["seen"] and "eval" in p["seen"]]
    probes = probes[len(probes) // 2:]
    sk, sd, top, ent = {}, {}, [], []
    for p in probes:
        tr, ev = p["seen"]["train"], p["seen"]["eval"]
        for name in tr.keys() & ev.keys():
            t, e = tr[name], ev[name]
            sk.setdefault(name, []).append(abs(e[0] - t[0]) / (t[1] + 1e-6))
            sd.setdefault(name, []).append(abs(math.log((e[1] + 1e-6) / (t[1] + 1e-6))))
            if "." not in name:
                top.append(sk[name][-1])
        if p["ent"].get("train") is not None and p["ent"].get("eval") is not None:
            ent.append(p["ent"]["eval"] - p["ent"]["train"])
    o["mode_skew"] = max(_med(v) for v in sk.values()) if sk else None
    o["mode_std"] = max(_med(v) for v in sd.values()) if sd else None
    o["mode_skew_top"] = _med(top)
    o["mode_ent"] = _med(ent)
    ce = [v for s, t, v in rec.get("couple", []) if t == "eval" and s >= 32]
    ct = [v for s, t, v in rec.get("couple", []) if t == "train" and s >= 32]
    o["couple_eval"] = max(ce) if ce else None
    o["couple_train"] = max(ct) if ct else None
    # natural forwards: evaluation-mode calls against training calls in the last fifth of training
    nat, dead, ent_e, ent_t = [], [], [], []
    for name, rows in rec.get("acts", {}).items():
        tr = [r for r in rows if r[1] == 1 and r[0] >= 0.8 * steps]
        ev = [r for r in rows if r[1] == 0 and r[0] >= 0.8 * steps]
        if tr:
            dead.append(statistics.mean(r[4] for r in tr))
        if tr and ev:
            mt, st = statistics.mean(r[2] for r in tr), statistics.mean(r[3] for r in tr)
            me = statistics.mean(r[2] for r in ev)
            nat.append(abs(me - mt) / (st + 1e-6))
            if "." not in name:
                et = [r[7] for r in tr if r[7] is not None]
                ee = [r[7] for r in ev if r[7] is not None]
                if et and ee:
                    ent_t.append(statistics.mean(et))
                    ent_e.append(statistics.mean(ee))
    o["nat_skew"] = max(nat) if nat else None
    o["dead_max"] = max(dead) if dead else None
    if ent_e:
        o["ent_eval"] = statistics.mean(ent_e)
        o["ent_gap"] = statistics.mean(ent_e) - statistics.mean(ent_t)
    io = rec.get("io", [])
    tr = [r for r in io if r[1] == 1]
    ev = [r for r in io if r[1] == 0]
    if tr and ev:
        mt, st = statistics.mean(r[2] for r in tr), statistics.mean(r[3] for r in tr)
        o["in_skew"] = abs(statistics.mean(r[2] for r in ev) - mt) / (st + 1e-6)
    return o


LOGS = ("upd_rel_med", "upd_rel_max", "loss_ratio", "mode_skew", "mode_skew_top", "nat_skew", "couple_eval",
        "couple_train", "in_skew")


def _scale(k: str, v):
    """Ratios compared on a log10 scale."""
    if v is None:
        return None
    if k in LOGS:
        return math.log10(max(v, 1e-12))
    return v


def table(out_dir: Path) -> str:
    """Per observable: cases seen, cases differing beyond noise, cases outside every twin run's range."""
    runs: dict = {}
    for f in sorted(out_dir.glob("*_??.json")):
        short, tag = f.stem.rsplit("_", 1)
        rec = json.loads(f.read_text())
        runs.setdefault(short, {})[tag] = (observe(rec), rec.get("err", ""), rec.get("steps", 0))
    pairs = {s: r for s, r in runs.items() if {"b0", "t0"} <= r.keys()}
    lines = [f"cases with bug and twin: {len(pairs)}, with the twin's seed-1 run too: "
             f"{sum('t1' in r for r in pairs.values())}", ""]
    bounds = {}
    for k in OBS:
        vals = [_scale(k, r[t][0][k]) for r in pairs.values() for t in ("t0", "t1") if t in r]
        vals = [v for v in vals if v is not None]
        if vals:
            bounds[k] = (min(vals), max(vals), max(abs(v) for v in vals))
    lines.append(f"{'observable':16} {'side':4} {'seen':>4} {'differ':>6} {'outside':>7}  "
                 "cases outside every twin run's range (* also beyond the twin's seed noise)")
    per_case: dict = {}
    for k, side in OBS.items():
        seen = differ = 0
        outside = []
        for s, r in sorted(pairs.items()):
            b, t0 = _scale(k, r["b0"][0][k]), _scale(k, r["t0"][0][k])
            t1 = _scale(k, r["t1"][0][k]) if "t1" in r else None
            if b is None or t0 is None:
                continue
            seen += 1
            tol = 0.1 if k in LOGS else 0.02
            noise = abs(t1 - t0) if t1 is not None else 0.0
            d = abs(b - t0) > 3 * noise + tol
            if d and t1 is not None:
                differ += 1
                per_case.setdefault(s, []).append(k)
            lo, hi, ab = bounds[k]
            out = (side == "hi" and b > hi) or (side == "lo" and b < lo) or (side == "abs" and abs(b) > ab)
            if out:
                outside.append(s + ("*" if d and t1 is not None else ""))
        lines.append(f"{k:16} {side:4} {seen:4d} {differ:6d} {len(outside):7d}  {' '.join(outside)}")
    same = [s for s, r in sorted(pairs.items())
            if all(r["b0"][0][k] == r["t0"][0][k]
                   for k in ("loss_ratio", "upd_rel_med", "grad_cos", "grad_rel_spread"))]
    lines += ["", f"training identical in bug and twin (loss, updates, gradients): {len(same)}: {' '.join(same)}"]
    lines += ["", "per case (with seed-1 twin): observables that differ beyond noise"]
    for s in sorted(pairs):
        if "t1" not in pairs[s]:
            continue
        errs = ",".join(t for t in ("b0", "t0", "t1") if pairs[s][t][1])
        lines.append(f"{s:6} steps={pairs[s]['b0'][2]:<6} {' '.join(per_case.get(s, [])) or '-'}"
                     + (f"  (error in {errs})" if errs else ""))
    return "\n".join(lines)


def dump(out_dir: Path, short: str) -> str:
    rows = []
    for tag in ("b0", "t0", "t1"):
        f = out_dir / f"{short}_{tag}.json"
        if f.exists():
            o = observe(json.loads(f.read_text()))
            rows.append(tag + " " + " ".join(f"{k}={v:.3g}" if isinstance(v, float) else f"{k}={v}"
                                             for k, v in o.items()))
    return "\n".join(rows)


if __name__ == "__main__":
    cmd, d = sys.argv[1], Path(sys.argv[2])
    if cmd == "run":
        run(d, sys.argv[3:])
    elif cmd == "dump":
        print(dump(d, sys.argv[3]))
    else:
        print(table(d))
