"""PNG plots of runs' metrics against the optimizer step, with matplotlib (the ``plots`` extra).

One PNG per panel (see :mod:`overt.report.series`) and ``overview.png`` with all
of them.  One run: one colour per metric, training solid, validation dashed, an
epoch axis on top.  Several runs: one colour per run, overlaid, one line style per
metric, an epoch axis when the runs' epochs end at the same steps, and a log y axis
for learning rates and gradient norms that differ by :data:`LOG_SPREAD` x or more between
the runs (said in the axis label).  The best
point of a run's ``monitor`` metric is marked with a star.  Figures are drawn without
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
    """Draw ``panel`` for ``runs`` onto the matplotlib axes ``ax``: every panel spans the same
    steps (the runs' first to last logged step), so one step sits at one place in every panel."""
    ax.set_xlim(*step_range(runs))
    if len(runs) > 1:
        _draw_overlay(ax, panel, runs, labels)
    else:
        _draw_one(ax, panel, runs[0])
    if panel.name in ROBUST_PANELS:
        _robust_limits(ax, [v for run in runs for key in panel.keys for v in points(run, key)[1]])
    ax.set_title(panel.title)
    ax.set_xlabel("optimizer step")
    ax.grid(alpha=0.3)
    if len(runs) == 1 or _same_epochs(runs):
        _epoch_axis(ax, runs[0])


def _best_in_panel(run: RunRecord, panel: Panel) -> dict[str, Any] | None:
    best = run.best()
    if best and best["metric"] in panel.keys and best["value"] is not None and math.isfinite(best["value"]):
        return best
    return None


def _star(ax: Any, best: dict[str, Any], colour: str, label: str | None) -> None:
    ax.plot([best["step"]], [best["value"]], marker="*", markersize=15, linestyle="none", color=colour,
            markeredgecolor="black", zorder=5, label=label)


def _draw_one(ax: Any, panel: Panel, run: RunRecord) -> None:
    """One run: a colour per metric, each named in the legend."""
    colours = run_colours(len(panel.keys))
    for key, colour in zip(panel.keys, colours):
        steps, values = points(run, key)
        if steps:
            ax.plot(steps, values, color=colour, label=key, **_style(key, len(steps)))
    best = _best_in_panel(run, panel)
    if best:
        _star(ax, best, colours[panel.keys.index(best["metric"])], f"best {best['value']:.4g} (step {best['step']})")
    ax.set_ylabel(panel.ylabel)
    _legend(ax, ax.get_legend_handles_labels()[0])


#: a legend with more entries than this goes beside the axes, not over the lines
LEGEND_INSIDE = 8


def _legend(ax: Any, handles: list[Any]) -> None:
    if not handles:
        return
    if len(handles) <= LEGEND_INSIDE:
        ax.legend(handles=handles, fontsize="small")
    else:
        ax.legend(handles=handles, fontsize="x-small", loc="upper left", bbox_to_anchor=(1.01, 1.0),
                  borderaxespad=0.0)


def step_range(runs: list[RunRecord]) -> tuple[float, float]:
    """The x limits: the runs' first to last logged step, with a margin."""
    steps = [r["step"] for run in runs for r in run.metrics
             if isinstance(r.get("step"), int) and not isinstance(r["step"], bool)]
    lo, hi = (min(steps), max(steps)) if steps else (0, 1)
    pad = max((hi - lo) * 0.03, 1.0)
    return lo - pad, hi + pad


def run_colours(n: int) -> list[Any]:
    """One colour per line (a run, or one run's metric): matplotlib's ten cycle colours, or a
    colormap's n evenly spaced ones for more (a repeated colour would make two lines one)."""
    if n <= 10:
        return [f"C{i}" for i in range(n)]
    from matplotlib import colormaps

    cmap = colormaps["viridis"]
    return [cmap(i / (n - 1)) for i in range(n)]


def _draw_overlay(ax: Any, panel: Panel, runs: list[RunRecord], labels: list[str]) -> None:
    """Several runs: a colour per run, a line style per metric (train/loss thin, train/epoch_loss
    with points, val/ dashed), and a legend with one entry per run (its best value when the panel
    holds its monitor) and one per style, rather than one per run and metric."""
    from matplotlib.lines import Line2D

    handles, styles, starred = [], {}, False
    drawn_as: dict[tuple, str] = {}  # a run's lines in this panel -> the label of the first run drawn with them
    for run, label, colour in zip(runs, labels, run_colours(len(runs))):
        lines = []
        for key in panel.keys:
            steps, values = points(run, key)
            if steps:
                ax.plot(steps, values, color=colour, **_style(key, len(steps)))
                styles.setdefault(key, len(steps))
                lines.append((key, tuple(steps), tuple(values)))
        if not lines:
            continue
        same = drawn_as.setdefault(tuple(lines), label)
        if same != label:  # drawn exactly over an earlier run's lines (a sweep's runs with one lr share its schedule)
            label = f"{label}  (drawn over {same}: the same values)"
        best = _best_in_panel(run, panel)
        if best:
            _star(ax, best, colour, None)
            starred = True
            label = f"{label}  best {best['value']:.4g} (step {best['step']})"
        handles.append(Line2D([], [], color=colour, linewidth=2.5, label=label))
    if len(styles) > 1:
        handles += [Line2D([], [], color="dimgray", label=key, **_style(key, n)) for key, n in styles.items()]
    if starred:
        handles.append(Line2D([], [], marker="*", markersize=12, linestyle="none", color="lightgray",
                              markeredgecolor="black", label="best of each run"))
    log = panel.name in SCALE_PANELS and _spread(ax, [points(run, key)[1] for run in runs for key in panel.keys])
    ax.set_ylabel(panel.ylabel + (" (log scale)" if log else ""))
    _legend(ax, handles)


#: several runs: a log y axis when the runs' typical values in one panel differ by this factor or more
#: (a linear axis would flatten all but the largest into a line at zero) ...
LOG_SPREAD = 10.0
#: ... in the panels of scales that runs set by decades (a sweep's learning rates, and the gradient
#: norms they cause); losses and metrics stay linear (accuracy 0.1 against 0.96 on a log axis
#: looks closer than it is)
SCALE_PANELS = ("lr", "grad_norm", "layer_grad_norm")


def _spread(ax: Any, series: list[list[float]]) -> bool:
    """Sets a log y axis when every value is positive and the series' medians differ by
    :data:`LOG_SPREAD` or more; returns whether it did."""
    medians = []
    for values in series:
        finite = sorted(v for v in values if math.isfinite(v))
        if not finite:
            continue
        if finite[0] <= 0:
            return False
        medians.append(finite[len(finite) // 2])
    if len(medians) < 2 or max(medians) < LOG_SPREAD * min(medians):
        return False
    ax.set_yscale("log")
    return True


def _same_epochs(runs: list[RunRecord]) -> bool:
    """Whether every run ended its epochs at the same steps (one epoch axis then fits them all)."""
    first = epoch_ends(runs[0])
    return bool(first) and all(epoch_ends(run) == first for run in runs[1:])


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
    from matplotlib.ticker import FixedLocator, MaxNLocator

    top = ax.secondary_xaxis("top", functions=(lambda x: np.interp(x, steps, epochs),
                                               lambda e: np.interp(e, epochs, steps)))
    top.set_xlabel("epoch")
    # whole epochs only (an epoch ends at its tick, as the console counts them from 1); a span shorter
    # than an epoch gets no fractional ticks such as 1.05, which read as epoch numbers
    first, last = np.interp(ax.get_xlim(), steps, epochs)
    ticks = [t for t in MaxNLocator(integer=True, min_n_ticks=1).tick_values(first, last)
             if t == int(t) and first - 1e-9 <= t <= last + 1e-9]
    top.xaxis.set_major_locator(FixedLocator(ticks))


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
    # one subfigure per panel: a legend beside one panel's axes narrows that panel only, not its column
    cells = fig.subfigures(rows, cols, squeeze=False).ravel()
    for cell, panel in zip(cells, found):
        draw_panel(cell.subplots(), panel, runs, labels)
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
