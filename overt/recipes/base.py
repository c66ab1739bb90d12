"""What a recipe returns, and how a recipe module is found and built."""

from __future__ import annotations

import importlib
import importlib.util
import sys
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, Callable, Literal

from overt.errors import OvertError, RecipeError
from overt.frames import user_frame

#: built-in recipes: name -> module
BUILTIN: dict[str, str] = {
    "digits": "overt.recipes.digits",
    "tiny": "overt.recipes.tiny",
    "sentiment": "overt.recipes.sentiment",
    "mnist": "overt.recipes.mnist",
    "house-prices": "overt.recipes.house_prices",
    "char-rnn": "overt.recipes.char_rnn",
    "resnet": "overt.recipes.resnet",
    "finetune": "overt.recipes.finetune",
    "gpt": "overt.recipes.gpt",
}


@dataclass
class Recipe:
    """Everything the engine needs to train.

    ``train_data``/``val_data`` may be Datasets (the engine builds loaders with a
    seeded, resumable sampler) or ready DataLoaders.  ``scheduler`` may be a
    scheduler or a factory ``f(optimizer, total_steps)``; when given,
    ``scheduler_interval`` must say whether it steps per optimizer ``"step"`` or
    per ``"epoch"`` -- overt never guesses.  ``metrics`` map a name to
    ``f(output, target) -> tensor`` (the batch mean); they are averaged over
    samples.  ``forward(model, batch) -> (output, target)`` replaces the default
    ``x, y = batch; model(x)`` for other batch shapes.  ``collate_fn`` batches the samples
    (e.g. ``overt.pad_collate`` for variable-length sequences).  ``train_transform(sample,
    generator) -> sample`` augments the training set only, re-drawn every epoch and exactly
    resumable: draw every random number from ``generator`` (see :mod:`overt.engine.augment`).
    ``callbacks`` are
    :class:`~overt.Callback`\\ s the recipe needs during training (e.g. unfreezing
    a backbone).  ``meta`` holds JSON-ready facts learned from the training split
    that prediction needs (a vocabulary, normalisation statistics, class names);
    ``overt train`` writes it to ``recipe_meta.json`` in the run directory.

    ``preprocessing`` (:class:`overt.Preprocessing`) is the one definition of how raw inputs
    become the model's inputs and outputs become answers: the recipe prepares its own training
    data with it, ``overt train`` records it, ``overt predict`` and ``overt export`` apply it.
    ``raw_val`` holds the validation split's raw inputs, in order (export checks parity on them).

    A recipe module may also define, for ``overt predict`` / ``overt export``
    (:mod:`overt.predict`)::

        def build_model(cfg, meta) -> nn.Module        # the model alone, without loading data
        def preprocess(inputs: list, meta) -> batch    # raw inputs -> the model's input
        def postprocess(output, meta) -> list          # the model's output -> one JSON value per input
        def predict(model, inputs: list, meta) -> list # instead of the two above (e.g. sampling text)
        def model_inputs(batch) -> tuple               # a training batch -> the model's positional inputs
    """

    model: Any
    optimizer: Any
    loss_fn: Callable[[Any, Any], Any]
    train_data: Any
    val_data: Any = None
    scheduler: Any = None
    scheduler_interval: Literal["step", "epoch"] | None = None
    metrics: dict[str, Callable[[Any, Any], Any]] = field(default_factory=dict)
    forward: Callable[[Any, Any], tuple[Any, Any]] | None = None
    collate_fn: Callable[[list[Any]], Any] | None = None
    callbacks: list[Any] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)
    train_transform: Callable[[Any, Any], Any] | None = None
    preprocessing: Any = None
    raw_val: Any = None


def load_recipe_module(spec: str) -> ModuleType:
    """Import a recipe by built-in name, ``.py`` path or dotted module path."""
    if spec in BUILTIN:
        return importlib.import_module(BUILTIN[spec])
    if spec.endswith(".py"):
        path = Path(spec)
        if not path.is_file():
            raise RecipeError(f"recipe file {spec} does not exist",
                              fix=f"check the path, or use a built-in recipe: {', '.join(BUILTIN)}")
        return _exec(lambda: module_from_file(path, f"overt_recipe_{path.stem}"), f"importing recipe file {path}")
    try:
        return importlib.import_module(spec)
    except ModuleNotFoundError as exc:
        if exc.name and spec.startswith(exc.name):
            raise RecipeError(f"no recipe named {spec!r}",
                              fix=f"use a built-in recipe ({', '.join(BUILTIN)}), a path to a .py file, "
                                  "or an importable module path") from None
        raise


def module_from_file(path: Path, name: str, *, folder_on_path: bool = False) -> ModuleType:
    """Run the Python file ``path`` as the module ``name``, registered in ``sys.modules`` (dataclasses
    and pickling in loader workers need it); ``folder_on_path``: with the file's folder on ``sys.path``
    while it runs (so that it imports its neighbours)."""
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    folder = str(Path(path).resolve().parent)
    if folder_on_path:
        sys.path.insert(0, folder)
    try:
        spec.loader.exec_module(module)
    finally:
        if folder_on_path:
            sys.path.remove(folder)
    return module


def recipe_file(spec: str) -> Path | None:
    """The source file a recipe spec names, found without running the recipe's code (a dotted
    module path imports its parent packages, as any lookup of a module does)."""
    if spec.endswith(".py"):
        return Path(spec).resolve()
    try:
        found = importlib.util.find_spec(BUILTIN.get(spec, spec))
    except (ImportError, ValueError):
        return None
    origin = getattr(found, "origin", None)
    return Path(origin).resolve() if origin and origin not in ("built-in", "frozen") else None


