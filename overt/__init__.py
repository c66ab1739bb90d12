"""overt: PyTorch training that never fails silently.

``import overt`` is light: it imports neither torch nor any optional
integration until a name that needs it is used.

Public names (imported lazily):

- :class:`Trainer`, :func:`fit` -- the training engine with its default plug-ins (``overt.compose``)
- :class:`Recipe` -- what a recipe's ``build(cfg)`` returns
- :class:`TrainConfig` -- the engine's configuration
- :class:`Callback` -- the engine's plug-in base class
- :func:`guard` -- runtime guards for a hand-written loop (``overt.guards``)
- :class:`Checkpointer` -- atomic, verified, resumable checkpoints (``overt.checkpoint``)
- :class:`Predictor` -- a finished run's model on new inputs (``overt.predict``)
- :mod:`metrics` -- metric functions for recipes
- :func:`doctor` -- readiness probes and the readiness note (``overt.doctor``)
- :mod:`testing` -- smoke-test assertions for what you train (and a pytest plugin)
- :func:`pad_collate`, :class:`PadCollate` -- batches of variable-length sequences, with their lengths
"""

from __future__ import annotations

import importlib
TYPE_CHECKING = False  # importing typing costs ~10 ms: only type checkers need it here
if TYPE_CHECKING:
    from typing import Any

__version__ = "0.1.0"

_LAZY: dict[str, tuple[str, str]] = {
    "Trainer": ("overt.compose", "Trainer"),
    "fit": ("overt.compose", "fit"),
    "Recipe": ("overt.recipes.base", "Recipe"),
    "TrainConfig": ("overt.config", "TrainConfig"),
    "Callback": ("overt.engine.callbacks", "Callback"),
    "TrainState": ("overt.engine.state", "TrainState"),
    "guard": ("overt.guards", "guard"),
    "Checkpointer": ("overt.checkpoint", "Checkpointer"),
    "Predictor": ("overt.predict.predictor", "Predictor"),
    "Preprocessing": ("overt.preprocessing", "Preprocessing"),
    "OvertError": ("overt.errors", "OvertError"),
    "metrics": ("overt.engine.metrics", ""),
    "pad_collate": ("overt.engine.collate", "pad_collate"),
    "PadCollate": ("overt.engine.collate", "PadCollate"),
    "catalog": ("overt.catalog", ""),
    "doctor": ("overt.doctor", ""),  # a callable module: overt.doctor(model, ...) runs the probes
    "testing": ("overt.testing", ""),
}

__all__ = ["__version__", *_LAZY]


def __getattr__(name: str) -> Any:
    try:
        module_name, attr = _LAZY[name]
    except KeyError:
        raise AttributeError(f"module 'overt' has no attribute {name!r}") from None
    module = importlib.import_module(module_name)
    value = getattr(module, attr) if attr else module
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
