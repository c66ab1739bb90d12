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
    if "build" in r:  # the recipe did not build: no probe ran
        ran = "the recipe did not build, so no probe ran"
    else:
        ran = f"{len(r.probes)} probe{'s' if len(r.probes) != 1 else ''}: {counts}"
    out = [f"# Training readiness: {s.get('name', 'training setup')}", "",
           f"**Verdict: {r.verdict.upper()}** ({ran}; {total:.1f} s). "
           f"Written by `overt doctor` on {r.created}.", ""]
    out += _setup(s) + _table(r) + _evidence(r) + _sections(r) + _risks(r) + _plots(r)
    out += ["## Not checked here", "",
            "The probes train copies of the model with overt's own loop, so they check the model, loss, "
            "optimizer, data and checkpoint, not a hand-written loop: for one, `overt lint train.py` finds a "
            "missing `zero_grad()` or a validation loop without `eval()` statically, and `overt run train.py` "
            "catches them while it runs.", ""]
    return "\n".join(out)


def _setup(s: dict[str, Any]) -> list[str]:
    """The setup table: only what is known (after a failed build, hardly anything is)."""
    def known(*keys: str) -> bool:
        return all(s.get(k) is not None for k in keys)

    rows: list[tuple[str, Any]] = []
    if known("model"):
        rows.append(("model", s["model"]))
    for key in ("loss", "optimizer"):
        if known(key):
            rows.append((key, f"`{s[key]}`"))
    if known("model"):
        rows.append(("scheduler", s.get("scheduler") or "none"))
    if known("device", "precision"):
        rows.append(("device path", f"{s['device']}, {s['precision']} (the probes ran here; `overt train` uses "
                                    "the same device and precision for these settings)"))
    parts = []
    if known("train_samples"):
        val = s.get("val_samples")
        parts.append(f"{number(s['train_samples'])} training samples"
                     + (f", {number(val)} validation" if val is not None else ", no validation data"))
    if known("batch_size"):
        batch = f"batch size {s['batch_size']}" + (f" x accumulate {s['accumulate']}" if known("accumulate") else "")
        parts.append(batch + (f", {s['num_workers']} loader workers" if known("num_workers") else ""))
    if known("seed"):
        parts.append(f"seed {s['seed']}")
    if parts:
        rows.append(("data", "; ".join(parts)))
    if known("validation"):
        rows.append(("validation", s["validation"]))
    if not rows:
        return ["## Setup", "", "Not known: the recipe did not build (see the failure below).", ""]
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
    elif "build" in r:
        lines.append("No plots: the recipe did not build.")
    elif r.directory is not None:
        lines.append("No plots: none of the probes that ran draws one (the overfit, gradient-flow and "
                     "--lr-find probes do).")
    else:
        lines.append("No plots were written (the note was not saved to a directory).")
    return lines + [""]
