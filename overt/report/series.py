"""Which metrics share a plot, and their points: a run's records turned into panels.

Training and validation values of one quantity share a panel (``train/loss``,
``train/epoch_loss`` and ``val/loss`` are all "loss"); learning rate, gradient
norm (total, and every layer's together) and throughput get their own; any other logged key gets a panel of its own."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any, Iterable

from overt.run.reader import RunRecord

#: panel name -> (title, y-axis label); panels appear in this order, the rest after
KNOWN = {
    "loss": ("Loss", "loss"),
    "lr": ("Learning rate", "lr"),
    "grad_norm": ("Gradient norm (before clipping)", "total norm"),
    "layer_grad_norm": ("Gradient norm per layer (log_grad_norms=true)", "norm"),
    "samples_per_sec": ("Throughput", "samples / s"),
}
_SPLITS = ("train/", "val/")


def panel_name(key: str) -> str:
    """``train/epoch_loss`` -> ``loss``; ``val/accuracy`` -> ``accuracy``; every ``grad_norm/<layer>``
    -> ``layer_grad_norm``; ``custom`` -> ``custom``."""
    if key.startswith("grad_norm/"):
        return "layer_grad_norm"
    for prefix in _SPLITS:
        if key.startswith(prefix):
            rest = key[len(prefix):]
            return "loss" if rest == "epoch_loss" else rest
    return key


@dataclass
class Panel:
    """One axes: its name (also the PNG's file stem), title, y label and metric keys."""

    name: str
    title: str
    ylabel: str
    keys: list[str]

    @property
    def filename(self) -> str:
        return re.sub(r"[^A-Za-z0-9_.-]+", "_", self.name) + ".png"


def panels(runs: Iterable[RunRecord]) -> list[Panel]:
    """The panels for the union of the runs' metric keys, known ones first."""
    grouped: dict[str, list[str]] = {}
    for run in runs:
        for key in run.metric_names:
            keys = grouped.setdefault(panel_name(key), [])
            if key not in keys:
                keys.append(key)
    order = [n for n in KNOWN if n in grouped]
    at = 1 if "loss" in grouped else 0  # loss, then the other metrics, then lr, gradient norm, throughput
    order[at:at] = [n for n in grouped if n not in KNOWN]
    out = []
    for name in order:
        title, ylabel = KNOWN.get(name, (name.replace("_", " ").capitalize(), name))
        keys = sorted(grouped[name], key=lambda k: (k.startswith("val/"), k != f"train/{name}", k))
        out.append(Panel(name, title, ylabel, keys))
    return out


def points(run: RunRecord, key: str) -> tuple[list[int], list[float]]:
    """``(steps, values)`` of ``key`` in the run, in logged order (non-finite values kept as NaN)."""
    steps, values = [], []
    for record in run.metrics:
        value = record.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            steps.append(int(record.get("step", 0)))
            values.append(float(value) if math.isfinite(value) else math.nan)
    return steps, values


def epoch_ends(run: RunRecord) -> list[tuple[int, int]]:
    """``(step, epochs completed)`` at each epoch end, for an epoch axis beside the step axis."""
    return [(int(r["step"]), int(r["epoch"])) for r in run.epoch_records if "step" in r and "epoch" in r]


def differing_config(runs: list[RunRecord], ignore: Iterable[str] = ("run_dir", "name")) -> dict[str, list[Any]]:
    """Config keys whose values differ between runs: ``key -> [value in each run]``."""
    keys: dict[str, None] = {}
    for run in runs:
        keys.update(dict.fromkeys(run.config))
    missing = object()
    out = {}
    for key in keys:
        if key in ignore:
            continue
        values = [run.config.get(key, missing) for run in runs]
        if any(v != values[0] for v in values[1:]):
            out[key] = [None if v is missing else v for v in values]
    return out


def run_labels(runs: list[RunRecord]) -> list[str]:
    """A short, distinct label per run: the folder name, with its parent when two names clash."""
    names = [run.name for run in runs]
    if len(set(names)) == len(names):
        return names
    labels = [f"{run.path.resolve().parent.name}/{run.name}" for run in runs]
    return labels if len(set(labels)) == len(labels) else [f"{i + 1}: {n}" for i, n in enumerate(names)]
