"""The loop's position: everything that says where training is."""

from __future__ import annotations

import copy
from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass
class TrainState:
    """Where the run is.  Saved in checkpoints; restoring it resumes the loop exactly.

    ``batch_index`` counts micro-batches consumed in the current epoch;
    ``samples_seen`` counts training samples consumed in the current epoch
    (the sampler skips that many on resume).  ``global_step`` counts optimizer
    steps since the start of the run.  ``callbacks`` holds the state of callbacks that decide
    where the run goes (early stopping's count of validations without an improvement, by the
    callback's name), so that it is saved and restored with the position.
    """

    epoch: int = 0
    global_step: int = 0
    batch_index: int = 0
    samples_seen: int = 0
    best_metric: float | None = None
    best_step: int | None = None
    callbacks: dict[str, dict[str, Any]] = field(default_factory=dict)

    def state_dict(self) -> dict[str, Any]:
        return asdict(self)

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.callbacks = {}  # a checkpoint written before this field existed holds none
        for key, value in state.items():
            if key == "callbacks":
                value = copy.deepcopy(value) if isinstance(value, dict) else {}
            setattr(self, key, value)
