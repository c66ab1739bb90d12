"""The files of a finished run that predict and export read, checked before they are used.

A run directory is untrusted input (copied, downloaded, edited): each file is read against its
schema, and anything else is an error naming the file and the field, never a silently different
model or a raw traceback:

- ``inputs.json`` (:func:`read_record`): the declared preprocessing and the training record;
- ``recipe_source.json`` (:func:`read_recipe_source`): which recipe file trained the run;
- ``recipe_meta.json`` (:func:`read_recipe_meta`): what the model needs from the training split;
- ``model.safetensors`` (:func:`read_final_weights`): its SHA-256 against the one recorded when the
  run finished (``summary.json``'s ``weights_sha256``);
- the model that ``config.yaml`` builds (:func:`build_checked`): built first without memory (on
  PyTorch's meta device) and compared with the weights file's shapes, so that a config edited to
  ``hidden: 200000000`` is refused before gigabytes are allocated.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from pathlib import Path
from typing import Any, Callable

import torch
from torch import nn

from overt.errors import OvertError, schema_error

_HEX = re.compile(r"[0-9a-f]{64}")


class RunError(OvertError):
    """A run directory that cannot be used for prediction or export."""


def _read(path: Path) -> Any:
    """The JSON in ``path`` (None when missing), or a :class:`SchemaError` saying why it is not JSON."""
    from overt.run.reader import UnreadableFile, read_regular_text

    try:
        text = read_regular_text(path)
    except UnreadableFile as exc:
        raise schema_error(path, exc) from None
    if text is None:
        return None
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise schema_error(path, ValueError(f"it is not JSON ({str(exc).splitlines()[0][:80]})")) from None


def read_record(run: Path) -> tuple[dict[str, Any], Any]:
    """(the record, the declared :class:`~overt.preprocessing.Preprocessing` or None) of ``run``'s
    ``inputs.json``, each field checked.  Missing or damaged is a :class:`RunError`/``SchemaError``:
    without it predict would feed the model inputs in the wrong units and check nothing."""
    from overt.preprocessing import Preprocessing
    from overt.record import validate_record
    from overt.run.rundir import RunDir

    path = RunDir(run).inputs
    data = _read(path)
    if data is None:
        raise RunError(f"{path} is missing",
                       why="it records the run's declared preprocessing (the units the model takes) and what the "
                           "model was trained on; without it raw inputs would reach the model unprepared, unchecked",
                       fix="restore inputs.json from where the run was trained (overt train writes it at the start)")
    record = validate_record(data, str(path))
    prep = record.get("preprocessing")
    preparation = Preprocessing.from_dict(prep, str(path), "preprocessing") if prep is not None else None
    if prep is not None and not isinstance(prep, dict):
        raise schema_error(path, ValueError("preprocessing is not an object"))
    return record, preparation


def read_recipe_source(run: Path) -> dict[str, Any] | None:
    """``recipe_source.json`` (``{"spec", "file", "sha256"}``), checked; None when the run has none."""
    from overt.run.rundir import RunDir

    path = RunDir(run).recipe_source
    data = _read(path)
    if data is None:
        return None
    problem = None
    if not isinstance(data, dict):
        problem = f"it holds a JSON {type(data).__name__}, not an object"
    elif not isinstance(data.get("spec"), str):
        problem = f"spec is not a recipe name ({data.get('spec')!r})"
    elif data.get("file") is not None and not isinstance(data["file"], str):
        problem = f"file is not a path ({data['file']!r})"
    elif data.get("sha256") is not None and not (isinstance(data["sha256"], str) and _HEX.fullmatch(data["sha256"])):
        problem = f"sha256 is not 64 hexadecimal digits ({str(data['sha256'])[:70]!r})"
    if problem:
        raise schema_error(path, ValueError(problem),
                           why="it says which recipe file (by its hash) trained the run, and so which code may be "
                               "imported",
                           fix="restore recipe_source.json as training wrote it, or name the recipe file yourself "
                               "with --recipe FILE")
    return data


def read_recipe_meta(path: Path) -> dict[str, Any]:
    """``recipe_meta.json`` (what the model needs from the training split: a vocabulary, class names);
    {} when the run has none, a ``SchemaError`` when it is not a JSON object."""
    data = _read(path)
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise schema_error(path, ValueError(f"it holds a JSON {type(data).__name__}, not an object"))
    return data


def recorded_weights_hash(run: Path) -> str | None:
    """The SHA-256 of ``model.safetensors`` that the run recorded when it finished (``summary.json``),
    or None when it recorded none (a run finished by an older overt)."""
    from overt.run.rundir import RunDir

    path = RunDir(run).summary
    try:
        summary = _read(path)
    except OvertError:
        summary = None  # an unreadable summary is reported by `overt report`; the hash is then unknown
    value = summary.get("weights_sha256") if isinstance(summary, dict) else None
    if value is not None and not (isinstance(value, str) and _HEX.fullmatch(value)):
        raise schema_error(path, ValueError(f"weights_sha256 is not 64 hexadecimal digits ({str(value)[:70]!r})"),
                           fix="restore summary.json as training wrote it")
    return value


def read_final_weights(run: Path) -> dict[str, torch.Tensor]:
    """The tensors of ``run``'s ``model.safetensors``, after its SHA-256 is compared with the one the run
    recorded when it finished: one flipped bit is a :class:`RunError`, never a different answer."""
    from overt.checkpoint.codec import CheckpointError
    from overt.checkpoint.store import check_finite, read_regular, read_safetensors
    from overt.run.rundir import RunDir

    path = RunDir(run).weights
    try:
        data = read_regular(path)
    except OSError as exc:
        raise RunError(f"cannot read {path}: {exc.strerror or exc}", fix="check the run directory") from None
    expected = recorded_weights_hash(run)
    if expected is not None and hashlib.sha256(data).hexdigest() != expected:
        raise RunError(f"{path} does not match the SHA-256 the run recorded when it finished",
                       where=f"summary.json records {expected[:16]}..., the file hashes to "
                             f"{hashlib.sha256(data).hexdigest()[:16]}...",
                       why="the weights were changed or corrupted after training (one flipped bit is enough to "
                           "change answers); predicting or exporting with them would be silently wrong",
                       fix=f"restore {path.name} from where the run was trained, or use a checkpoint (each carries "
                           "its own hashes): --checkpoint last")
    try:
        state = read_safetensors(path, data)
        check_finite(state, str(path))
    except CheckpointError as exc:
        raise RunError(exc.what, where=exc.where, why=exc.why, fix=exc.fix) from None
    if expected is None:  # a run finished by an older overt: its final checkpoint holds the same tensors
        _compare_with_final_checkpoint(run, path, state)
    return state


def _compare_with_final_checkpoint(run: Path, path: Path, state: dict[str, torch.Tensor]) -> None:
    """For a run that recorded no hash of its final weights: compare them with the final checkpoint's
    (verified against its own manifest).  Silent when that checkpoint is gone, damaged or holds other keys."""
    from overt.checkpoint.codec import CheckpointError
    from overt.checkpoint.store import verify_and_read
    from overt.run.rundir import RunDir
    from overt.text import first_names

    try:
        summary = _read(RunDir(run).summary)
    except OvertError:
        return
    last = (summary.get("checkpoint") or {}).get("last") if isinstance(summary, dict) else None
    if not isinstance(last, str) or not (RunDir(run).checkpoints / Path(last).name).is_dir():
        return
    folder = RunDir(run).checkpoints / Path(last).name
    try:
        saved = verify_and_read(folder).tensor_files.get("model.safetensors")
    except CheckpointError:
        return
    if saved is None or saved.keys() != state.keys():
        return
    differ = [k for k in state if state[k].shape != saved[k].shape or not torch.equal(state[k], saved[k])]
    if differ:
        raise RunError(f"{path} differs from the run's final checkpoint {folder.name} in {len(differ)} tensor(s): "
                       f"{first_names(differ, 3)}",
                       why="the run records no hash of its final weights (an older overt finished it), and the "
                           "final checkpoint, which verifies against its own SHA-256 manifest, holds other values: "
                           "the file was changed or corrupted after training",
                       fix=f"restore {path.name} from where the run was trained, or use --checkpoint last")


def weights_shapes(weights: Path | None, run: Path) -> dict[str, tuple[int, ...]] | None:
    """``{name: shape}`` of the weights that will be loaded, read from the safetensors header only."""
    from safetensors import safe_open

    from overt.checkpoint.weights import module_file
    from overt.run.rundir import RunDir

    path = RunDir(run).weights if weights is None else (weights / module_file() if weights.is_dir() else weights)
    try:
        with safe_open(str(path), framework="pt") as fh:
            return {key: tuple(fh.get_slice(key).get_shape()) for key in fh.keys()}
    except Exception:  # noqa: BLE001 -- unreadable here: the load itself says why, with the file's checks
        return None


def _size(shapes: dict[str, tuple[int, ...]], bytes_per: int = 4) -> str:
    total = sum(math.prod(s) for s in shapes.values()) * bytes_per
    for unit in ("bytes", "KB", "MB", "GB"):
        if total < 1000:
            return f"{total:.3g} {unit}" if unit != "bytes" else f"{total} bytes"
        total /= 1000
    return f"{total:,.0f} TB"


def build_checked(build: Callable[[], nn.Module], shapes: dict[str, tuple[int, ...]] | None,
                  config: Path) -> nn.Module:
    """``build()`` the model, after building it once on the meta device (no memory) and comparing its
    tensors' names and shapes with the weights file's ``shapes``: a config that does not build the
    trained model (edited, or from another run) is a :class:`RunError` before anything is allocated.
    A model that cannot be built on the meta device is built directly (the shapes are then compared
    by the strict load)."""
    if shapes is not None:
        try:
            with torch.device("meta"):
                probe = build()
            own = {k: tuple(v.shape) for k, v in probe.state_dict().items()}
        except Exception:  # noqa: BLE001 -- not buildable on meta: the real build below says why
            own = None
        if own is not None and own != shapes:
            differ = [k for k in own if k in shapes and own[k] != shapes[k]]
            missing = [k for k in own if k not in shapes]
            where = "; ".join([f"{k}: {list(own[k])} in the model, {list(shapes[k])} in the weights"
                               for k in differ[:3]] + [f"{k} is not in the weights" for k in missing[:3]])
            raise RunError(f"{config} builds a model of {_size(own)} that is not the one trained "
                           f"({_size(shapes)} of weights)",
                           where=where or "the weights hold tensors the model does not have",
                           why="the config was changed after training (or belongs to another run); building it "
                               "would allocate the wrong model and then fail, or answer with the wrong one",
                           fix="restore config.yaml as training wrote it")
    try:
        return build()
    except OvertError:
        raise
    except Exception as exc:
        first = str(exc).splitlines()[0] if str(exc) else ""
        raise RunError(f"the recipe cannot build the model from {config}: {type(exc).__name__}: {first}",
                       why="the model is rebuilt from the run's config before its weights are loaded",
                       fix="restore config.yaml as training wrote it") from None
