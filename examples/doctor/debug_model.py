"""The broken model of the debugging exercise, as a recipe: `overt doctor examples/doctor/debug_model.py`.

Four defects are planted, each switchable with a key=value override so you can fix them
one at a time and watch the doctor's verdict change:

    super_init=false    nn.Module subclass without super().__init__()        (missing-super-init)
    plain_list=true     layers kept in a plain Python list                    (unregistered-submodule)
    mse=true            MSELoss on integer class labels                       (wrong-loss-for-task)
    sloppy_validate     validation without model.eval() / torch.no_grad():   (train-mode-in-eval,
                        see `validate` below, checked with overt.doctor(..., validate=validate))   graph-in-eval)

A fifth defect of the exercise, a missing optimizer.zero_grad(), lives in a hand-written loop,
which a recipe does not have (overt's engine resets gradients): `overt lint` and `overt run`
find that one.
"""

import torch
from torch import nn

import overt
from overt.recipes.digits import load_digits_split

defaults = {"super_init": False, "plain_list": True, "mse": True, "lr": 0.05, "batch_size": 32, "epochs": 5}


class DebugNet(nn.Module):
    def __init__(self, super_init: bool, plain_list: bool):
        if super_init:
            super().__init__()
        layers = [nn.Linear(64, 64), nn.ReLU(), nn.Dropout(0.2), nn.Linear(64, 10)]
        self.layers = layers if plain_list else nn.ModuleList(layers)

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x


def validate(model, data):
    """Validation as the exercise first writes it: no model.eval(), no torch.no_grad()."""
    x, y = data.tensors
    return (model(x).argmax(dim=1) == y).float().mean()


def build(cfg):
    train, val = load_digits_split(0.2, 0)
    model = DebugNet(cfg.super_init, cfg.plain_list)
    optimizer = torch.optim.Adam(model.parameters(), lr=cfg.lr / 10)
    loss_fn = nn.MSELoss() if cfg.mse else nn.CrossEntropyLoss()
    return overt.Recipe(model=model, optimizer=optimizer, loss_fn=loss_fn, train_data=train, val_data=val,
                        metrics={"accuracy": overt.metrics.accuracy})
