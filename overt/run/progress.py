"""Progress on the terminal: a live bar (steps, throughput, ETA, loss) when stderr is a
terminal, plain lines at each logged point and epoch end otherwise; a short summary at the end."""

from __future__ import annotations

import sys
import time
from typing import TYPE_CHECKING, Any, TextIO

from overt.engine.callbacks import Callback
from overt.engine.model_summary import summary_text as model_text

if TYPE_CHECKING:
    from overt.engine.loop import Trainer


def _fmt(metrics: dict[str, float]) -> str:
    return "  ".join(f"{k}={v:.4g}" for k, v in metrics.items() if k not in ("step", "epoch"))


def _eta(seconds: float) -> str:
    seconds = int(max(seconds, 0))
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


class PlainProgress(Callback):
    """Plain text lines, good in logs, CI and pipes: one line per epoch (with throughput
    and ETA) and, within long epochs, a progress line at most every ``every_s`` seconds."""

    def __init__(self, stream: TextIO | None = None, every_s: float = 10.0):
        self.stream = stream or sys.stderr
        self.every_s = every_s
        self._rate = 0.0

    def _print(self, text: str) -> None:
        print(text, file=self.stream, flush=True)

    def _eta(self, trainer: Trainer) -> str:
        total, step = trainer.total_steps, trainer.state.global_step
        if not total or not step:
            return ""
        elapsed = time.perf_counter() - self._start
        return f"  eta {_eta(elapsed / step * (total - step))}"

    def on_fit_start(self, trainer: Trainer) -> None:
        cfg = trainer.config
        total = trainer.total_steps if trainer.total_steps is not None else "?"
        self._start = self._last = time.perf_counter()
        self._print(f"overt: training on {trainer.device} ({trainer.precision.mode}), {cfg.epochs} epochs, "
                    f"{total} optimizer steps, batch {cfg.batch_size} x accumulate {cfg.accumulate}")
        self._print(model_text(trainer.model_info))

    def on_log(self, trainer: Trainer, logs: dict[str, float]) -> None:
        self._rate = logs["train/samples_per_sec"]
        now = time.perf_counter()
        if now - self._last < self.every_s:
            return
        self._last = now
        self._print(f"epoch {int(logs['epoch'])}/{trainer.config.epochs}  "
                    f"step {int(logs['step'])}/{trainer.total_steps or '?'}  loss {logs['train/loss']:.4f}  "
                    f"{self._rate:.0f} samples/s{self._eta(trainer)}")

    def on_epoch_end(self, trainer: Trainer, epoch: int, metrics: dict[str, float]) -> None:
        self._last = time.perf_counter()
        rate = f"  {self._rate:.0f} samples/s" if self._rate else ""
        self._print(f"epoch {epoch + 1}/{trainer.config.epochs}  {_fmt(metrics)}{rate}{self._eta(trainer)}")

    def on_fit_end(self, trainer: Trainer, summary: dict[str, Any]) -> None:
        self._print(summary_text(summary))


class BarProgress(PlainProgress):
    """A rich progress bar with throughput and ETA; epoch results printed above it."""

    def on_fit_start(self, trainer: Trainer) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

        self.console = Console(file=self.stream)
        self.progress = Progress(
            TextColumn("[bold]epoch {task.fields[epoch]}"), BarColumn(), MofNCompleteColumn(),
            TextColumn("{task.fields[rate]} samples/s"), TextColumn("loss {task.fields[loss]}"),
            TimeRemainingColumn(), console=self.console, transient=False,
        )
        self.progress.start()
        self.task = self.progress.add_task("train", total=trainer.total_steps, epoch=1, rate="-", loss="-")
        self.console.print(f"overt: training on {trainer.device} ({trainer.precision.mode}), "
                           f"{trainer.config.epochs} epochs", highlight=False)
        self.console.print(model_text(trainer.model_info), highlight=False, markup=False)

    def on_step_end(self, trainer: Trainer, logs: dict[str, Any]) -> None:
        # the run's own step count: a resumed run's bar starts where the run is, not at 0
        self.progress.update(self.task, completed=trainer.state.global_step)

    def on_log(self, trainer: Trainer, logs: dict[str, float]) -> None:
        self.progress.update(self.task, epoch=f"{int(logs['epoch'])}/{trainer.config.epochs}",
                             rate=f"{logs['train/samples_per_sec']:.0f}", loss=f"{logs['train/loss']:.4f}")

    def on_epoch_end(self, trainer: Trainer, epoch: int, metrics: dict[str, float]) -> None:
        self.console.print(f"epoch {epoch + 1}/{trainer.config.epochs}  {_fmt(metrics)}")

    def on_fit_end(self, trainer: Trainer, summary: dict[str, Any]) -> None:
        if summary.get("status") == "completed":  # a finished run's bar is full, whatever was estimated
            steps = int(summary.get("steps", 0))
            self.progress.update(self.task, total=steps, completed=steps)
        self.progress.stop()
        self.console.print(summary_text(summary))

    def on_exception(self, trainer: Trainer, error: BaseException) -> None:
        self.progress.stop()


def summary_text(summary: dict[str, Any]) -> str:
    best = summary.get("best", {})
    status = summary["status"]
    epochs = summary["epochs"]
    done = f"{status} {epochs} epochs" if status == "completed" else f"{status} after {epochs} epochs"
    resumed = summary.get("wall_time_since_resume_s")
    time_text = (f"{summary['wall_time_s']:.1f}s in all ({resumed:.1f}s since the resume)" if resumed is not None
                 else f"{summary['wall_time_s']:.1f}s")
    lines = [f"overt: {done}, {summary['steps']} steps in {time_text} on {summary['device']} ({summary['precision']})"]
    if summary.get("final"):
        lines.append(f"  final: {_fmt(summary['final'])}")
    if best.get("value") is not None:
        lines.append(f"  best {best['metric']}={best['value']:.4g} at step {best['step']}")
    if summary.get("skipped_steps"):
        lines.append(f"  GradScaler skipped {summary['skipped_steps']} steps (inf/NaN gradients)")
    if summary.get("findings"):
        lines.append(f"  guards: {len(summary['findings'])} finding(s), see above")
    if summary.get("run_dir"):
        lines.append(f"  run directory: {summary['run_dir']}")
    return "\n".join(lines)


def progress_callback(mode: str, stream: TextIO | None = None) -> Callback | None:
    """``auto``: a bar on a terminal, plain lines otherwise; ``off``: nothing."""
    stream = stream or sys.stderr
    if mode == "off":
        return None
    if mode == "bar" or (mode == "auto" and stream.isatty()):
        return BarProgress(stream)
    return PlainProgress(stream)
