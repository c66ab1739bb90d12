"""running-stats-never-computed and batchnorm-momentum-inverted (overt/guards/normstats.py, issue 33):
BatchNorm running statistics that do not describe the data evaluation normalises.  Planted bugs of
several forms (SWA by hand into a copy made before training, an EMA over ``parameters()`` of a CNN with
BatchNorm2d, a checkpoint of the parameters only, a Keras momentum) and their correct twins, found as
``overt run`` finds them (global hooks, a model switched to eval mode), on small real runs on digits."""

from __future__ import annotations

import copy
import io

import torch
import torch.nn.functional as F
from torch import nn
from torch.optim.swa_utils import update_bn
from torch.utils.data import DataLoader, TensorDataset

from overt.guards.options import GuardOptions
from overt.guards.session import GuardSession
from tests.conftest import TIMING
from tests.guards.helpers import digits, slugs

STATS = "running-stats-never-computed"
MOMENTUM = "batchnorm-momentum-inverted"


def _session() -> GuardSession:
    return GuardSession(GuardOptions(stream=io.StringIO(), ignore=TIMING), auto=True)


def _data(scale: float = 16.0):
    x, y = digits()
    return TensorDataset(x[:640] * scale, y[:640]), (x[1500:] * scale, y[1500:])


def _mlp(momentum: float | None = 0.1) -> nn.Sequential:
    torch.manual_seed(0)
    return nn.Sequential(nn.BatchNorm1d(64, momentum=momentum), nn.Linear(64, 64),
                         nn.BatchNorm1d(64, momentum=momentum), nn.ReLU(), nn.Linear(64, 10))


