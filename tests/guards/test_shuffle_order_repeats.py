"""shuffle-order-repeats (issue 33, invariants of correct training): a shuffled training loader gives a
new order in every epoch.  Planted bugs of different forms (a seed reset in an evaluation function, a
seeding helper called at the top of every epoch, a generator made again for every epoch's loader, a
SubsetRandomSampler rewound by ``torch.manual_seed`` in a callback) and clean twins
on digits."""

from __future__ import annotations

import random
import re

import pytest
import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, DistributedSampler, SubsetRandomSampler, TensorDataset

from tests.conftest import TIMING
from tests.guards.helpers import digits, guarded, guarded_run, mlp, slugs


def _train(make_loader, before_epoch=None, after_epoch=None, epochs: int = 3):
    x, y = digits()
    data = TensorDataset(x[:640], y[:640])
    torch.manual_seed(0)
    model = mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    g = guarded(model, opt, ignore=TIMING)
    for epoch in range(epochs):
        if before_epoch is not None:
            before_epoch(epoch)
        model.train()
        for xb, yb in make_loader(data, epoch):
            opt.zero_grad()
            F.cross_entropy(model(xb), yb).backward()
            opt.step()
        if after_epoch is not None:
            after_epoch(model, x)
    return g.report(), g.session.options.stream.getvalue()


_LOADER = {}


def _one_loader(data, epoch):
    if id(data) not in _LOADER:
        _LOADER.clear()
        _LOADER[id(data)] = DataLoader(data, batch_size=64, shuffle=True)
    return _LOADER[id(data)]


def _evaluate_with_global_seed(model, x):
    generator = torch.manual_seed(0)  # the diffusers tutorial's evaluation: rewinds the global generator
    noise = torch.randn(16, 64, generator=generator)
    with torch.no_grad():
        model.eval()
        model(x[1400:1416] + 0.01 * noise)


def _evaluate_with_own_generator(model, x):
    generator = torch.Generator().manual_seed(0)
    noise = torch.randn(16, 64, generator=generator)
    with torch.no_grad():
        model.eval()
        model(x[1400:1416] + 0.01 * noise)


def _evaluate_under_fork_rng(model, x):
    with torch.random.fork_rng():
        _evaluate_with_global_seed(model, x)


def set_seed(seed):
    random.seed(seed)
    torch.manual_seed(seed)


@pytest.mark.parametrize("bug", [True, False])
def test_seed_reset_in_evaluation(bug):
    findings, text = _train(_one_loader, after_epoch=_evaluate_with_global_seed if bug
                            else _evaluate_with_own_generator)
    if bug:
        assert slugs(findings) == ["shuffle-order-repeats"], text
        assert re.search(r"torch\.manual_seed at \S*test_shuffle_order_repeats\.py:\d+", text)  # the line that reseeds
        assert "epoch 3 of the training DataLoader (RandomSampler)" in text
    else:
        assert findings == [], text


def test_seed_reset_under_fork_rng_leaves_the_shuffle_alone():
    findings, text = _train(_one_loader, after_epoch=_evaluate_under_fork_rng)
    assert findings == [], text


@pytest.mark.parametrize("per_epoch_seed", [False, True])
def test_seeding_helper_at_the_top_of_every_epoch(per_epoch_seed):
    findings, text = _train(_one_loader, before_epoch=(lambda e: set_seed(e)) if per_epoch_seed
                            else (lambda e: set_seed(0)))
    if per_epoch_seed:  # a new seed per epoch: a new order per epoch
        assert findings == [], text
    else:
        assert slugs(findings) == ["shuffle-order-repeats"], text
        assert "epoch 2 of the training DataLoader (RandomSampler)" in text
        assert re.search(r"torch\.manual_seed at \S*test_shuffle_order_repeats\.py:\d+", text)


def test_generator_made_again_for_every_epoch():
    findings, text = _train(lambda data, epoch: DataLoader(data, batch_size=64, shuffle=True,
                                                           generator=torch.Generator().manual_seed(0)))
    assert slugs(findings) == ["shuffle-order-repeats"], text
    assert "its own torch.Generator" in text
    assert re.search(r"built at \S*test_shuffle_order_repeats\.py:\d+", text)


def test_generator_made_once():
    g = torch.Generator().manual_seed(0)
    findings, text = _train(lambda data, epoch: DataLoader(data, batch_size=64, shuffle=True, generator=g))
    assert findings == [], text


@pytest.mark.parametrize("bug", [True, False])
def test_subset_sampler_rewound_by_a_callback(bug):
    idx = list(range(0, 640, 2))
    sampler = SubsetRandomSampler(idx)
    loader = {}

    def make(data, epoch):
        return loader.setdefault("l", DataLoader(data, batch_size=32, sampler=sampler))

    def callback(model, x):  # a "reproducible sampling" callback
        if bug:
            torch.manual_seed(1234)
        torch.randn(3)

    findings, text = _train(make, after_epoch=callback)
    if bug:
        assert slugs(findings) == ["shuffle-order-repeats"], text
        assert "SubsetRandomSampler" in text
    else:
        assert findings == [], text


def test_unshuffled_loader_is_not_judged():
    findings, text = _train(lambda data, epoch: DataLoader(data, batch_size=64),
                            after_epoch=_evaluate_with_global_seed)
    assert "shuffle-order-repeats" not in slugs(findings), text


