"""The readiness note (``readiness.md``), rendered from the probes' results.

Every sentence that states a fact about the setup comes from a measurement; the risks
section lists only the risks whose numbers call for them."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from overt.catalog import lookup
from overt.doctor.result import ProbeResult, Verdict

if TYPE_CHECKING:
    from overt.doctor.readiness import Readiness

_MARK = {Verdict.PASS: "pass", Verdict.WARN: "**warn**", Verdict.FAIL: "**FAIL**", Verdict.SKIPPED: "skipped"}


def render(r: Readiness) -> str:
    s = r.setup
    total = sum(p.seconds for p in r.probes)
    counts = ", ".join(f"{r.count(v)} {v.value}" for v in Verdict if r.count(v))
    out = [f"# Training readiness: {s.get('name', 'training setup')}", "",
           f"**Verdict: {r.verdict.upper()}** ({len(r.probes)} probes: {counts}; {total:.1f} s). "
           f"Written by `overt doctor` on {r.created}.", ""]
    out += _setup(s) + _table(r) + _evidence(r) + _validation(r) + _checkpoint(r) + _risks(r) + _plots(r)
    out += ["## Not checked here", "",
            "The probes train copies of the model with overt's own loop, so they check the model, loss, "
            "optimizer, data and checkpoint, not a hand-written loop: for one, `overt lint train.py` finds a "
            "missing `zero_grad()` or a validation loop without `eval()` statically, and `overt run train.py` "
            "catches them while it runs.", ""]
    return "\n".join(out)


def _setup(s: dict[str, Any]) -> list[str]:
    data = f"{_n(s.get('train_samples'))} training samples"
    data += f", {_n(s.get('val_samples'))} validation" if s.get("val_samples") is not None else ", no validation data"
    rows = [("model", s.get("model")), ("loss", f"`{s.get('loss')}`"), ("optimizer", f"`{s.get('optimizer')}`"),
            ("scheduler", s.get("scheduler") or "none"),
            ("device path", f"{s.get('device')}, {s.get('precision')} (the probes ran here; `overt train` uses the "
                            f"same device and precision for these settings)"),
            ("data", f"{data}; batch size {s.get('batch_size')} x accumulate {s.get('accumulate')}, "
                     f"{s.get('num_workers')} loader workers, seed {s.get('seed')}"),
            ("validation", s.get("validation"))]
    return ["## Setup", "", "| | |", "|---|---|"] + [f"| {k} | {v} |" for k, v in rows] + [""]


def _table(r: Readiness) -> list[str]:
    lines = ["## Probes", "", "| # | probe | verdict | evidence | time |", "|---|---|---|---|---|"]
    for i, p in enumerate(r.probes, 1):
        lines.append(f"| {i} | [{p.title}](#{_anchor(i, p)}) | {_MARK[p.verdict]} | {_cell(p.summary)} | "
                     f"{p.seconds:.2f} s |")
    return lines + [""]


def _anchor(i: int, p: ProbeResult) -> str:
    import re

    return re.sub(r"[^a-z0-9 -]", "", f"{i} {p.title} {p.verdict.value}".lower()).replace(" ", "-")


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _evidence(r: Readiness) -> list[str]:
    lines = ["## Evidence", ""]
    for i, p in enumerate(r.probes, 1):
        lines += [f"### {i}. {p.title}: {p.verdict.value}", ""]
        if p.tests:
            lines += [f"*Tests:* {p.tests}.", ""]
        if p.verdict is Verdict.SKIPPED:
            lines += [f"Skipped: {p.reason}.", ""]
            continue
        lines += [f"- {line}" for line in p.lines] + [""]
        for f in p.findings:
            lines += [f"> `{f.code} {f.slug}` ({f.where}): {f.message}", ""]
        if p.verdict is not Verdict.PASS:
            if p.causes:
                lines += ["Likely causes: " + "; ".join(c.rstrip(".") for c in p.causes) + ".", ""]
            if p.fix:
                lines += [f"Fix: {p.fix.rstrip('.')}.", ""]
        if p.slugs:
            related = ", ".join(f"`{lookup(s).code} {s}`" for s in p.slugs)
            lines += [f"Catalog (docs/catalog.md in overt): {related}", ""]
    return lines


def _get(r: Readiness, name: str) -> ProbeResult | None:
    return r[name] if name in r else None


def _validation(r: Readiness) -> list[str]:
    v = _get(r, "validation")
    if v is None or v.verdict is Verdict.SKIPPED:
        return []
    e = v.evidence
    lines = ["## How validation differs from training", ""]
    lines.append(f"- Validation runs {r.setup.get('validation')}; training runs `model.train()` with autograd on.")
    modal = e.get("mode_dependent_layers") or []
    if modal:
        changed = e.get("train_eval_changed")
        lines.append(f"- {len(modal)} layer(s) behave differently in the two modes ({', '.join(modal[:6])}). "
                     f"Measured on {e.get('samples', 'the')} validation samples: outputs differ by up to "
                     f"{e.get('train_eval_max_diff', float('nan')):.3g} between train and eval mode"
                     + (f", and {changed:.1%} of the predicted classes change." if changed is not None else "."))
    else:
        lines.append("- The model has no dropout or batch-norm layers: train and eval mode compute the same "
                     "function; the difference is only that validation builds no autograd graph.")
    lines.append("- Two validation passes over the same data gave "
                 + ("identical results." if v.verdict is Verdict.PASS else f"a problem: {v.summary}."))
    return lines + [""]


def _checkpoint(r: Readiness) -> list[str]:
    c = _get(r, "checkpoint")
    if c is None or c.verdict is Verdict.SKIPPED:
        return []
    rt, res = c.evidence.get("checkpoint-roundtrip", {}), c.evidence.get("exact-resume", {})
    lines = ["## What a checkpoint holds, and resuming", ""]
    if rt:
        files = rt.get("files", {})
        lines.append(f"- The round-trip checkpoint held {', '.join(rt.get('objects', []))} and the RNG states in "
                     f"{len(files)} files ({rt.get('bytes', 0) / 1e6:.2f} MB); it was loaded into "
                     f"{rt.get('rebuilt_with')}; outputs after reload differed by {rt.get('max_output_diff', 0):.3g}.")
    if res.get("saved"):
        same = res.get("uninterrupted") == res.get("resumed")
        lines.append(f"- A Trainer checkpoint holds {', '.join(res['saved'])}, every RNG state and the resolved "
                     f"config. Exact resume: {res.get('steps', 0) // 2} steps + save + resume + "
                     f"{res.get('steps', 0) // 2} steps {'equalled' if same else 'did NOT equal'} "
                     f"{res.get('steps')} uninterrupted steps bit for bit, so "
                     + ("an interrupted run (`overt resume RUN_DIR`) continues exactly." if same else
                        "a resumed run will drift from an uninterrupted one."))
    elif c.verdict is not Verdict.PASS:
        lines.append(f"- Exact resume: {c.summary}.")
    return lines + [""]


def _risks(r: Readiness) -> list[str]:
    lines = ["## Risks for a larger data set or a longer run", ""]
    if "build" in r:
        return lines + ["Not assessed: the recipe did not build, so nothing could be measured. Fix the failures "
                        "above and run the doctor again.", ""]
    risks = derive_risks(r)
    lines += [f"{i}. {text}" for i, text in enumerate(risks, 1)] if risks else [
        "No risk stood out in the measurements."]
    return lines + [""]


def derive_risks(r: Readiness) -> list[str]:
    """Risks that the measured numbers call for, most concrete first."""
    risks: list[str] = []
    s = r.setup
    t = _get(r, "throughput")
    if t is not None and t.verdict is not Verdict.SKIPPED and t.evidence.get("samples_per_s"):
        e = t.evidence
        rate = e["samples_per_s"]
        n = s.get("train_samples") or 0
        if n:
            per_epoch = n / rate
            risks.append(f"Throughput: {rate:,.0f} samples/s on {e['device']} makes an epoch of this data "
                         f"{_dur(per_epoch)}; a 100x larger data set ({_n(100 * n)} samples) takes "
                         f"{_dur(100 * per_epoch)} per epoch at this rate.")
        if e.get("wait_share", 0) > 0.2:
            risks.append(f"Data loading already takes {e['wait_share']:.0%} of each step with "
                         f"{e.get('num_workers')} worker(s); with a bigger data set or heavier per-sample work the "
                         f"device will wait more. {t.fix or ''}".strip())
        mem = e.get("peak_memory_bytes", 0)
        if mem:
            risks.append(f"Memory: peak {mem / 2**20:,.0f} MiB ({e.get('peak_memory_kind')}) at batch size "
                         f"{e.get('batch_size')}; activation memory grows with the batch size and the model, so "
                         f"measure again before raising either.")
    c = _get(r, "checkpoint")
    if c is not None:
        rt = c.evidence.get("checkpoint-roundtrip", {})
        size = rt.get("bytes")
        if size:
            risks.append(f"Checkpoints: {size / 1e6:.2f} MB each (weights + optimizer state); with the default "
                         f"keep_last=3 and keep_best=1 a run keeps up to {4 * size / 1e6:.1f} MB, and the size grows "
                         f"with the model.")
        if c.verdict is Verdict.FAIL or c.verdict is Verdict.WARN:
            risks.append(f"Resuming is not exact ({c.summary}): a preempted long run will not continue as it would "
                         f"have.")
    d = _get(r, "determinism")
    if d is not None and d.verdict is Verdict.FAIL:
        risks.append(f"Runs are not reproducible ({d.summary}): comparisons between runs of a longer experiment "
                     f"mix the effect of a change with noise.")
    p = _get(r, "parity")
    if p is not None and p.verdict is Verdict.SKIPPED:
        risks.append(f"The accelerator path is untested: {p.reason}. Run `overt doctor` on the machine that will "
                     f"train before the long run (device-specific tensor creation and precision show up there).")
    elif p is not None and p.verdict is Verdict.FAIL:
        risks.append(f"CPU and accelerator disagree ({p.summary}): results on the accelerator cannot be checked "
                     f"against the CPU.")
    data = _get(r, "data")
    if data is not None:
        e = data.evidence
        if e.get("balance") is not None and e["balance"] < 0.5:
            risks.append(f"Class balance: the smallest class has {e['balance']:.0%} of the largest's samples; "
                         f"accuracy on a larger data set with this distribution mostly reflects the large classes: "
                         f"report per-class metrics.")
        if e.get("overlap"):
            risks.append(f"Leakage: {e['overlap']} validation sample(s) also occur in the training data, so "
                         f"validation overstates generalisation, more so as the data grows by scraping or merging.")
    if "train_samples" in s and s.get("val_samples") is None:
        risks.append("No validation data: over a longer run, overfitting would go unnoticed; hold out a split.")
    o = _get(r, "overfit-batch")
    if o is not None and o.verdict is not Verdict.SKIPPED and o.evidence.get("steps"):
        e = o.evidence
        if e.get("ratio") is not None and e["ratio"] > 0.01:
            risks.append(f"Optimisation speed: memorising {e['samples']} samples took {e['steps']} steps and ended "
                         f"at {e['ratio']:.1%} of the starting loss; if the full run learns slowly, the learning "
                         f"rate ({e.get('lr')}) is the first thing to tune (`overt doctor --lr-find`).")
    g = _get(r, "gradients")
    if g is not None and g.evidence.get("layers"):
        norms = [row["norm"] for row in g.evidence["layers"] if row.get("norm")]
        if len(norms) > 1 and max(norms) / max(min(norms), 1e-30) > 100:
            risks.append(f"Gradient norms span {max(norms) / min(norms):.0f}x across layers ({min(norms):.2g} to "
                         f"{max(norms):.2g}) at initialisation; deeper or longer training can turn this into "
                         f"vanishing or exploding gradients: consider normalisation layers or clipping.")
    lr = _get(r, "lr-find")
    if lr is not None and lr.evidence.get("suggested_lr") and lr.evidence.get("configured_lr"):
        sug, conf = lr.evidence["suggested_lr"], lr.evidence["configured_lr"]
        if conf > 10 * sug or conf < sug / 10:
            risks.append(f"Learning rate: configured {conf:.2g}, the range test suggests {sug:.2g}; a long run at "
                         f"the configured rate is likely to {'diverge' if conf > sug else 'crawl'}.")
    res = c.evidence.get("exact-resume", {}) if c is not None else {}
    if res.get("scheduler_total_steps"):
        risks.append(f"Schedule: the {res['scheduler']} covers {res['scheduler_total_steps']:,} optimizer steps "
                     f"(the configured epochs); a longer run needs a new schedule, not a resume with more epochs.")
    return risks


def _plots(r: Readiness) -> list[str]:
    lines = ["## Plots", ""]
    if r.plots:
        lines += [f"![{name}]({file})" for name, file in r.plots.items()]
    elif r.plots_skipped:
        lines.append(f"Plots skipped: {r.plots_skipped}")
    else:
        lines.append("No plots were written (the note was not saved to a directory).")
    return lines + [""]


def _n(value: Any) -> str:
    return f"{value:,}" if isinstance(value, int) else str(value)


def _dur(seconds: float) -> str:
    if seconds < 120:
        return f"about {seconds:.1f} s"
    if seconds < 7200:
        return f"about {seconds / 60:.0f} min"
    return f"about {seconds / 3600:.1f} h"
