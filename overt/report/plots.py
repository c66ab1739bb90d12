"""PNG plots of runs' metrics against the optimizer step, with matplotlib (the ``plots`` extra).

One PNG per panel (see :mod:`overt.report.series`) and ``overview.png`` with all
of them.  One run: one colour per metric, training solid, validation dashed, an
epoch axis on top.  Several runs: one colour per run, overlaid.  The best point
of the run's ``monitor`` metric is marked with a star.  Figures are drawn without
pyplot, so no global matplotlib state (backend, open figures) is touched."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from overt.errors import OvertError
from overt.report.series import Panel, epoch_ends, panels, points, run_labels
from overt.run.reader import RunRecord

EXTRA_HINT = ("pip install 'overt[plots]'   (the plots extra: matplotlib)"
              "; from a checkout on a CPU-only machine: "
              "pip install -c constraints-cpu.txt -e '.[plots]' (keeps the CPU torch build)")
PANEL_SIZE = (6.4, 4.0)  # inches, at DPI
DPI = 100


class MissingExtraError(OvertError):
    """An optional extra that a requested feature needs is not installed."""


def require_matplotlib() -> Any:
    """The :class:`matplotlib.figure.Figure` class, or a :class:`MissingExtraError` naming the extra."""
    try:
        from matplotlib.figure import Figure
    except ImportError:
        raise MissingExtraError(
            "matplotlib is not installed, so no plots can be drawn",
            why="plotting is an optional extra of overt",
            fix=EXTRA_HINT,
        ) from None
    return Figure


def _style(key: str, n_points: int) -> dict[str, Any]:
    epoch_level = key.startswith("val/") or key == "train/epoch_loss"
    style: dict[str, Any] = {"linewidth": 1.6 if epoch_level else 1.0,
                             "linestyle": "--" if key.startswith("val/") else "-"}
    if epoch_level or n_points == 1:
        style.update(marker="o", markersize=3)
    if key == "train/loss":
        style["alpha"] = 0.75
    return style


def draw_panel(ax: Any, panel: Panel, runs: list[RunRecord], labels: list[str]) -> None:
    """Draw ``panel`` for ``runs`` onto the matplotlib axes ``ax``."""
    several = len(runs) > 1
    for i, (run, label) in enumerate(zip(runs, labels)):
        colours = {}
        for j, key in enumerate(panel.keys):
            steps, values = points(run, key)
            if not steps:
                continue
            colours[key] = f"C{(i if several else j) % 10}"
            ax.plot(steps, values, color=colours[key], label=f"{label}  {key}" if several else key,
                    **_style(key, len(steps)))
        best = run.best()
        if best and best["metric"] in colours and best["value"] is not None and math.isfinite(best["value"]):
            text = f"best {best['value']:.4g} (step {best['step']})"
            ax.plot([best["step"]], [best["value"]], marker="*", markersize=15, linestyle="none",
                    color=colours[best["metric"]], markeredgecolor="black", zorder=5,
                    label=f"{label}  {text}" if several else text)
    if panel.name in ROBUST_PANELS:
        _robust_limits(ax, [v for run in runs for key in panel.keys for v in points(run, key)[1]])
    ax.set_title(panel.title)
    ax.set_xlabel("optimizer step")
    ax.set_ylabel(panel.ylabel)
    ax.grid(alpha=0.3)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize="small")
    if not several:
        _epoch_axis(ax, runs[0])


#: panels whose rare spikes are noise of the measurement (a busy machine, a pause), not of training:
#: their y axis covers the bulk of the points, and the points above it are counted in a note
ROBUST_PANELS = ("samples_per_sec",)
#: a spike: more than this many times the 90th percentile
SPIKE = 2.0


def _robust_limits(ax: Any, values: list[float]) -> None:
    """A y axis for the bulk of ``values`` when a few spikes would flatten it, with a note saying how
    many points lie above and how high the highest goes."""
    finite = sorted(v for v in values if math.isfinite(v))
    if len(finite) < 5:
        return
    p90 = finite[int(0.9 * (len(finite) - 1))]
    top = p90 * 1.5
    above = [v for v in finite if v > top]
    if p90 <= 0 or finite[-1] <= SPIKE * p90 or not above:
        return
    ax.set_ylim(min(0.0, finite[0]), top)
    ax.text(0.99, 0.98, f"{len(above)} point(s) above the axis, up to {finite[-1]:.4g}", transform=ax.transAxes,
            ha="right", va="top", fontsize="small", color="dimgray")


def _epoch_axis(ax: Any, run: RunRecord) -> None:
    """A secondary x axis on top, in epochs, from the steps at which epochs ended."""
    ends = epoch_ends(run)
    steps = [0] + [s for s, _ in ends]
    epochs = [0] + [e for _, e in ends]
    if len(steps) < 2 or any(b <= a for a, b in zip(steps, steps[1:])):
        return
    import numpy as np
    from matplotlib.ticker import MaxNLocator

    top = ax.secondary_xaxis("top", functions=(lambda x: np.interp(x, steps, epochs),
                                               lambda e: np.interp(e, epochs, steps)))
    top.set_xlabel("epoch")
    top.xaxis.set_major_locator(MaxNLocator(integer=True))


def write_plots(runs: list[RunRecord], out_dir: Path) -> list[Path]:
    """Write ``<panel>.png`` for every panel and ``overview.png`` into ``out_dir``; return the paths
    (overview first).  Nothing is written for runs without any logged metric."""
    Figure = require_matplotlib()
    found = panels(runs)
    if not found:
        return []
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    labels = run_labels(runs)

    cols = 1 if len(found) == 1 else 2
    rows = math.ceil(len(found) / cols)
    fig = Figure(figsize=(PANEL_SIZE[0] * cols, PANEL_SIZE[1] * rows), dpi=DPI, layout="constrained")
    axes = fig.subplots(rows, cols, squeeze=False).ravel()
    for ax, panel in zip(axes, found):
        draw_panel(ax, panel, runs, labels)
    for ax in axes[len(found):]:
        ax.set_visible(False)
    title = labels[0] if len(runs) == 1 else f"{len(runs)} runs"
    fig.suptitle(f"{title}  ({runs[0].state})" if len(runs) == 1 else title)
    written = [out_dir / "overview.png"]
    _save(fig, written[0])

    for panel in found:
        fig = Figure(figsize=PANEL_SIZE, dpi=DPI, layout="constrained")
        draw_panel(fig.subplots(), panel, runs, labels)
        _save(fig, out_dir / panel.filename)
        written.append(out_dir / panel.filename)
    return written


def _save(fig: Any, path: Path) -> None:
    """``fig`` as a PNG at ``path``, atomically and never through a link planted there."""
    import io

    from overt.run.atomic import write_bytes_atomic

    buffer = io.BytesIO()
    fig.savefig(buffer, format="png")
    write_bytes_atomic(path, buffer.getvalue())