def test_tiny_data_set_may_repeat_by_chance():
    """Four samples in batches of two: two shuffles agree one time in 24 -- not a proof."""
    tiny = {}

    def make(data, epoch):
        small = tiny.setdefault("d", TensorDataset(*data[:4]))
        return DataLoader(small, batch_size=2, shuffle=True, generator=torch.Generator().manual_seed(0))

    findings, text = _train(make, epochs=4)
    assert "shuffle-order-repeats" not in slugs(findings), text


def test_distributed_sampler_without_set_epoch_is_unset_epochs_finding():
    sampler = {}

    def make(data, epoch):
        s = sampler.setdefault("s", DistributedSampler(data, num_replicas=1, rank=0, shuffle=True))
        return DataLoader(data, batch_size=64, sampler=s)

    findings, text = _train(make)
    assert slugs(findings) == ["unset-epoch"], text


def test_peeking_at_a_batch_is_not_an_epoch():
    """``next(iter(loader))`` after a reseed, once per epoch, to look at a batch: no optimizer step in it."""
    x, y = digits()
    loader = DataLoader(TensorDataset(x[:640], y[:640]), batch_size=64, shuffle=True)
    model = mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    g = guarded(model, opt, ignore=TIMING)
    for epoch in range(3):
        torch.manual_seed(epoch)
        for xb, yb in loader:
            opt.zero_grad()
            F.cross_entropy(model(xb), yb).backward()
            opt.step()
        torch.manual_seed(0)
        next(iter(loader))  # the same batch every time, on purpose
    findings = g.report()
    assert findings == [], g.session.options.stream.getvalue()


def _hand_written(kind: str, reseed, runs: int = 1, epochs: int = 3):
    """A loop without a DataLoader: ``torch.randperm`` over the training set per epoch, or nanoGPT-style
    ``torch.randint`` batches; ``reseed(epoch)`` runs after every epoch's evaluation."""
    x, y = digits()
    outs = []
    for run in range(runs):
        torch.manual_seed(run)
        model = mlp()
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        g = guarded(model, opt, ignore=TIMING)
        for epoch in range(epochs):
            model.train()
            if kind == "randperm":
                order = torch.randperm(1400)
                batches = [order[i:i + 100] for i in range(0, 1400, 100)]
            else:
                batches = [torch.randint(1400, (64,)) for _ in range(10)]
            for b in batches:
                opt.zero_grad()
                F.cross_entropy(model(x[b]), y[b]).backward()
                opt.step()
            reseed(epoch)
        outs.append((g.report(), g.session.options.stream.getvalue()))
    return outs


@pytest.mark.parametrize("kind", ["randperm", "randint"])
@pytest.mark.parametrize("bug", [True, False])
def test_hand_written_shuffle_rewound(kind, bug):
    [(findings, text)] = _hand_written(kind, (lambda e: torch.manual_seed(0)) if bug
                                       else (lambda e: torch.manual_seed(100 + e)))
    if bug:
        assert slugs(findings) == ["shuffle-order-repeats"], text
        assert f"torch.{kind}(...) at " in text and "test_shuffle_order_repeats.py:" in text
    else:
        assert findings == [], text


def test_a_sweep_that_seeds_each_run_is_not_one_run_repeating():
    """``overt run``'s discovery: each run builds its own model and optimizer after seeding."""
    x, y = digits()

    def sweep():
        for lr in (0.1, 0.05):
            torch.manual_seed(0)
            model = mlp()
            opt = torch.optim.SGD(model.parameters(), lr=lr)
            loader = DataLoader(TensorDataset(x[:640], y[:640]), batch_size=64, shuffle=True)
            for epoch in range(2):
                for xb, yb in loader:
                    opt.zero_grad()
                    F.cross_entropy(model(xb), yb).backward()
                    opt.step()
                order = torch.randperm(640)  # noqa: F841  (a hand-written draw after each run's seed, too)

    findings, text = guarded_run(sweep)
    assert findings == [], text


def _numpy_loop(kind: str, bug: bool):
    """A NumPy-style loop: ``np.random.permutation`` or ``np.random.shuffle`` per epoch; the evaluation seeds
    NumPy's (and Python's) global generators when ``bug``."""
    import numpy as np

    x, y = digits()
    np.random.seed(0)
    model = mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    g = guarded(model, opt, ignore=TIMING)
    for epoch in range(3):
        model.train()
        if kind == "permutation":
            order = np.random.permutation(1400)
        else:
            order = np.arange(1400)
            np.random.shuffle(order)
        for i in range(0, 1400, 100):
            b = torch.as_tensor(order[i:i + 100])
            opt.zero_grad()
            F.cross_entropy(model(x[b]), y[b]).backward()
            opt.step()
        model.eval()
        if bug:
            np.random.seed(1)
            random.seed(1)
        with torch.no_grad():
            model(x[1400:1500])
    return g.report(), g.session.options.stream.getvalue()


@pytest.mark.parametrize("kind", ["permutation", "shuffle"])
@pytest.mark.parametrize("bug", [True, False])
def test_numpy_shuffle_rewound(kind, bug):
    findings, text = _numpy_loop(kind, bug)
    if bug:
        assert slugs(findings) == ["shuffle-order-repeats"], text
        assert re.search(r"np\.random\.seed at \S*test_shuffle_order_repeats\.py:\d+", text), text  # not random.seed
        assert "np.random.default_rng(seed)" in text
    else:
        assert findings == [], text
