"""The runtime guards inside another framework's training loop (Lightning, the Hugging Face
``Trainer``): what :class:`overt.integrations.lightning.OvertCallback` and
:class:`overt.integrations.hf.OvertTrainerCallback` share.

One :class:`~overt.guards.session.GuardSession` per fit, the same checks as ``overt.guard``
and the engine's ``GuardCallback`` (nothing is duplicated here): this module only finds the
real module and optimizers behind the framework's wrappers, numbers findings with the
framework's own step counter, and says them in the framework's terms (its loggers, its
output directory).  Per step it does nothing but compare two host integers: no device value
is read outside the guards' own checked steps.

Never an exception into the user's training: the guards' hooks follow the never-break
policy, and an error finding (stale or non-finite gradients) does not raise -- the
framework is asked to stop gracefully instead (``stop_on_error=True``), as its own early
stopping would.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

from overt.catalog import Severity
from overt.findings import Finding

REPORT_NAME = "guards.json"


class FrameworkGuards:
    """A guard session driven by a framework's callback hooks."""

    def __init__(self, *, strict: bool = False, ignore: Sequence[str] = (), check_every: int = 50,
                 warmup_steps: int = 5, overhead_budget: float | None = None, stop_on_error: bool = False,
                 stream: Any = None):
        from overt.guards.options import GuardOptions

        # the session itself never raises: stopping is the framework's job (see should_stop)
        self.options = GuardOptions(strict=strict, ignore=frozenset(ignore), check_every=check_every,
                                    warmup_steps=warmup_steps, overhead_budget=overhead_budget,
                                    stop_on_error=False, stream=stream, silence_with="ignore=['{slug}']")
        self.stop_on_error = stop_on_error
        self.session: Any = None
        self.seen = 0  # findings already handed to the framework (new_findings)
        self.report_path: Path | None = None
        self.busy: Any = None  # overt.engine.busy.BusyProbe of the fit in progress

    # -- start -----------------------------------------------------------------------
    def start(self, *, models: Iterable[Any] = (), optimizers: Iterable[Any] = (), schedulers: Iterable[Any] = (),
              names_from: Any = None, step_source: Callable[[], int] | None = None,
              discover: bool = False) -> None:
        """A new session watching ``models`` and ``optimizers`` (wrapped ones are unwrapped).

        ``names_from``: a module whose parameter names the findings use (a LightningModule) when
        the models are ``discover``-ed (the outermost modules with parameters that run forward
        while :meth:`discovering` is on)."""
        from overt.guards.api import watch
        from overt.guards.session import GuardSession
        from overt.guards.unwrap import unwrap_model

        if self.session is not None and not self.session.closed:
            self.session.close()
        self.seen = 0
        from overt.engine.busy import BusyProbe

        self.busy = BusyProbe("torch.set_num_threads(1) at the top of the script (or OMP_NUM_THREADS=1)")
        session = self.session = GuardSession(self.options)
        session.step_source = step_source
        try:
            if names_from is not None:
                root = unwrap_model(names_from)
                prefix = type(root).__name__
                for name, p in root.named_parameters():
                    session.param_names.setdefault(id(p), f"{prefix}.{name}")
            watch(session, list(models), list(optimizers))
            for sc in schedulers:
                if sc is not None:
                    session.scheds.add(getattr(sc, "scheduler", sc))  # Accelerate's AcceleratedScheduler
        except Exception as exc:  # never break training
            session.check_failed("FrameworkGuards.start", exc)
        if discover:
            self.discovering(True)

    def discovering(self, on: bool) -> None:
        """Find the modules the framework really calls (during the first training batch)."""
        if self.session is not None and not self.session.closed:
            try:
                self.session.discover_models(on)
            except Exception as exc:  # never break training
                self.session.check_failed("FrameworkGuards.discovering", exc)

    # -- during the run: host integers only ----------------------------------------------
    def step_done(self, main: bool = True) -> None:
        """After a training step: the busy-machine note (:mod:`overt.engine.busy`) once, when it applies,
        on the guards' stream (``main``: this process prints)."""
        if self.busy is None or self.busy.done:
            return
        text = self.busy.step()
        if text and main:
            try:
                print(text, file=self.options.out(), flush=True)
            except (OSError, ValueError):
                pass

    def new_findings(self) -> list[Finding]:
        """Findings recorded since the last call (a list-length comparison: no device read)."""
        if self.session is None:
            return []
        findings = self.session.reporter.findings
        if len(findings) == self.seen:
            return []
        new = findings[self.seen:]
        self.seen = len(findings)
        return new

    def counts(self) -> dict[str, float]:
        """``overt/findings`` and ``overt/errors``: what the framework's loggers get."""
        findings = self.session.reporter.findings if self.session is not None else []
        return {"overt/findings": float(len(findings)),
                "overt/errors": float(sum(f.severity == Severity.ERROR for f in findings))}

    def should_stop(self, new: list[Finding]) -> bool:
        """Whether to ask the framework to stop: an error finding and ``stop_on_error``."""
        return self.stop_on_error and any(f.severity == Severity.ERROR for f in new)

    # -- end ------------------------------------------------------------------------------
    def finish(self, out_dir: str | Path | None, error: BaseException | None = None) -> list[Finding]:
        """Close the session (its end-of-run checks), print the summary line, write
        ``out_dir/guards.json`` (atomically).  Returns every finding.

        Under several processes (a DDP / FSDP strategy) every process calls this when training
        ends: the findings of every rank are gathered on rank 0 (one ``gather_object``, each
        finding naming the ranks that made it), which prints the other ranks' findings once and
        is the one to pass an ``out_dir``.  After an ``error`` nothing is gathered (a peer may
        be gone): each process keeps its own findings."""
        if self.session is None:
            return []
        first = not self.session.closed
        findings = self.session.close(error=error)
        if not first:
            return findings
        out = self.options.out()
        if error is None:
            findings = self._gather(findings, out)
        try:
            print(self.session.reporter.summary_line(), file=out, flush=True)
        except (OSError, ValueError):
            pass
        if out_dir is not None:
            try:
                path = Path(out_dir) / REPORT_NAME
                self.session.reporter.write(path)  # atomic: a reader sees the old file or the new one
                self.report_path = path
            except OSError as exc:  # an unwritable folder loses the file, not the run
                self.session.check_failed("FrameworkGuards.finish (guards.json)", exc)
        return findings

    def _gather(self, findings: list[Finding], out: Any) -> list[Finding]:
        """Every rank's findings on rank 0 (a collective; a single process keeps its own)."""
        from overt.torchrun import Topology

        if Topology.of_group().world_size < 2:
            return findings
        from overt.guards.distributed import gather_findings
        from overt.guards.report import PREFIX

        try:
            gathered = gather_findings(findings)
        except Exception as exc:  # a peer gone: each rank keeps its own findings
            self.session.check_failed("FrameworkGuards.finish (gathering the ranks' findings)", exc)
            return findings
        if gathered is None:  # not rank 0: rank 0 reports them
            return findings
        try:
            for finding in gathered:  # the other ranks' own findings, printed here once
                if finding.details.get("ranks") != [0]:
                    print(PREFIX + finding.format(), file=out, flush=True)
        except (OSError, ValueError):
            pass
        self.session.reporter.findings = gathered
        self.seen = min(self.seen, len(gathered))
        return gathered

    @property
    def findings(self) -> list[Finding]:
        return list(self.session.reporter.findings) if self.session is not None else []


def finding_text(findings: Iterable[Finding]) -> str:
    """Findings as Markdown lines (for a logger's text panel)."""
    return "\n".join(f"- `{f.code} {f.slug}` (step {f.step}): {f.message}" for f in findings)


__all__ = ["FrameworkGuards", "REPORT_NAME", "finding_text"]
