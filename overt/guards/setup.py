"""Guards on how a run is set up, judged once when the engine starts training.

``batchnorm-in-accumulation``: BatchNorm layers trained with ``accumulate > 1`` and micro-batches
under 32 samples compute their statistics from each small micro-batch, not from the window the
optimizer steps on.
``val-overlaps-train``: validation samples that are training samples too (:mod:`overt.guards.overlap`).
``effective-batch-size``: the samples per optimizer step (batch x accumulate x processes)
differ from the recipe's own setting while the recipe's learning rate is left as it was.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from torch import nn

if TYPE_CHECKING:
    from overt.engine.loop import Trainer
    from overt.guards.session import GuardSession


#: micro-batches below this many samples give BatchNorm noisy statistics
SMALL_MICRO_BATCH = 32


def check_setup(session: GuardSession, trainer: Trainer) -> None:
    for check in (batchnorm_in_accumulation, effective_batch_size, val_overlaps_train):
        try:
            check(session, trainer)
        except Exception as exc:  # never break training
            session.check_failed(check.__name__, exc)


def val_overlaps_train(session: GuardSession, trainer: Trainer) -> None:
    """``val-overlaps-train`` (:mod:`overt.guards.overlap`): once, on the loaders' data sets."""
    if trainer.val_loader is None:
        return
    from overt.guards.overlap import check_overlap

    check_overlap(session, trainer.train_loader.dataset, trainer.val_loader.dataset)


def batchnorm_in_accumulation(session: GuardSession, trainer: Trainer) -> None:
    cfg = trainer.config
    if cfg.accumulate <= 1 or cfg.batch_size >= SMALL_MICRO_BATCH:
        return
    bns = [name for name, m in trainer.model.named_modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)]
    if not bns:
        return
    window = cfg.batch_size * cfg.accumulate
    session.report(
        "batchnorm-in-accumulation",
        f"accumulate={cfg.accumulate} with micro-batches of {cfg.batch_size}: {len(bns)} BatchNorm layer(s) "
        f"(e.g. {bns[0]}) normalise with, and keep running statistics of, {cfg.batch_size} samples at a time, "
        f"not the {window} the optimizer steps on; the gradients then differ from one batch of {window}.",
        fix=f"GroupNorm or LayerNorm instead of BatchNorm, or larger micro-batches (batch_size={window}, "
        "accumulate=1) if memory allows.",
        where=f"{type(trainer.model).__name__}.{bns[0]}", key="bn-accumulate",
    )


def _recipe_default(cfg: Any, key: str) -> Any:
    field = type(cfg).model_fields.get(key)
    return None if field is None else field.default


def effective_batch_size(session: GuardSession, trainer: Trainer) -> None:
    """Only for configs with a recipe's ``lr`` parameter: its default is the learning rate the
    recipe was tuned with, at its default batch size and accumulation, on one process."""
    cfg = trainer.config
    if "lr" not in type(cfg).model_fields or cfg.lr != _recipe_default(cfg, "lr"):
        return
    world = trainer.parallel.world_size
    now = cfg.batch_size * cfg.accumulate * world
    tuned = _recipe_default(cfg, "batch_size") * _recipe_default(cfg, "accumulate")
    if not isinstance(tuned, int) or now == tuned:
        return
    ratio = now / tuned
    session.report(
        "effective-batch-size",
        f"each optimizer step now averages {now} samples (batch_size {cfg.batch_size} x accumulate "
        f"{cfg.accumulate} x {world} process(es)) instead of the recipe's {tuned}, but lr is still the recipe's "
        f"{cfg.lr:g}. If it was tuned for {tuned}: scale it with the batch (linear rule for SGD: lr={cfg.lr * ratio:g}; "
        f"square-root rule for Adam-type optimizers: lr={cfg.lr * ratio ** 0.5:g}), with a warmup when it grows; "
        f"if the recipe's lr is right for {now} too, ignore=[effective-batch-size].",
        fix=f"scale lr with the batch (linear rule for SGD: lr={cfg.lr * ratio:g}; square-root rule for Adam-type "
            f"optimizers: lr={cfg.lr * ratio ** 0.5:g}), with a warmup when it grows",
        fix_in_message=True,
        where=f"config: batch_size={cfg.batch_size}, accumulate={cfg.accumulate}, lr={cfg.lr:g}", key="effective-batch",
    )
