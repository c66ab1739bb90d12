"""The parallel protocol: the engine asks one object (``trainer.parallel``) about processes."""

from __future__ import annotations

import contextlib

import pytest
import torch
from torch import nn
from torch.utils.data import TensorDataset

from overt.engine.loop import Trainer
from overt.engine.parallel import Parallel
from overt.errors import ConfigError


def _setup(n: int = 96):
    torch.manual_seed(0)
    x, y = torch.randn(n, 8), torch.randint(0, 3, (n,))
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 3))
    return model, torch.optim.SGD(model.parameters(), lr=0.1), TensorDataset(x, y)


class Recording(Parallel):
    """One process, recording what the engine asks."""

    def __init__(self) -> None:
        super().__init__()
        self.closes: list[bool] = []
        self.finished = 0

    def grad_sync(self, closes: bool):
        self.closes.append(closes)
        return contextlib.nullcontext()

    def finish(self, model: nn.Module) -> None:
        self.finished += 1


def test_the_default_is_one_process():
    model, opt, data = _setup()
    trainer = Trainer(model, opt, nn.CrossEntropyLoss(), data, epochs=1, batch_size=32, progress="off")
    assert type(trainer.parallel) is Parallel
    assert (trainer.rank, trainer.world_size, trainer.strategy, trainer.parallel.is_main) == (0, 1, "none", True)
    assert trainer.parallel.sum_reduce is None and not trainer.parallel.sharded_state
    summary = trainer.fit()
    assert summary["world_size"] == 1 and summary["strategy"] == "none"


def test_the_loop_asks_the_protocol_for_each_micro_batch_and_once_at_the_end():
    model, opt, data = _setup(96)  # 6 micro-batches of 16, windows of 3
    parallel = Recording()
    trainer = Trainer(model, opt, nn.CrossEntropyLoss(), data, epochs=2, batch_size=16, accumulate=3,
                      progress="off", parallel=parallel)
    summary = trainer.fit()
    assert parallel.closes == [False, False, True] * 4  # gradients synchronised only at a window's end
    assert parallel.finished == 1 and summary["steps"] == 4


def test_the_default_protocol_changes_nothing_in_the_result():
    results = []
    for parallel in (None, Recording()):
        model, opt, data = _setup()
        trainer = Trainer(model, opt, nn.CrossEntropyLoss(), data, epochs=2, batch_size=16, accumulate=2,
                          progress="off", parallel=parallel)
        trainer.fit()
        results.append([p.detach().clone() for p in model.parameters()])
    assert all(torch.equal(a, b) for a, b in zip(*results))


def test_the_engine_alone_refuses_to_run_every_torchrun_rank_on_its_own(monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "1")
    model, opt, data = _setup()
    with pytest.raises(ConfigError, match="rank 1 of 2") as info:
        Trainer(model, opt, nn.CrossEntropyLoss(), data, epochs=1, batch_size=32, progress="off")
    assert "overt.Trainer" in info.value.fix


def test_the_composition_picks_one_process_without_torchrun():
    import overt
    from overt.distributed.parallel import parallel_for

    model, opt, data = _setup()
    trainer = overt.Trainer(model, opt, nn.CrossEntropyLoss(), data, epochs=1, batch_size=32, progress="off",
                            guards=False)
    assert type(trainer.parallel) is Parallel
    assert type(parallel_for(trainer.config)) is Parallel


def test_overt_trainer_hands_the_engine_its_parallel_and_callbacks():
    """``overt.Trainer`` builds the engine's Trainer through its ``parallel=`` and ``callbacks=``
    arguments; the engine has no constructor hook to override."""
    import overt
    from overt.engine.callbacks import Callback

    assert not hasattr(Trainer, "default_parallel") and not hasattr(Trainer, "compose_callbacks")
    model, opt, data = _setup()
    mine, parallel = Callback(), Recording()
    trainer = overt.Trainer(model, opt, nn.CrossEntropyLoss(), data, epochs=1, batch_size=32, progress="off",
                            guards=False, callbacks=[mine], parallel=parallel)
    assert trainer.parallel is parallel and trainer.parallel.topology.is_main
    assert mine in trainer.callbacks.callbacks
