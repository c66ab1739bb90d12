"""The probes, registered in one place: every module of the :mod:`overt.doctor.probes` package
that defines ``PROBE = Probe(...)`` is a probe.

A probe module declares its id, title, position, what it needs, how it runs on the setup and how
its evidence renders in the readiness note; :func:`overt.doctor.doctor` and the note
(:mod:`overt.doctor.note`) iterate :func:`probes`.  Adding a probe is adding one module (and its
test): nothing else is edited.  See ``docs/doctor.md``."""

from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable

if TYPE_CHECKING:
    from overt.doctor.readiness import Readiness
    from overt.doctor.result import ProbeResult
    from overt.doctor.setup import Setup

#: the package whose modules are searched for ``PROBE``
PACKAGE = "overt.doctor.probes"

#: what a probe may need: a training batch through the model (``forward``), a loss that can train on
#: the targets (``loss``).  A probe whose need an earlier probe took away is skipped with the reason.
NEEDS = ("forward", "loss")


@dataclass(frozen=True)
class Probe:
    """One readiness probe.

    - ``id``: its name on the command line (``--only``) and in the JSON (``overfit-batch``);
      ``title`` its heading in the note.
    - ``order``: where it runs (ascending; the built-in probes use 10, 20, ... 120).
    - ``run(setup)``: the probe on a :class:`~overt.doctor.setup.Setup` (the user's objects, the
      config, the doctor's settings), returning a :class:`~overt.doctor.result.ProbeResult`.
    - ``needs``: of :data:`NEEDS`; ``blocks(result)``: the needs this probe's result takes away
      from the probes after it (``{"loss": "why"}``), e.g. the data probe when no batch runs.
    - ``opt_in``: the doctor setting that asks for a probe that runs only when asked
      (``lr_find``, ``bench``); None: it always runs.
    - ``settings``: the probe's own ``key=value`` settings and their defaults
      (:meth:`Setup.setting <overt.doctor.setup.Setup.setting>` reads them).
    - ``section(readiness, result)``: the note's own section for this probe's evidence (lines, after
      the evidence); ``risks(readiness, result)``: ``(rank, sentence)`` for the note's risks,
      which are listed by rank (lower first: the more concrete), one probe's after another's.
    """

    id: str
    title: str
    order: int
    run: Callable[[Setup], ProbeResult]
    needs: tuple[str, ...] = ()
    blocks: Callable[[ProbeResult], dict[str, str]] | None = None
    opt_in: str | None = None
    settings: dict[str, Any] = field(default_factory=dict)
    section: Callable[[Readiness, ProbeResult], list[str]] | None = None
    risks: Callable[[Readiness, ProbeResult], list[tuple[int, str]]] | None = None

    def __post_init__(self) -> None:
        unknown = [n for n in self.needs if n not in NEEDS]
        if unknown:
            raise ValueError(f"probe {self.id!r} needs {unknown[0]!r}; a probe needs some of {', '.join(NEEDS)}")


_found: tuple[Probe, ...] | None = None


def probes() -> tuple[Probe, ...]:
    """Every registered probe, in the order they run."""
    global _found
    if _found is None:
        package = importlib.import_module(PACKAGE)
        by_id: dict[str, Probe] = {}
        for info in sorted(pkgutil.iter_modules(package.__path__), key=lambda i: i.name):
            module = importlib.import_module(f"{PACKAGE}.{info.name}")
            probe = getattr(module, "PROBE", None)
            if not isinstance(probe, Probe):
                continue
            if probe.id in by_id:
                raise ValueError(f"two probes have the id {probe.id!r} ({PACKAGE}.{info.name} and another module)")
            by_id[probe.id] = probe
        _found = tuple(sorted(by_id.values(), key=lambda p: (p.order, p.id)))
    return _found


def reset() -> None:
    """Forget the probes found, so the next :func:`probes` searches the package again (after a
    module was added to it)."""
    global _found
    _found = None


def ids() -> tuple[str, ...]:
    """The probe ids in the order they run."""
    return tuple(p.id for p in probes())


def get(probe_id: str) -> Probe:
    """The probe with this id."""
    for p in probes():
        if p.id == probe_id:
            return p
    raise KeyError(probe_id)


def settings() -> dict[str, Any]:
    """Every probe's own settings with their defaults."""
    return {k: v for p in probes() for k, v in p.settings.items()}
