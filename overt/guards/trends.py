"""Guards on the epochs' results (engine only: it knows which metrics are validation ones).

``val-loss-diverging``: the model is overfitting.  Said only when the evidence is sustained and
larger than the run's own noise (a warning that is usually wrong teaches users to ignore all of
them).  The last ``patience`` validations (a window) are compared with the best earlier window of
as many validations that ends before it: every recent validation loss is above the best window's
mean and the recent mean exceeds it by more than ``RISE`` of it; the validation losses from the
best window on climb with a linear trend at least ``TREND_T`` times its standard error (a climb,
not a noisy plateau whose lowest point was luck); and over the same span the training loss fell
and stays below the validation loss (a model that fits unseen data better than its dropout-noised
training data is not overfitting), and the learning rate did not rise (a schedule's warm-up or
cycle raises the validation loss too).  Windows, not single validations: the lowest of a noisy
series is biased low.
``val-metric-collapse``: a higher-is-better validation metric (the ``monitor`` when its mode is
``max``, and every ``val/*accuracy*``) fell below ``collapse`` x its best value.
Both are judged at each epoch's end, from values the engine has already read: no device access.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from overt.guards.session import GuardSession

PATIENCE = 3
COLLAPSE = 0.5
#: the latest validation loss must exceed the best by more than this fraction of it
RISE = 0.10
#: ... and the validation losses since the best window climb with a trend this many standard errors strong
TREND_T = 4.0


def trend_t(values: list[float]) -> float:
    """The least-squares slope of ``values`` against their index, in units of its standard error
    (``inf`` for an exact line that rises, ``-inf`` for one that falls)."""
    n = len(values)
    mx, my = (n - 1) / 2, sum(values) / n
    sxx = sum((x - mx) ** 2 for x in range(n))
    slope = sum((x - mx) * (y - my) for x, y in enumerate(values)) / sxx
    residual = sum((y - my - slope * (x - mx)) ** 2 for x, y in enumerate(values)) / max(n - 2, 1)
    if residual <= 0:
        return 0.0 if slope == 0 else math.copysign(math.inf, slope)
    return slope / math.sqrt(residual / sxx)


class EpochTrends:
    """Feed :meth:`epoch_end` every epoch's metrics; findings go to ``session``."""

    def __init__(self, session: GuardSession, *, monitor: str, monitor_mode: str,
                 patience: int = PATIENCE, collapse: float = COLLAPSE):
        self.s, self.patience, self.collapse = session, patience, collapse
        self.higher_better = {monitor} if monitor_mode == "max" and monitor.startswith("val/") else set()
        # (epoch, train/epoch_loss, val/loss, learning rate or None) per validation
        self.history: list[tuple[int, float, float, float | None]] = []
        self.best: dict[str, tuple[float, int]] = {}  # metric -> (best value, its epoch)

    def epoch_end(self, epoch: int, metrics: dict[str, float], lr: float | None = None) -> None:
        """``lr``: the optimizer's learning rate at the end of the epoch (a host float), when known."""
        train, val = metrics.get("train/epoch_loss"), metrics.get("val/loss")
        if train is not None and val is not None:
            self.history.append((epoch, train, val, lr))
            self._diverging()
        for key, value in metrics.items():
            if key in self.higher_better or (key.startswith("val/") and "accuracy" in key):
                self._collapse(key, value, epoch)

    def _diverging(self) -> None:
        h, w = self.history, self.patience
        if len(h) < 2 * w:
            return
        mean = lambda part, k: sum(v[k] for v in part) / len(part)  # noqa: E731
        recent = h[-w:]
        b = min(range(len(h) - 2 * w + 1), key=lambda i: mean(h[i:i + w], 2))  # the best earlier window
        best = h[b:b + w]
        val_best, val_now = mean(best, 2), mean(recent, 2)
        rise = val_now - val_best
        if not all(v[2] > val_best for v in recent) or rise <= RISE * abs(val_best):
            return  # back at the best level within the window, or a small rise
        strength = trend_t([v[2] for v in h[b:]])
        if strength < TREND_T:
            return  # no clear climb: a noisy plateau
        train_best, train_now = mean(best, 1), mean(recent, 1)
        if not train_now < train_best:
            return  # training loss not falling: not overfitting (loss-not-decreasing's job)
        if not val_now > train_now:
            return  # unseen data still fits better than the (dropout-noised) training data: not overfitting
        lrs = [v[3] for v in best if v[3] is not None]
        if lrs and h[-1][3] is not None and h[-1][3] > max(lrs):
            return  # the learning rate rose since the best (a warm-up or a cycle): not overfitting
        first, last = best[0][0] + 1, h[-1][0] + 1
        self.s.report(
            "val-loss-diverging",
            f"validation loss rose from {val_best:.4g} (mean of epochs {first}-{best[-1][0] + 1}, its best) to "
            f"{val_now:.4g} (mean of epochs {recent[0][0] + 1}-{last}, +{rise / abs(val_best):.0%}, "
            f"a climb {min(strength, 99):.1f}x its standard error) while training loss fell "
            f"({train_best:.4g} -> {train_now:.4g}): the model is overfitting, and further epochs make it worse "
            "on unseen data.",
            fix="keep the best "
            "model by validation loss (monitor=val/loss; checkpoints keep_best), stop earlier, or regularise "
            "(weight decay, dropout, augmentation with train_transform, more data).",
            where=f"validation, epoch {last}", key="val-loss",
        )

    def _collapse(self, key: str, value: float, epoch: int) -> None:
        best = self.best.get(key)
        if best is None or value > best[0]:
            self.best[key] = (value, epoch)
            return
        if best[0] > 0 and value < self.collapse * best[0]:
            self.s.report(
                "val-metric-collapse",
                f"{key} fell to {value:.4g} at epoch {epoch + 1}, below {self.collapse:.0%} of its best "
                f"{best[0]:.4g} (epoch {best[1] + 1}): training destabilised and the current weights are "
                "worse than earlier ones.",
                fix="lower the learning rate (or add warmup / clip_grad_norm), look "
                "for bad batches or NaN/inf around that epoch, and keep the best model "
                f"(monitor={key}, monitor_mode=max; checkpoints keep_best).",
                where=f"validation, epoch {epoch + 1}", key=f"collapse:{key}",
            )
