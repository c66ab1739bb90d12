"""What a testing helper checks: a recipe built from its config, or the user's own objects."""

from __future__ import annotations

from dataclasses import dataclass, field
from types import ModuleType
from typing import Any, Callable

from torch import nn

from overt.config import TrainConfig


@dataclass
class Subject:
    """A model with its optimizer, loss, training data and wiring, plus ``rebuild()`` giving a fresh
    ``(model, optimizer)`` built the same way (for checkpoint round trips), when known."""

    model: nn.Module
    optimizer: Any
    loss_fn: Callable[[Any, Any], Any]
    train_data: Any
    forward: Callable[[nn.Module, Any], tuple[Any, Any]] | None = None
    collate_fn: Callable[[list[Any]], Any] | None = None
    scheduler: Any = None
    scheduler_interval: str | None = None
    config: TrainConfig = field(default_factory=TrainConfig)
    rebuild: Callable[[], tuple[nn.Module, Any]] | None = None

    def objects(self) -> Any:
        """The doctor's view of these objects (:class:`overt.doctor.shortrun.Objects`)."""
        from overt.doctor.shortrun import Objects

        return Objects(self.model, self.optimizer, self.loss_fn, self.train_data, scheduler=self.scheduler,
                       scheduler_interval=self.scheduler_interval, forward=self.forward,
                       collate_fn=self.collate_fn, config=self.config)

    def first_batch(self) -> Any:
        """The first training batch, as the engine's seeded loader gives it."""
        from overt.doctor.common import loader_for

        loader = loader_for(self.train_data, self.config.batch_size, shuffle=True, seed=self.config.seed,
                            collate_fn=self.collate_fn)
        return next(iter(loader))


def subject(target: Any, optimizer: Any = None, loss_fn: Any = None, data: Any = None, *,
            forward: Any = None, collate_fn: Any = None, **settings: Any) -> Subject:
    """A :class:`Subject` from a recipe (name, ``.py`` path, module or :class:`overt.Recipe`) with
    config ``settings``, or from ``(model, optimizer, loss_fn, data)`` with engine ``settings``
    (``batch_size=``, ``seed=`` ...)."""
    from overt.config import resolve
    from overt.recipes.base import Recipe

    if isinstance(target, nn.Module):
        missing = [n for n, v in (("optimizer", optimizer), ("loss_fn", loss_fn), ("data", data)) if v is None]
        if missing:
            raise TypeError(f"with a model, also give {', '.join(missing)}: (model, optimizer, loss_fn, data)")
        return Subject(target, optimizer, loss_fn, data, forward=forward, collate_fn=collate_fn,
                       config=resolve({}, settings, source="overt.testing arguments"))
    if isinstance(target, Recipe):
        return _from_recipe(target, resolve({}, settings, source="overt.testing arguments"), None)
    from overt.recipes.base import build_recipe, load_recipe_module, recipe_defaults

    module = target if isinstance(target, ModuleType) else load_recipe_module(str(target))
    defaults = recipe_defaults(module)
    values = {**defaults, **settings}
    if not isinstance(target, ModuleType):
        values["recipe"] = str(target)
    cfg = resolve(defaults, values, source="overt.testing arguments")

    def build() -> Recipe:
        from overt.engine.seeding import seed_everything

        seed_everything(cfg.seed)
        return build_recipe(module, cfg)

    return _from_recipe(build(), cfg, build)


def _from_recipe(recipe: Any, cfg: TrainConfig, build: Callable[[], Any] | None) -> Subject:
    def rebuild() -> tuple[nn.Module, Any]:
        fresh = build()  # type: ignore[misc]
        return fresh.model, fresh.optimizer

    return Subject(recipe.model, recipe.optimizer, recipe.loss_fn, recipe.train_data, forward=recipe.forward,
                   collate_fn=recipe.collate_fn, scheduler=recipe.scheduler,
                   scheduler_interval=recipe.scheduler_interval, config=cfg,
                   rebuild=rebuild if build is not None else None)
