"""``overt.guard(...)``: the guards in a hand-written training loop."""

from __future__ import annotations

from typing import Any, Iterable, Sequence

import torch
from torch import nn

from overt.findings import Finding
from overt.guards.options import GuardOptions
from overt.guards.session import GuardSession
from overt.guards.unwrap import unwrap_model, unwrap_optimizer


def _as_list(x: Any, kind: type) -> list[Any]:
    if x is None:
        return []
    if isinstance(x, kind) or not isinstance(x, (list, tuple, set, dict)) and not hasattr(x, "__iter__"):
        return [x]  # one object (a framework's wrapper need not subclass ``kind``)
    return list(x.values()) if isinstance(x, dict) else list(x)


def watch(session: GuardSession, models: Any = None, optimizers: Any = None) -> None:
    """Watch ``models`` and ``optimizers`` (one each or several), seeing through the frameworks'
    wrappers (:mod:`overt.guards.unwrap`).  Never raises: an object the guards cannot watch is
    said once on stderr and training goes on without that object's checks."""
    for m in _as_list(models, nn.Module):
        try:
            inner = unwrap_model(m)
            if not isinstance(inner, nn.Module):
                raise TypeError(f"{type(m).__name__} is not a torch.nn.Module")
            session.watch_model(inner)
        except Exception as exc:  # never break training
            session.check_failed(f"watch_model({type(m).__name__})", exc)
    for opt in _as_list(optimizers, torch.optim.Optimizer):
        try:
            inner = unwrap_optimizer(opt)
            if not isinstance(inner, torch.optim.Optimizer) or "_optimizer_step_pre_hooks" not in vars(inner):
                raise TypeError(f"{type(opt).__name__} is not (and does not wrap) a torch.optim.Optimizer")
            session.watch_optimizer(inner)
        except Exception as exc:  # never break training
            session.check_failed(f"watch_optimizer({type(opt).__name__})", exc)


class Guard:
    """Runtime guards attached to models and optimizers.

    Findings are printed to stderr as they are found; :meth:`report` does the
    final checks, removes every hook, prints a summary, writes the JSON report
    (when ``report_path`` was given) and returns the findings.  Also a context
    manager: ``with overt.guard(model, opt) as g: ...`` reports on exit, however the block exits
    (the JSON report included).
    """

    def __init__(self, session: GuardSession):
        self.session = session

    @property
    def findings(self) -> list[Finding]:
        """Findings so far."""
        return list(self.session.reporter.findings)

    def report(self, *, quiet: bool = False) -> list[Finding]:
        """Finish: last device reads, end-of-run checks, hooks removed.  Returns the findings."""
        return self._finish(quiet=quiet)

    def _finish(self, *, quiet: bool = False, error: BaseException | None = None) -> list[Finding]:
        first = not self.session.closed
        findings = self.session.close(error=error) if error is not None else self.session.close()
        if first:
            out = self.session.options.out()
            if not quiet:
                print(self.session.reporter.summary_line(), file=out, flush=True)
            if self.session.options.report_path:
                self.session.reporter.write(self.session.options.report_path)
        return findings

    close = report

    def __enter__(self) -> Guard:
        return self

    def __exit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> None:
        # the summary and the JSON report are written however the block exits (an exception, a
        # guard that stopped the run, KeyboardInterrupt, sys.exit)
        self._finish(error=exc)


def guard(
    model: nn.Module | Iterable[nn.Module],
    optimizer: torch.optim.Optimizer | Iterable[torch.optim.Optimizer] | None = None,
    *,
    scheduler: Any = None,
    strict: bool = False,
    ignore: Sequence[str] = (),
    check_every: int = 50,
    warmup_steps: int = 5,
    stop_on_error: bool = True,
    report_path: str | None = None,
    overhead_budget: float | None = None,
    stream: Any = None,
) -> Guard:
    """Attach the runtime guards to ``model`` (one module or several) and ``optimizer``
    (one or several; e.g. a GAN's two).  Wrapped ones are fine: what
    ``accelerator.prepare(...)`` returns, Lightning's optimizers, DDP/FSDP/``torch.compile``
    modules (the guards watch the module and optimizer inside).  Two lines in a hand-written loop::

        g = overt.guard(model, optimizer)
        ...  # the unchanged training loop
        g.report()

    ``ignore`` silences slugs or codes; ``strict`` makes warnings errors;
    ``check_every``/``warmup_steps`` set how often the expensive checks run
    (``overhead_budget`` is ignored, see
    :class:`~overt.guards.options.GuardOptions`);
    ``stop_on_error`` raises :class:`overt.guards.GuardError` before an
    optimizer step that would corrupt the weights.
    """
    options = GuardOptions(strict=strict, ignore=frozenset(ignore), check_every=check_every,
                           warmup_steps=warmup_steps, stop_on_error=stop_on_error,
                           report_path=report_path, overhead_budget=overhead_budget, stream=stream,
                           silence_with="ignore=['{slug}']")
    session = GuardSession(options)
    watch(session, model, optimizer)
    for sc in _as_list(scheduler, object) if isinstance(scheduler, (list, tuple)) else [scheduler]:
        session.scheds.add(sc)
    return Guard(session)
