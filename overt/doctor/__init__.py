"""``overt doctor``: readiness probes that prove a training setup works before the long run,
and the readiness note with the evidence.

- ``overt.doctor(model, optimizer, loss_fn, train_data, val_data=None, **settings)`` runs the
  probes and returns a :class:`Readiness` (``.passed``, ``.verdicts``, ``.to_markdown()``,
  ``.to_json()``, ``.write(dir)``).  The module itself is callable, so ``overt.doctor(...)``
  works however it was imported.
- ``overt.doctor(lightning_module, datamodule, **settings)`` and ``overt.doctor(hf_trainer, **settings)``:
  the same probes on a framework project, with the framework's own loss
  (:mod:`overt.doctor.frameworks`; ``loss_kind="cross_entropy"`` for the ln(C) reference).
- :mod:`overt.doctor.registry`: the probes, one module each in :mod:`overt.doctor.probes` (a module
  that defines ``PROBE = Probe(...)`` is a probe: its id, title, order, needs, how it runs and
  how its evidence renders in the note).
- :mod:`overt.doctor.probes`: each probe on its own (``probes.overfit_batch(...)`` ...), returning a
  :class:`ProbeResult`.
- ``overt doctor [recipe.py | config.yaml | name] [key=value ...]`` on the command line.

See ``docs/doctor.md``.
"""

from __future__ import annotations

import sys
import types
from typing import Any

from overt.doctor.api import DoctorSettings, doctor
from overt.doctor.readiness import Readiness
from overt.doctor.result import ProbeResult, Verdict

__all__ = ["ORDER", "DoctorSettings", "ProbeResult", "Readiness", "Verdict", "doctor"]


def __getattr__(name: str) -> Any:
    """``ORDER``: the probe ids in the order they run (from :mod:`overt.doctor.registry`)."""
    if name == "ORDER":
        from overt.doctor import registry

        return registry.ids()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class _CallableModule(types.ModuleType):
    """``overt.doctor`` is this package; calling it runs :func:`doctor`."""

    def __call__(self, *args: Any, **kwargs: Any) -> Readiness:
        if args:
            from overt.doctor.frameworks import is_project, project_doctor

            if is_project(args[0]):  # a LightningModule (+ DataModule) or a transformers Trainer
                return project_doctor(*args, **kwargs)
        return doctor(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
