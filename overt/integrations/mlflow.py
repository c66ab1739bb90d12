"""MLflow tracking as an engine callback (``mlflow=true``; the ``mlflow`` extra).

One MLflow run per overt run, logged through :class:`mlflow.MlflowClient` (no global
"active run" is touched, so a user's own MLflow code is unaffected):

- params: the resolved config, every key (strings as they are, other values as JSON);
- metrics: every record ``metrics.jsonl`` gets, at the same step (log points and epoch ends,
  ``epoch`` included), kept in memory and sent in one ``log_batch`` call at the first log point
  or epoch end :data:`SEND_EVERY_S` seconds after the last send, and at the end: no call into
  MLflow per step (one database commit per call with a sqlite store), no MLflow logging thread
  (whose shutdown polls its queue once a second), and the MLflow UI still follows a long run;
- tags: ``overt.version``, ``torch.version``, ``overt.device``, ``overt.precision``,
  ``overt.run_dir``, and at the end ``overt.status`` and ``overt.findings`` (a count);
- artifacts under ``overt/``: ``summary.json``, ``guards.json`` (the guard findings),
  ``config.yaml`` and the final weights ``model.safetensors``.

A run that fails is marked FAILED (KILLED on Ctrl-C) with the error in ``overt.error``.
``overt resume`` continues the same MLflow run (its id is kept in ``RUN_DIR/mlflow.json``);
the points logged between the checkpoint and the crash then appear twice in MLflow.
If the tracking store fails mid-run, training goes on: one warning is printed and
``metrics.jsonl`` still has everything. MLflow's own INFO lines are kept quiet while overt calls
it (its loggers at WARNING for the call, then restored)."""

from __future__ import annotations

import contextlib
import json
import logging
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from overt.engine.callbacks import Callback
from overt.errors import OvertError

if TYPE_CHECKING:
    from overt.engine.loop import Trainer

EXTRA_HINT = ("pip install 'overt[mlflow]'   (the mlflow extra)"
              "; from a checkout on a CPU-only machine: "
              "pip install -c constraints-cpu.txt -e '.[mlflow]' (keeps the CPU torch build)")


SEND_EVERY_S = 10.0
"""Seconds after the last send from which the next log point or epoch end sends the points kept."""
MAX_METRICS_PER_BATCH = 1000  # MLflow's limit on the metrics of one log_batch call


@contextlib.contextmanager
def _quiet_mlflow_logs() -> Any:
    """MLflow's loggers (creating a store's tables, a run's URL) and its migrations' (alembic) at
    WARNING for one call of overt's; their levels are restored after it."""
    loggers = [logging.getLogger(name) for name in ("mlflow", "alembic")]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.WARNING)
    try:
        yield
    finally:
        for lg, level in zip(loggers, levels):
            lg.setLevel(level)


def param_value(value: Any) -> str:
    """How a config value is logged as an MLflow param."""
    text = value if isinstance(value, str) else json.dumps(value)
    return text[:6000]  # MLflow's limit on a param value


