"""PNG plots for the note: the overfit curve, per-layer gradient norms, the learning-rate sweep.

matplotlib is an optional extra (``pip install "overt[plots]"``); without it the note says the
plots were skipped and how to get them."""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from overt.doctor.readiness import Readiness

INSTALL = 'matplotlib is not installed; `pip install "overt[plots]"` (or `pip install matplotlib`) adds them'


def write_plots(r: Readiness, directory: Path) -> tuple[dict[str, str], str | None]:
    """``({name: file name}, None)``, or ``({}, why they were skipped)``."""
    curves = {k: v for p in r.probes for k, v in p.curves.items()}
    if not curves:
        return {}, None
    try:
        import matplotlib

        matplotlib.use("Agg", force=False)
        import matplotlib.pyplot as plt
    except ImportError:
        return {}, INSTALL
    written: dict[str, str] = {}
    for key, draw in (("overfit", _overfit), ("grad_norms", _grad_norms), ("lr_find", _lr_find)):
        if curves.get(key):
            fig, ax = plt.subplots(figsize=(6.4, 3.6), dpi=100)
            try:
                title = draw(ax, curves[key], r)
                ax.set_title(title, fontsize=10)
                fig.tight_layout()
                name = f"{key.replace('_', '-')}.png"
                fig.savefig(directory / name)
                written[title] = name
            finally:
                plt.close(fig)
    return written, None


def _overfit(ax: Any, curve: list[float], r: Readiness) -> str:
    ax.plot(range(1, len(curve) + 1), curve, color="tab:blue", label="training loss (train mode)")
    # the note's numbers are measured in eval mode (dropout off) before and after: marked as such, so
    # that the curve's last point (train mode, dropout on) is not read as the note's end loss
    probe = r["overfit-batch"] if r is not None and "overfit-batch" in r else None
    ends = [probe.evidence.get(k) for k in ("start_loss", "end_loss")] if probe is not None else []
    marked = len(ends) == 2 and all(isinstance(v, (int, float)) and math.isfinite(v) and v > 0 for v in ends)
    if marked:
        ax.plot([0, len(curve)], ends, marker="o", linestyle="none", color="tab:orange",
                label=f"eval mode, as in the note: {ends[0]:.4g} -> {ends[1]:.4g}")
    log = all(v > 0 and math.isfinite(v) for v in curve)
    if log:
        ax.set_yscale("log")
    ax.set_xlabel("step")
    ax.set_ylabel("loss on one fixed batch" + (", log scale" if log else ""))
    ax.grid(alpha=0.3)
    ax.legend(fontsize="small")
    return "Overfit one small batch"


def _grad_norms(ax: Any, rows: list[tuple[str, float | None]], r: Readiness) -> str:
    names = [name for name, _ in rows]
    values = [v if v is not None and math.isfinite(v) and v > 0 else 0.0 for _, v in rows]
    # a linear axis: a bar's length is its value (bars on a log axis start at an arbitrary floor, so a
    # 2x difference looks like 20x); each bar is labelled with its value, so small ones stay readable
    ax.barh(range(len(values)), values, color=["tab:red" if v == 0 else "tab:green" for v in values])
    ax.set_yticks(range(len(values)), names, fontsize=7)
    ax.invert_yaxis()
    top = max(values, default=0.0)
    for i, v in enumerate(values):
        ax.text(v + 0.01 * top, i, f"{v:.3g}" if v > 0 else "none", va="center", fontsize=7)
    if top > 0:
        ax.set_xlim(0, top * 1.18)  # room for the labels
    ax.set_xlabel("gradient norm after one backward pass, linear scale (red: none or zero)")
    return "Gradient norm per layer"


def _lr_find(ax: Any, points: list[tuple[float, float]], r: Readiness) -> str:
    lrs, losses = zip(*points)
    ax.plot(lrs, losses, color="tab:purple")
    ax.set_xscale("log")
    ax.set_xlabel("learning rate (log scale)")
    ax.set_ylabel("smoothed training loss")
    finite = [v for v in losses if math.isfinite(v)]
    if finite and max(finite) > 2 * finite[0] > 0:  # the divergence at the end would flatten the useful part
        ax.set_ylim(min(finite) * 0.95, finite[0] * 1.3)
        first_out = next(lr for lr, v in zip(lrs, losses) if not math.isfinite(v) or v > finite[0] * 1.3)
        ax.text(0.99, 0.98, f"diverges from lr {first_out:.2g} (loss up to {max(finite):.3g}, above the axis)",
                transform=ax.transAxes, ha="right", va="top", fontsize="small", color="dimgray",
                bbox={"facecolor": "white", "edgecolor": "none", "alpha": 0.85})  # over the lines it names
    probe = r["lr-find"] if r is not None and "lr-find" in r else None
    if probe is not None and probe.evidence.get("suggested_lr"):
        lr = probe.evidence["suggested_lr"]
        ax.axvline(lr, color="tab:orange", linestyle="--", label=f"suggested {lr:.2g}")
        ax.legend(loc="lower left")
    ax.grid(alpha=0.3)
    return "Learning-rate range test"
