"""Guards on the epochs' results (engine only: it knows which metrics are validation ones).

``val-loss-diverging``: the validation loss rose at ``patience`` validations in a row while
the training loss fell at each of them -- the model is overfitting.
``val-metric-collapse``: a higher-is-better validation metric (the ``monitor`` when its mode is
``max``, and every ``val/*accuracy*``) fell below ``collapse`` x its best value.
Both are judged at each epoch's end, from values the engine has already read: no device access.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from overt.guards.session import GuardSession

PATIENCE = 3
COLLAPSE = 0.5


class EpochTrends:
    """Feed :meth:`epoch_end` every epoch's metrics; findings go to ``session``."""

    def __init__(self, session: GuardSession, *, monitor: str, monitor_mode: str,
                 patience: int = PATIENCE, collapse: float = COLLAPSE):
        self.s, self.patience, self.collapse = session, patience, collapse
        self.higher_better = {monitor} if monitor_mode == "max" and monitor.startswith("val/") else set()
        self.history: list[tuple[int, float, float]] = []  # (epoch, train/epoch_loss, val/loss) per validation
        self.best: dict[str, tuple[float, int]] = {}  # metric -> (best value, its epoch)

    def epoch_end(self, epoch: int, metrics: dict[str, float]) -> None:
        train, val = metrics.get("train/epoch_loss"), metrics.get("val/loss")
        if train is not None and val is not None:
            self.history.append((epoch, train, val))
            self._diverging()
        for key, value in metrics.items():
            if key in self.higher_better or (key.startswith("val/") and "accuracy" in key):
                self._collapse(key, value, epoch)

    def _diverging(self) -> None:
        run = self.history[-(self.patience + 1):]
        if len(run) <= self.patience:
            return
        pairs = list(zip(run, run[1:]))
        if not all(b[2] > a[2] and b[1] < a[1] for a, b in pairs):
            return
        first, last = run[0], run[-1]
        self.s.report(
            "val-loss-diverging",
            f"validation loss rose at {self.patience} validations in a row ({first[2]:.4g} -> {last[2]:.4g}, "
            f"epochs {first[0] + 1}-{last[0] + 1}) while training loss fell ({first[1]:.4g} -> {last[1]:.4g}): "
            "the model is overfitting, and each further epoch makes it worse on unseen data.",
            fix="keep the best "
            "model by validation loss (monitor=val/loss; checkpoints keep_best), stop earlier, or regularise "
            "(weight decay, dropout, augmentation with train_transform, more data).",
            where=f"validation, epoch {last[0] + 1}", key="val-loss",
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
