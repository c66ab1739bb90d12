"""Loading weights into a model that may differ from the saved one (fine-tuning).

Strict by default: any missing key, unexpected key or shape mismatch is an
error that names them all.  With ``strict=False`` the matching tensors are
loaded and the :class:`LoadReport` says what was left out.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn

from overt.checkpoint.codec import CheckpointError


@dataclass
class LoadReport:
    """What a weight load did: ``loaded`` keys, and the ``missing`` (in the model, not in the file),
    ``unexpected`` (in the file, not in the model) and ``mismatched`` (key -> (saved shape, model shape))."""

    loaded: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    unexpected: list[str] = field(default_factory=list)
    mismatched: dict[str, tuple[tuple[int, ...], tuple[int, ...]]] = field(default_factory=dict)

    @property
    def exact(self) -> bool:
        """Every key of the model and of the file matched."""
        return not (self.missing or self.unexpected or self.mismatched)

    def format(self) -> str:
        lines = [f"loaded {len(self.loaded)} tensors"]
        if self.missing:
            lines.append(f"missing (kept as initialised): {', '.join(self.missing)}")
        if self.unexpected:
            lines.append(f"unexpected (ignored): {', '.join(self.unexpected)}")
        for key, (saved, model) in self.mismatched.items():
            lines.append(f"shape mismatch (kept as initialised): {key}: saved {list(saved)}, model {list(model)}")
        return "\n".join(lines)


def load_module_state(model: nn.Module, state: dict[str, Any], *, strict: bool = True,
                      source: str = "checkpoint") -> LoadReport:
    """Load ``state`` into ``model``, comparing keys and shapes first."""
    if isinstance(model, nn.parallel.DistributedDataParallel):
        model = model.module
    own = model.state_dict()
    report = LoadReport()
    usable: dict[str, Any] = {}
    for key, value in state.items():
        if key not in own:
            report.unexpected.append(key)
        elif isinstance(value, torch.Tensor) and isinstance(own[key], torch.Tensor) and value.shape != own[key].shape:
            report.mismatched[key] = (tuple(value.shape), tuple(own[key].shape))
        else:
            usable[key] = value
    report.missing = [key for key in own if key not in state]  # in the model's order
    report.unexpected.sort()
    if strict and not report.exact:
        raise CheckpointError(
            f"the weights in {source} do not fit {type(model).__name__}",
            where=report.format().split("\n", 1)[1] if "\n" in report.format() else "",
            why="loading them would leave parts of the model silently untrained or wrong",
            fix="build the model exactly as when it was saved, or load with strict=False to fine-tune "
                "(the keys above are then reported and left as initialised)",
        )
    model.load_state_dict(usable, strict=False)
    report.loaded = list(usable)
    return report


def module_file(name: str = "model") -> str:
    """The file that holds module ``name``'s tensors inside a checkpoint folder."""
    return f"{name}.safetensors"


def load_weights(model: nn.Module, path: str | Path, *, strict: bool = True, name: str = "model") -> LoadReport:
    """Load weights from a checkpoint folder (its ``name`` module), a run directory (its newest valid
    checkpoint) or a ``.safetensors`` file into ``model``.  Never unpickles.  Returns the report;
    with ``strict`` (default) any difference raises :class:`CheckpointError` naming the keys."""
    from overt.checkpoint.store import check_finite, read_newest_valid, read_safetensors, verify_and_read
    from overt.run.layout import checkpoint_step
    from overt.run.rundir import RunDir

    path = Path(path)
    if path.is_file():
        state: dict[str, Any] = read_safetensors(path)
        check_finite(state, str(path))
    else:
        if checkpoint_step(path.name) is not None:
            loaded = verify_and_read(path)
        else:
            loaded = read_newest_valid(RunDir(path).checkpoint_root())
        file = module_file(name)
        if file not in loaded.tensor_files:
            modules = [f.removesuffix(".safetensors") for f in loaded.tensor_files if f != "state.safetensors"]
            raise CheckpointError(f"checkpoint {loaded.path} holds no module named {name!r}",
                                  fix=f"choose one of: {', '.join(modules)}")
        state = loaded.tensor_files[file]
    return load_module_state(model, state, strict=strict, source=str(path))