def recipe_source(spec: str) -> dict[str, Any]:
    """``{"spec", "file", "sha256"}`` of a recipe's source, recorded in checkpoints so that a
    resumed run can tell whether it would run the code the run was trained with."""
    import hashlib

    path = recipe_file(spec)
    digest = None
    if path is not None and path.is_file():
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
    return {"spec": spec, "file": str(path) if path else None, "sha256": digest}


def check_recipe_source(saved: dict[str, Any] | None, spec: str, *, allow_changed: bool = False) -> list[str]:
    """Before a resumed run imports its recipe: the lines to print (which file is imported), or
    :class:`RecipeError` when its source differs from the one the checkpoint was trained with
    (unless ``allow_changed``): importing runs its code, and changed code breaks exact resume."""
    now = recipe_source(spec)
    short = (now["sha256"] or "?")[:12]
    notes = [f"overt: importing recipe {now['file'] or spec} (sha256 {short}...)"]
    if not saved or not saved.get("sha256"):
        return notes + ["overt: the checkpoint records no recipe hash (written by an older overt): "
                        "the recipe's source is not checked"]
    if saved["sha256"] == now["sha256"]:
        return notes
    where = (f"trained with {saved.get('file') or saved.get('spec')} sha256 {saved['sha256'][:12]}...; "
             f"now {now['file'] or spec} sha256 {short}...")
    if allow_changed:
        return notes + [f"overt: the recipe's source changed since the checkpoint was written ({where}); "
                        "resuming with it anyway (--allow-changed-recipe): the result will differ from an "
                        "uninterrupted run"]
    raise RecipeError(
        f"the recipe {spec} is not the one this run was trained with: its source changed",
        where=where,
        why="`overt resume` imports and runs the recipe's code; code the run was not trained with breaks "
            "exact resume, and a checkpoint edited to name another file would run that file",
        fix="restore the recipe file as it was, or pass --allow-changed-recipe to resume with the new code",
    )


def recipe_defaults(module: ModuleType) -> dict[str, Any]:
    defaults = getattr(module, "defaults", {})
    if not isinstance(defaults, dict):
        raise RecipeError(f"recipe {module.__name__}: `defaults` must be a dict, got {type(defaults).__name__}",
                          fix="write defaults = {'lr': 1e-3, ...}")
    return dict(defaults)


def recipe_config(target: str | None, values: dict[str, Any],
                  modules: dict[str, ModuleType] | None = None) -> tuple[ModuleType, Any]:
    """(recipe module, validated config) for a command line's ``target`` (a recipe, or a YAML config
    naming one; None: the built-in digits recipe) and its already parsed overrides ``values``.
    ``modules`` (recipe spec -> module) imports each recipe once for many configs (a sweep's grid)."""
    from overt.config import load_config_file, resolve

    merged: dict[str, Any] = {}
    source = "command line"
    if target is not None and target.endswith((".yaml", ".yml")):
        merged.update(load_config_file(target))
        source = f"{target} or command line"
    elif target is not None:
        merged["recipe"] = target
    merged.update(values)
    from overt.recipes.trust import note_origin

    spec = str(merged.get("recipe", "digits"))
    module = modules.get(spec) if modules is not None else None
    if module is None:
        note_origin(spec, config_file=target if source != "command line" else None)  # from a run directory: said first
        module = load_recipe_module(spec)
        if modules is not None:
            modules[spec] = module
    defaults = recipe_defaults(module)
    return module, resolve(defaults, {**defaults, **merged}, source=source)


def build_recipe(module: ModuleType, cfg: Any) -> Recipe:
    """Call the recipe's ``build(cfg)`` and check what it returned."""
    build = getattr(module, "build", None)
    if not callable(build):
        raise RecipeError(f"recipe {_origin(module)} has no build(cfg) function",
                          fix="define `def build(cfg) -> overt.Recipe:` in the recipe module")
    recipe = _exec(lambda: build(cfg), f"building recipe {_origin(module)}")
    if not isinstance(recipe, Recipe):
        raise RecipeError(f"recipe {_origin(module)}: build(cfg) returned {type(recipe).__name__}, not overt.Recipe",
                          fix="return overt.Recipe(model=..., optimizer=..., loss_fn=..., train_data=...)")
    from overt.engine.loop import check_scheduler_interval

    check_scheduler_interval(recipe.scheduler, recipe.scheduler_interval, given_by=f"recipe {_origin(module)}",
                             error=RecipeError)
    return recipe


def _origin(module: ModuleType) -> str:
    return getattr(module, "__file__", None) or module.__name__


def _user_frame(exc: BaseException) -> str:
    """``file:line`` of the user's frame of ``exc`` (:func:`overt.frames.user_frame`)."""
    frame = user_frame(exc)
    return f"{frame.filename}:{frame.lineno}" if frame is not None else ""


def _exec(fn: Callable[[], Any], what: str) -> Any:
    try:
        return fn()
    except OvertError:  # already explains itself (a RecipeError, missing data, a bad config value)
        raise
    except SystemExit as exc:  # sys.exit() in a recipe would end overt with that status, having trained nothing
        raise RecipeError(f"{what} called sys.exit({exc.code!r})", where=_user_frame(exc),
                          why="a recipe that exits while it is imported or built ends overt before training: "
                              "nothing would be trained, with exit status 0 for sys.exit(0)",
                          fix="remove the sys.exit call (put a script's own entry point under "
                              "`if __name__ == '__main__':`)") from None
    except Exception as exc:  # the user's code failed: show where, in their file
        where = _user_frame(exc)
        raise RecipeError(f"{what} failed: {type(exc).__name__}: {exc}", where=where,
                          fix="fix the recipe code at the line shown") from exc