class MLflowCallback(Callback):
    """Logs a run to MLflow; ``tracking_uri`` None means MLflow's own default
    (``MLFLOW_TRACKING_URI``, else ``sqlite:///mlflow.db`` in the current folder)."""

    def __init__(self, tracking_uri: str | None = None, experiment: str = "overt", run_name: str | None = None,
                 run_dir: str | Path | None = None):
        """Connects to the tracking store and finds (or creates) the experiment now, so that a
        missing extra or an unreachable store is an error before anything is trained or written."""
        try:
            from mlflow import MlflowClient
        except ImportError:
            raise OvertError("mlflow=true, but MLflow is not installed",
                             why="MLflow tracking is an optional extra of overt", fix=EXTRA_HINT) from None
        self.run_dir = Path(run_dir) if run_dir is not None else None
        self.run_name = run_name or (self.run_dir.name if self.run_dir is not None else None)
        self._where = tracking_uri or "MLflow's default store (MLFLOW_TRACKING_URI, else sqlite:///mlflow.db)"
        self.client = self._store_call(lambda: MlflowClient(tracking_uri=tracking_uri))
        self.experiment_id = self._store_call(lambda: self._experiment(experiment))
        self.run_id: str | None = None
        self._pending: list[Any] = []  # metrics not yet sent (mlflow.entities.Metric)
        self._sent_at = time.monotonic()
        self._broken = False

    def _store_call(self, fn: Any) -> Any:
        try:
            with _quiet_mlflow_logs():
                return fn()
        except Exception as exc:  # noqa: BLE001 - any store error: explained, before training starts
            raise OvertError(
                f"cannot use the MLflow tracking store {self._where}: {type(exc).__name__}: {exc}",
                why="the run would train without the tracking you asked for",
                fix="check mlflow_uri (a server URL, or e.g. sqlite:///mlflow.db) and that the server is up, "
                    "or set mlflow=false",
            ) from None

    def _experiment(self, name: str) -> str:
        found = self.client.get_experiment_by_name(name)
        return str(found.experiment_id if found else self.client.create_experiment(name))

    # -- start -----------------------------------------------------------------------

    def on_fit_start(self, trainer: Trainer) -> None:
        self.run_id = self._store_call(lambda: self._continued_run(trainer) or self._new_run(trainer))
        if self.run_dir is not None:
            from overt.run.rundir import RunDir

            run = RunDir(self.run_dir)
            run.path.mkdir(parents=True, exist_ok=True)
            run.write_text(run.mlflow, json.dumps({"tracking_uri": self.client.tracking_uri, "run_id": self.run_id})
                           + "\n")
        # where it writes: with no mlflow_uri, MLflow's default is the current folder (mlflow.db, mlruns/)
        artifacts = self._store_call(lambda: self.client.get_run(self.run_id).info.artifact_uri)
        print(f"overt: MLflow run {self.run_id} in {self.client.tracking_uri} (artifacts: {artifacts})",
              file=sys.stderr, flush=True)

    def _continued_run(self, trainer: Trainer) -> str | None:
        """The MLflow run of a run directory being resumed, marked running again."""
        if self.run_dir is None or not trainer.resumed_from:
            return None
        try:
            from overt.run.rundir import RunDir

            saved = json.loads(RunDir(self.run_dir).mlflow.read_text())
        except (OSError, ValueError):
            return None
        run_id = saved.get("run_id")
        if not run_id or saved.get("tracking_uri") != self.client.tracking_uri:
            return None
        self.client.update_run(run_id, status="RUNNING")
        self.client.set_tag(run_id, "overt.resumed_at_step", str(trainer.state.global_step))
        return str(run_id)

    def _new_run(self, trainer: Trainer) -> str:
        from mlflow.entities import Param

        import torch
        from overt import __version__

        tags = {"overt.version": __version__, "torch.version": torch.__version__,
                "overt.device": str(trainer.device), "overt.precision": trainer.precision.mode}
        if self.run_dir is not None:
            tags["overt.run_dir"] = str(self.run_dir.resolve())
        run_id = self.client.create_run(self.experiment_id, run_name=self.run_name, tags=tags).info.run_id
        params = [Param(k, param_value(v)) for k, v in trainer.config.model_dump(mode="json").items()]
        for i in range(0, len(params), 100):  # MLflow takes at most 100 params per batch
            self.client.log_batch(run_id, params=params[i:i + 100])
        return str(run_id)

    # -- during the run --------------------------------------------------------------

    def _log(self, record: dict[str, Any]) -> None:
        if self._broken or self.run_id is None:
            return
        from mlflow.entities import Metric

        step, now = int(record["step"]), int(time.time() * 1000)
        self._pending.extend(Metric(k, float(v), now, step) for k, v in record.items()
                             if k != "step" and isinstance(v, (int, float)) and not isinstance(v, bool))

    def on_log(self, trainer: Trainer, logs: dict[str, float]) -> None:
        self._log(logs)
        self._flush_if_due()

    def on_epoch_end(self, trainer: Trainer, epoch: int, metrics: dict[str, float]) -> None:
        self._log({"step": trainer.state.global_step, "epoch": epoch + 1, **metrics})  # from 1, as printed
        self._flush_if_due()

    def _flush_if_due(self) -> None:
        if time.monotonic() - self._sent_at >= SEND_EVERY_S:
            self._flush()

    def _flush(self) -> None:
        """Sends the points kept since the last send, synchronously, in as few calls as MLflow allows."""
        pending, self._pending, self._sent_at = self._pending, [], time.monotonic()
        run_id = self.run_id
        for i in range(0, len(pending), MAX_METRICS_PER_BATCH):
            chunk = pending[i:i + MAX_METRICS_PER_BATCH]
            self._guarded(lambda chunk=chunk: self.client.log_batch(run_id, metrics=chunk))

    def _guarded(self, fn: Any) -> None:
        if self._broken:
            return
        try:
            with _quiet_mlflow_logs():
                fn()
        except Exception as exc:  # noqa: BLE001 - a tracking failure must not end the training run
            self._broken = True
            print(f"overt: MLflow logging failed ({type(exc).__name__}: {exc}); training continues without "
                  f"MLflow, metrics.jsonl has every point", file=sys.stderr, flush=True)

    # -- end -------------------------------------------------------------------------

    def on_summary(self, trainer: Trainer, summary: dict[str, Any]) -> None:
        if self.run_id is not None:
            summary["mlflow"] = {"tracking_uri": self.client.tracking_uri, "run_id": self.run_id}

    def on_fit_end(self, trainer: Trainer, summary: dict[str, Any]) -> None:
        if self.run_id is None:
            return
        self._flush()
        run_id, findings = self.run_id, summary.get("findings") or []

        def finish() -> None:
            from safetensors.torch import save_model

            self.client.log_dict(run_id, json.loads(json.dumps(summary, default=str)), "overt/summary.json")
            self.client.log_dict(run_id, {"findings": findings}, "overt/guards.json")
            self.client.log_text(run_id, trainer.config.to_yaml(), "overt/config.yaml")
            with tempfile.TemporaryDirectory() as tmp:
                weights = Path(tmp) / "model.safetensors"
                save_model(trainer.model, str(weights))
                self.client.log_artifact(run_id, str(weights), "overt")
            for key, value in (("overt.status", summary.get("status", "completed")),
                               ("overt.findings", len(findings))):
                self.client.set_tag(run_id, key, str(value))
            self.client.set_terminated(run_id, "FINISHED")

        self._guarded(finish)

    def on_exception(self, trainer: Trainer, error: BaseException) -> None:
        if self.run_id is None:
            return
        self._flush()
        run_id = self.run_id

        def fail() -> None:
            self.client.set_tag(run_id, "overt.status", "interrupted" if isinstance(error, KeyboardInterrupt)
                                else "failed")
            self.client.set_tag(run_id, "overt.error", f"{type(error).__name__}: {error}"[:5000])
            self.client.set_terminated(run_id, "KILLED" if isinstance(error, KeyboardInterrupt) else "FAILED")

        self._guarded(fail)
