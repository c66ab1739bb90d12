"""The readiness note (``readiness.md``), rendered from the probes' results.

Every sentence that states a fact about the setup comes from a measurement; the risks
section lists only the risks whose numbers call for them."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from overt.catalog import lookup
from overt.doctor.result import ProbeResult, Verdict, number

if TYPE_CHECKING:
    from overt.doctor.readiness import Readiness
    from overt.doctor.registry import Probe

_MARK = {Verdict.PASS: "pass", Verdict.WARN: "**warn**", Verdict.FAIL: "**FAIL**", Verdict.SKIPPED: "skipped"}


def render(r: Readiness) -> str:
    s = r.setup
    total = sum(p.seconds for p in r.probes)
    counts = ", ".join(f"{r.count(v)} {v.value}" for v in Verdict if r.count(v))
    out = [f"# Training readiness: {s.get('name', 'training setup')}", "",
           f"**Verdict: {r.verdict.upper()}** ({len(r.probes)} probes: {counts}; {total:.1f} s). "
           f"Written by `overt doctor` on {r.created}.", ""]
    out += _setup(s) + _table(r) + _evidence(r) + _sections(r) + _risks(r) + _plots(r)
    out += ["## Not checked here", "",
            "The probes train copies of the model with overt's own loop, so they check the model, loss, "
            "optimizer, data and checkpoint, not a hand-written loop: for one, `overt lint train.py` finds a "
            "missing `zero_grad()` or a validation loop without `eval()` statically, and `overt run train.py` "
            "catches them while it runs.", ""]
    return "\n".join(out)


def _setup(s: dict[str, Any]) -> list[str]:
    data = f"{number(s.get('train_samples'))} training samples"
    val = s.get("val_samples")
    data += f", {number(val)} validation" if val is not None else ", no validation data"
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


def _registered(r: Readiness) -> list[tuple[Probe, ProbeResult]]:
    """Each result with its probe (results without a registered probe, e.g. a failed build, left out)."""
    from overt.doctor import registry

    by_id = {p.id: p for p in registry.probes()}
    return [(by_id[p.name], p) for p in r.probes if p.name in by_id]


def _sections(r: Readiness) -> list[str]:
    """Each probe's own section of the note (e.g. how validation differs from training), in probe order."""
    return [line for probe, result in _registered(r) if probe.section is not None
            for line in probe.section(r, result)]


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
    """Risks that the measured numbers call for, most concrete first: each probe's (ranked), and
    the missing validation data."""
    ranked: list[tuple[int, str]] = []
    for probe, result in _registered(r):
        if probe.risks is not None:
            ranked += probe.risks(r, result)
    if "train_samples" in r.setup and r.setup.get("val_samples") is None:
        ranked.append((55, "No validation data: over a longer run, overfitting would go unnoticed; hold out a split."))
    return [text for _, text in sorted(ranked, key=lambda item: item[0])]


def _plots(r: Readiness) -> list[str]:
    lines = ["## Plots", ""]
    if r.plots:
        lines += [f"![{name}]({file})" for name, file in r.plots.items()]
    elif r.plots_skipped:
        lines.append(f"Plots skipped: {r.plots_skipped}")
    else:
        lines.append("No plots were written (the note was not saved to a directory).")
    return lines + [""]
