"""Built-in recipe ``finetune``: start from a finished run's weights, new head, frozen then unfrozen backbone.

``init_from=`` names the run directory of a finished ``resnet`` or ``mnist``
run (its ``model.safetensors`` is read with safetensors, never unpickled).
The model is rebuilt with that run's saved config, its weights are loaded
except the classification ``head``, which is replaced by a fresh one for the
new data; the report of missing and unexpected keys is printed.  For the first
``freeze_epochs`` epochs only the head trains (the backbone's parameters have
``requires_grad=False``; its batch-norm statistics still adapt to the new data);
then the backbone is unfrozen and trains too, at ``lr * backbone_lr_scale``
(a second optimizer parameter group) while the head keeps ``lr``.

Data: ``data=digits`` (scikit-learn, default) or ``data=mnist`` with
``data_dir=``, prepared as in the ``resnet`` recipe.  The image size may
differ from the base run's: both networks end in global pooling.

    overt train resnet data=mnist data_dir=path/to/mnist name=base
    overt train finetune init_from=runs/base                        # to scikit-learn digits
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import torch
from torch import nn

import overt
from overt.engine.callbacks import Callback
from overt.engine.metrics import accuracy
from overt.errors import ConfigError

defaults = {
    "epochs": 6,
    "batch_size": 32,
    "monitor": "val/accuracy",
    "monitor_mode": "max",
    "init_from": "",
    "data": "digits",
    "data_dir": "data/mnist",
    "val_fraction": 0.2,
    "split_seed": 0,
    "limit": 0,
    "freeze_epochs": 2,
    "lr": 3e-3,
    "backbone_lr_scale": 0.1,
    "weight_decay": 1e-4,
}

#: base recipes whose models have a ``backbone`` and a linear ``head`` (only built-in code is ever imported)
BASES = ("resnet", "mnist")


def base_model(base_config: dict[str, Any], base_meta: dict[str, Any]) -> nn.Module:
    """The base run's model rebuilt from its saved config (only built-in base recipes)."""
    from overt.config import resolve
    from overt.recipes.base import load_recipe_module, recipe_defaults

    name = str(base_config.get("recipe"))
    if name not in BASES:
        raise ConfigError(f"finetune starts from a {' or '.join(BASES)} run; this run's recipe is {name!r}",
                          fix="train a base model first: `overt train resnet name=base`, then init_from=runs/base")
    module = load_recipe_module(name)
    cfg = resolve(recipe_defaults(module), base_config, source="the base run's config.yaml")
    return module.build_model(cfg, base_meta)


def with_new_head(model: nn.Module, n_classes: int) -> nn.Module:
    head = getattr(model, "head", None)
    if not isinstance(head, nn.Linear):
        raise ConfigError(f"{type(model).__name__} has no linear `head` to replace")
    model.head = nn.Linear(head.in_features, n_classes)
    return model


def read_run(run_dir: str | Path) -> tuple[dict[str, Any], dict[str, Any], Path]:
    """(config, recipe meta, weights file) of a finished run."""
    from overt.run.reader import read_config, read_json
    from overt.run.rundir import RunDir

    run = RunDir(run_dir)
    if not run.config.is_file() or not run.weights.is_file():
        raise ConfigError(f"init_from={run_dir!r} is not a finished run directory (no {run.config.name} and "
                          f"{run.weights.name} there)", fix="point init_from= at a run that completed, e.g. runs/base")
    return read_config(run.config), read_json(run.recipe_meta) or {}, run.weights


class UnfreezeBackbone(Callback):
    """Backbone parameters frozen (``requires_grad=False``) until ``epoch``, trainable from then on."""

    def __init__(self, backbone: nn.Module, epoch: int):
        self.backbone, self.epoch = backbone, epoch

    def on_epoch_start(self, trainer: Any, epoch: int) -> None:
        trainable = epoch >= self.epoch
        changed = any(p.requires_grad != trainable for p in self.backbone.parameters())
        for p in self.backbone.parameters():
            p.requires_grad_(trainable)
        if changed and epoch > 0:
            print(f"finetune: epoch {epoch + 1}: backbone unfrozen", file=sys.stderr)


def build_model(cfg: Any, meta: dict[str, Any]) -> nn.Module:
    """The fine-tuned architecture, rebuilt from the base config saved in this run's meta."""
    return with_new_head(base_model(meta["base_config"], meta["base_meta"]), int(meta["n_classes"]))


def build(cfg: Any) -> overt.Recipe:
    from overt.checkpoint.store import read_safetensors
    from overt.checkpoint.weights import load_module_state
    from overt.recipes.resnet import image_data

    if not cfg.init_from:
        raise ConfigError("finetune needs init_from=RUN_DIR (a finished resnet or mnist run)",
                          fix="train one first: `overt train resnet name=base`, then "
                              "`overt train finetune init_from=runs/base`")
    base_config, base_meta, weights = read_run(cfg.init_from)
    train, val, data_meta, prep, raw_val = image_data(cfg)
    n_classes = int(max(train.tensors[1].max(), val.tensors[1].max())) + 1
    model = with_new_head(base_model(base_config, base_meta), n_classes)
    state = {k: v for k, v in read_safetensors(weights).items() if not k.startswith("head.")}
    report = load_module_state(model, state, strict=False, source=str(weights))
    print(f"finetune: weights from {weights}: {report.format()}", file=sys.stderr)
    unexpected = report.unexpected or list(report.mismatched)
    if unexpected:
        raise ConfigError(f"the base weights do not fit the rebuilt backbone: {', '.join(unexpected)}",
                          fix="fine-tune from a run of an unchanged resnet/mnist recipe")
    backbone = [p for name, p in model.named_parameters() if not name.startswith("head.")]
    optimizer = torch.optim.AdamW([
        {"params": model.head.parameters(), "lr": cfg.lr},
        {"params": backbone, "lr": cfg.lr * cfg.backbone_lr_scale},
    ], weight_decay=cfg.weight_decay)
    callbacks = [UnfreezeBackbone(model.backbone, cfg.freeze_epochs)] if cfg.freeze_epochs else []
    if cfg.freeze_epochs:  # frozen from the start, so the model summary printed then says so
        for p in model.backbone.parameters():
            p.requires_grad_(False)
    meta = {**data_meta, "base_config": base_config, "base_meta": base_meta, "n_classes": n_classes}
    return overt.Recipe(
        model=model, optimizer=optimizer, loss_fn=nn.CrossEntropyLoss(),
        train_data=train, val_data=val, metrics={"accuracy": accuracy},
        callbacks=callbacks, meta=meta, preprocessing=prep, raw_val=raw_val,
    )

