"""The guards inside overt's engine: the real Trainer is quiet; planted bugs are reported in the summary."""

from __future__ import annotations

import pytest
import torch
from torch import nn
from torch.utils.data import TensorDataset

from overt.guards.engine import GuardCallback

from tests.conftest import correctness_findings

from .helpers import digits

Trainer = pytest.importorskip("overt.compose").Trainer  # overt.Trainer: with the default guards


def _data():
    x, y = digits()
    return TensorDataset(x[:480], y[:480]), TensorDataset(x[1500:1600], y[1500:1600])


def _fit(model, **overrides):
    train, val = _data()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    guard = GuardCallback(check_every=2)
    trainer = Trainer(model, opt, nn.CrossEntropyLoss(), train, val, callbacks=[guard],
                      epochs=2, batch_size=32, progress="off", **overrides)
    return trainer.fit()


def _model(softmax: bool = False, plain_list: bool = False) -> nn.Module:
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            torch.manual_seed(0)
            layers = [nn.Linear(64, 32), nn.BatchNorm1d(32), nn.ReLU(), nn.Dropout(0.1), nn.Linear(32, 10)]
            self.body = layers if plain_list else nn.Sequential(*layers)

        def forward(self, x):
            if plain_list:
                for layer in self.body:
                    x = layer(x)
            else:
                x = self.body(x)
            return x.softmax(1) if softmax else x

    return Net()


def test_trainer_with_guards_has_zero_findings():
    summary = _fit(_model(), accumulate=2)
    assert correctness_findings(summary["findings"]) == []


def test_trainer_reports_softmax_before_cross_entropy():
    summary = _fit(_model(softmax=True))
    assert [f["slug"] for f in summary["findings"]] == ["softmax-before-cross-entropy"]
    assert summary["findings"][0]["code"] == "OVT301"


def test_trainer_reports_unregistered_submodule():
    model = _model(plain_list=True)
    model.extra = nn.Linear(2, 2)  # the only registered parameters: what the optimizer gets
    summary = _fit(model)
    slugs = [f["slug"] for f in summary["findings"]]
    assert "unregistered-submodule" in slugs
    where = next(f["where"] for f in summary["findings"] if f["slug"] == "unregistered-submodule")
    assert "Net.body" in where and "test_engine.py" in where


#: the built-in recipes that train on their defaults without data files; tests/recipes/ trains every
#: built-in recipe (small slices of ../shared/data for the others) with the guards on and asserts zero findings
SELF_CONTAINED = ["digits", "tiny"]


@pytest.mark.parametrize("name", SELF_CONTAINED)
def test_every_builtin_recipe_trains_with_zero_findings(name):
    from types import SimpleNamespace

    from overt.recipes import build_recipe, load_recipe_module

    module = load_recipe_module(name)
    cfg = SimpleNamespace(**getattr(module, "defaults", {}))
    recipe = build_recipe(module, cfg)
    trainer = Trainer(recipe.model, recipe.optimizer, recipe.loss_fn, recipe.train_data, recipe.val_data,
                      scheduler=recipe.scheduler, scheduler_interval=recipe.scheduler_interval,
                      metrics=recipe.metrics, forward=recipe.forward, collate_fn=recipe.collate_fn,
                      callbacks=[GuardCallback(check_every=5)],
                      epochs=2, batch_size=getattr(cfg, "batch_size", 32), progress="off")
    summary = trainer.fit()
    assert correctness_findings(summary["findings"]) == []


def test_engine_catches_a_nan_loss_between_sampled_checks_at_the_next_log_point():
    from overt.guards.report import GuardError

    x, y = digits()
    x = x[:960].clone()
    x[700, 3] = float("nan")  # one poisoned sample: its batch (mid-epoch, after the warm-up) goes NaN
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    trainer = Trainer(model, opt, nn.CrossEntropyLoss(), TensorDataset(x, y[:960]), epochs=1, batch_size=32,
                      log_every=5, progress="off")  # default guards: warm-up, then sampled checks
    order = trainer.train_loader.sampler.order().tolist()  # the data order is a function of (seed, epoch)
    poisoned_step = order.index(700) // 32 + 1
    assert poisoned_step > 3  # after the guards' warm-up steps
    with pytest.raises(GuardError) as info:
        trainer.fit()
    assert info.value.finding.slug == "non-finite"
    assert poisoned_step <= trainer.state.global_step < poisoned_step + 5  # caught by the next log point


def test_two_sessions_at_once_leave_pytorchs_functions_as_they_were():
    """The default guards and a GuardCallback of the user's, together: each look swapped
    torch.nn.functional's dropouts for a recorder and restored them out of order, leaving a wrapper
    on F.dropout after every run (dozens after a test session; then torch.compile of a model with
    dropout hit dynamo's recursion limit)."""
    import torch.nn.functional as F

    before = {name: getattr(F, name) for name in ("dropout", "dropout1d", "dropout2d", "alpha_dropout")}
    _fit(_model(), accumulate=2)
    _fit(_model())
    assert {name: getattr(F, name) for name in before} == before