class _Cnn(nn.Module):
    def __init__(self, momentum: float | None = 0.1) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(1, 8, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(8, momentum=momentum)
        self.conv2 = nn.Conv2d(8, 16, 3, padding=1)
        self.bn2 = nn.BatchNorm2d(16, momentum=momentum)
        self.head = nn.Linear(16, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.view(-1, 1, 8, 8)
        x = F.relu(self.bn1(self.conv1(x)))
        x = F.relu(self.bn2(self.conv2(x)))
        return self.head(x.mean((2, 3)))


def _train(model: nn.Module, loader: DataLoader, epochs: int, after_step=None) -> None:
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    for _ in range(epochs):
        model.train()
        for xb, yb in loader:
            opt.zero_grad()
            F.cross_entropy(model(xb), yb).backward()
            opt.step()
            if after_step is not None:
                after_step()


def _accuracy(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> float:
    model.eval()
    with torch.no_grad():
        return float((model(x).argmax(1) == y).float().mean())


def _swa(update: bool) -> tuple[list, float]:
    train, (xv, yv) = _data()
    loader = DataLoader(train, batch_size=64, shuffle=True)
    session = _session()
    try:
        model = _mlp()
        swa = copy.deepcopy(model)  # before training: its buffers stay the initial ones
        seen = [0]

        def average() -> None:
            seen[0] += 1
            with torch.no_grad():
                for p_swa, p in zip(swa.parameters(), model.parameters()):  # parameters only
                    p_swa.mul_((seen[0] - 1) / seen[0]).add_(p / seen[0])

        _train(model, loader, 4, average)
        if update:
            update_bn(loader, swa)
        acc = _accuracy(swa, xv, yv)
    finally:
        findings = session.close()
    return findings, acc


def test_swa_by_hand_without_update_bn_is_named_with_the_layer():
    findings, acc = _swa(update=False)
    assert slugs(findings) == [STATS]
    f = findings[0]
    assert "BatchNorm1d" in f.message and "mean 0, variance 1" in f.message and "update_bn" in f.fix
    assert "test_norm_stats.py" in f.where  # the evaluation line
    twin, twin_acc = _swa(update=True)
    assert twin == []
    assert twin_acc > acc + 0.03  # the bug costs accuracy


def _recompute(momentum: float | None) -> tuple[list, float]:
    """SWA with the BatchNorm statistics recomputed by hand, as a callback does: reset, set the momentum, one
    pass over the training data in train mode under no_grad, put the momentum back (w346)."""
    from torch.optim.swa_utils import AveragedModel

    train, (xv, yv) = _data()
    loader = DataLoader(train, batch_size=64, shuffle=True)
    session = _session()
    try:
        model = _mlp()
        swa = AveragedModel(model)
        _train(model, loader, 4, lambda: swa.update_parameters(model))
        momenta = {}
        for m in swa.modules():
            if isinstance(m, nn.BatchNorm1d):
                m.reset_running_stats()
                momenta[m], m.momentum = m.momentum, momentum
        swa.train()
        with torch.no_grad():
            for xb, _ in loader:
                swa(xb)
        for m, mom in momenta.items():
            m.momentum = mom
        acc = _accuracy(swa, xv, yv)
    finally:
        findings = session.close()
    return findings, acc


def test_statistics_recomputed_with_momentum_zero_are_named_and_with_none_are_quiet():
    findings, acc = _recompute(0.0)
    assert slugs(findings) == [STATS]
    f = findings[0]
    assert "momentum 0" in f.message and "tracked 10 training batches" in f.message and "momentum=None" in f.fix
    twin, twin_acc = _recompute(None)
    assert twin == []
    assert twin_acc > acc + 0.03


def test_statistics_frozen_with_momentum_zero_after_training_are_quiet():
    # momentum 0 set on trained layers to freeze their statistics while fine-tuning: they hold the data's
    train, (xv, yv) = _data()
    loader = DataLoader(train, batch_size=64, shuffle=True)
    session = _session()
    try:
        model = _mlp()
        _train(model, loader, 2)
        for m in model.modules():
            if isinstance(m, nn.BatchNorm1d):
                m.momentum = 0.0
        _train(model, loader, 1)
        _accuracy(model, xv, yv)
    finally:
        findings = session.close()
    assert STATS not in slugs(findings)


def _ema(over_state: bool) -> list:
    train, (xv, yv) = _data(scale=1.0)
    loader = DataLoader(train, batch_size=64, shuffle=True)
    session = _session()
    try:
        torch.manual_seed(0)
        model = _Cnn()
        ema = copy.deepcopy(model)

        def update() -> None:
            with torch.no_grad():
                if over_state:  # every float entry of the state: parameters and BatchNorm buffers
                    for k, v in model.state_dict().items():
                        e = ema.state_dict()[k]
                        e.copy_(v) if not v.is_floating_point() else e.lerp_(v, 0.2)
                else:
                    for e, p in zip(ema.parameters(), model.parameters()):
                        e.lerp_(p, 0.2)

        _train(model, loader, 2, update)
        _accuracy(ema, xv, yv)
    finally:
        findings = session.close()
    return findings


def test_an_ema_over_parameters_of_a_cnn_is_named_and_over_the_state_is_quiet():
    findings = _ema(over_state=False)
    assert slugs(findings) == [STATS]
    assert "BatchNorm2d" in findings[0].message
    assert _ema(over_state=True) == []


def _checkpoint(tmp_path, parameters_only: bool) -> list:
    train, (xv, yv) = _data()
    model = _mlp()
    _train(model, DataLoader(train, batch_size=64, shuffle=True), 3)
    state = dict(model.named_parameters()) if parameters_only else model.state_dict()
    torch.save({k: v.detach() for k, v in state.items()}, tmp_path / "model.pt")
    session = _session()  # a separate evaluation script: no optimizer in it
    try:
        fresh = _mlp()
        fresh.load_state_dict(torch.load(tmp_path / "model.pt", weights_only=True), strict=False)
        _accuracy(fresh, xv, yv)
    finally:
        findings = session.close()
    return findings


def test_a_checkpoint_of_the_parameters_only_is_named(tmp_path):
    assert STATS in slugs(_checkpoint(tmp_path, parameters_only=True))
    assert _checkpoint(tmp_path, parameters_only=False) == []


def test_an_untrained_model_evaluated_before_training_is_quiet():
    train, (xv, yv) = _data()
    session = _session()
    try:
        model = _mlp()
        _accuracy(model, xv, yv)  # a sanity evaluation before training
        _train(model, DataLoader(train, batch_size=64, shuffle=True), 2)
        _accuracy(model, xv, yv)
    finally:
        findings = session.close()
    assert findings == []


def test_a_batchnorm_frozen_in_eval_mode_while_training_is_quiet():
    # the layer normalised with its (initial) running statistics in training too: its weights learned for them
    train, (xv, yv) = _data()
    session = _session()
    try:
        model = _mlp()
        with torch.no_grad():  # the frozen layer's inputs far from its (initial) statistics: mean about 5
            model[1].bias.add_(5.0)
        model[1].bias.requires_grad_(False)
        opt = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.05, momentum=0.9)
        for _ in range(2):
            model.train()
            model[2].eval()  # frozen on purpose
            for xb, yb in DataLoader(train, batch_size=64, shuffle=True):
                opt.zero_grad()
                F.cross_entropy(model(xb), yb).backward()
                opt.step()
        _accuracy(model, xv, yv)
    finally:
        findings = session.close()
    assert STATS not in slugs(findings)


def _momentum(momentum: float | None, cnn: bool) -> list:
    train, (xv, yv) = _data(scale=1.0)
    session = _session()
    try:
        torch.manual_seed(0)
        model = _Cnn(momentum) if cnn else _mlp(momentum)
        _train(model, DataLoader(train, batch_size=16, shuffle=True), 1)
        _accuracy(model, xv, yv)
    finally:
        findings = session.close()
    return findings


def test_a_keras_momentum_is_named_with_its_pytorch_value():
    for cnn in (False, True):
        findings = _momentum(0.9, cnn)
        assert slugs(findings) == [MOMENTUM], cnn
        assert "momentum=0.9" in findings[0].message and "momentum=0.1" in findings[0].fix


def test_a_momentum_set_on_the_layers_after_construction_is_named():
    # a helper that sets every BatchNorm's momentum from a Keras-style config (bn_momentum=0.99)
    train, (xv, yv) = _data(scale=1.0)
    session = _session()
    try:
        torch.manual_seed(0)
        model = _Cnn()
        for m in model.modules():
            if isinstance(m, nn.BatchNorm2d):
                m.momentum = 0.99
        _train(model, DataLoader(train, batch_size=16, shuffle=True), 1)
        _accuracy(model, xv, yv)
    finally:
        findings = session.close()
    assert slugs(findings) == [MOMENTUM]
    assert "momentum=0.99" in findings[0].message and "momentum=0.01" in findings[0].fix


def test_the_default_a_small_and_a_cumulative_momentum_are_quiet():
    for momentum in (0.1, 0.01, None):
        assert _momentum(momentum, cnn=True) == [], momentum


def test_momentum_one_keeps_the_latest_batch_on_purpose_and_is_quiet():
    # MAML's transductive BatchNorm: momentum=1 keeps only the latest batch's statistics; no Keras value (in Keras,
    # 1 would never update the average)
    assert _momentum(1.0, cnn=False) == []
