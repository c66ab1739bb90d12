"""Planted bugs and their clean twins for the forward-observing guards, each run on a model that
is called eagerly or through ``torch.compile``: the guard watches the user's module, the loop calls
what ``wrap`` returns (the module itself, ``torch.compile(module)``, or the module compiled in
place with ``module.compile()``).  Shared by tests/guards/test_compiled.py and
scripts/compile_blindness.py (the table of which checks fire under compile)."""

from __future__ import annotations

from typing import Callable

import torch
from torch import nn
from torch.utils.data import DataLoader, Subset, TensorDataset, random_split

from tests.conftest import TIMING
from tests.guards.helpers import Digits, batches, digits, guarded, mlp, noise, val_batches

Wrap = Callable[[nn.Module], nn.Module]


def eager(model: nn.Module) -> nn.Module:
    return model


def compiled(backend: str = "aot_eager") -> Wrap:
    """``torch.compile(model, backend=backend)``: an ``OptimizedModule`` around the user's module."""
    def wrap(model: nn.Module) -> nn.Module:
        return torch.compile(model, backend=backend)
    return wrap


def compiled_in_place(backend: str = "aot_eager") -> Wrap:
    """``model.compile(backend=backend)``: the module itself, its ``__call__`` compiled."""
    def wrap(model: nn.Module) -> nn.Module:
        model.compile(backend=backend)
        return model
    return wrap


def _loop(model, call, opt, train, val, *, epochs=2, call_eval=True, no_grad=True, loss=nn.functional.cross_entropy):
    for _ in range(epochs):
        call.train()
        for xb, yb in train:
            opt.zero_grad()
            loss(call(xb), yb).backward()
            opt.step()
        if call_eval:
            call.eval()
        with torch.no_grad() if no_grad else torch.enable_grad():
            for xb, _ in val:
                call(xb)


def _digits_loaders(train_x=None, val_x=None):
    x, y = digits()
    train_x = x[:1400] if train_x is None else train_x
    val_x = x[1400:] if val_x is None else val_x
    return (DataLoader(TensorDataset(train_x, y[:1400]), batch_size=64, shuffle=True),
            DataLoader(TensorDataset(val_x, y[1400:]), batch_size=128))


def _dropout_bn_evaluated(wrap: Wrap, *, call_eval: bool, no_grad: bool):
    torch.manual_seed(0)
    model = mlp(dropout=0.3, bn=True)
    call = wrap(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    g = guarded(model, opt, ignore=TIMING)
    _loop(model, call, opt, *_digits_loaders(), call_eval=call_eval, no_grad=no_grad)
    return g


def train_mode_in_eval(wrap: Wrap, planted: bool):
    """Evaluation without ``model.eval()`` (the planted bug) or with it."""
    return _dropout_bn_evaluated(wrap, call_eval=not planted, no_grad=True)


def graph_in_eval(wrap: Wrap, planted: bool):
    """Evaluation in eval mode but without ``torch.no_grad()`` (planted) or with it."""
    return _dropout_bn_evaluated(wrap, call_eval=True, no_grad=not planted)


class Head(nn.Module):
    """digits -> 10 log-probabilities, normalised over ``dim`` (0: over the batch, the bug)."""

    def __init__(self, dim: int):
        super().__init__()
        torch.manual_seed(0)
        self.fc1, self.fc2 = nn.Linear(64, 32), nn.Linear(32, 10)
        self.out = nn.LogSoftmax(dim=dim)

    def forward(self, x):
        return self.out(self.fc2(torch.relu(self.fc1(x))))


def batch_dependent_eval(wrap: Wrap, planted: bool):
    torch.manual_seed(0)
    model = Head(0 if planted else 1)
    call = wrap(model)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    g = guarded(model, opt, ignore=[*TIMING, "softmax-over-batch"])
    _loop(model, call, opt, *_digits_loaders(), loss=nn.functional.nll_loss)
    return g


def dead_activations(wrap: Wrap, planted: bool):
    model = mlp(hidden=64)
    if planted:
        with torch.no_grad():
            model[0].bias.fill_(-20.0)  # every ReLU unit starts (and stays) dead
    call = wrap(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.01 if planted else 0.05)
    g = guarded(model, opt, check_every=2, ignore=["loss-not-decreasing", "no-gradient", *TIMING])
    for xb, yb in batches(32, 8):
        opt.zero_grad()
        nn.functional.cross_entropy(call(xb), yb).backward()
        opt.step()
    return g


class _LogSoftmaxHead(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.net = mlp()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.log_softmax(self.net(x), dim=-1)


def softmax_over_batch(wrap: Wrap, planted: bool):
    """The evaluation loop takes a softmax of the model's outputs over the batch (dim 0)."""
    model = _LogSoftmaxHead()
    call = wrap(model)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    g = guarded(model, opt, ignore=TIMING)
    x, y = digits()
    gen = torch.Generator().manual_seed(0)
    for _ in range(8):
        idx = torch.randint(1400, (32,), generator=gen)
        loss = nn.functional.nll_loss(call(x[idx]), y[idx])
        opt.zero_grad()
        loss.backward()
        opt.step()
    call.eval()
    with torch.inference_mode():
        for xb, _ in val_batches(32):
            torch.softmax(call(xb), dim=0 if planted else 1).argmax(1)
    call.train()
    return g


def eval_inputs_augmented(wrap: Wrap, planted: bool):
    """A random transform reaches the evaluation subset through the dataset both subsets share."""
    torch.manual_seed(0)
    full = Digits()
    train_set, val_set = random_split(full, [1400, len(full) - 1400], generator=torch.Generator().manual_seed(0))
    if planted:
        full.transform = noise
    else:
        train_set = Subset(Digits(transform=noise), train_set.indices)
    model = mlp()
    call = wrap(model)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    g = guarded(model, opt, ignore=TIMING)
    _loop(model, call, opt, DataLoader(train_set, batch_size=64, shuffle=True), DataLoader(val_set, batch_size=128))
    return g


def train_serve_skew(wrap: Wrap, planted: bool):
    """Inputs standardised for training, raw pixels for evaluation (planted) or standardised too."""
    torch.manual_seed(0)
    x, _ = digits()
    mean, std = x[:1400].mean(0), x[:1400].std(0) + 1e-3
    model = mlp()
    call = wrap(model)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    g = guarded(model, opt, ignore=TIMING)
    _loop(model, call, opt, *_digits_loaders((x[:1400] - mean) / std, x[1400:] if planted else (x[1400:] - mean) / std))
    return g


def graph_leak(wrap: Wrap, planted: bool):
    """Each step's loss kept in a list with its graph (planted) or as a float."""
    model = mlp()
    call = wrap(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    g = guarded(model, opt, ignore=TIMING)
    history = []
    for xb, yb in batches(32, 10):
        opt.zero_grad()
        loss = nn.functional.cross_entropy(call(xb), yb)
        loss.backward()
        opt.step()
        history.append(loss if planted else loss.item())
    return g


def non_finite_input(wrap: Wrap, planted: bool):
    """A NaN pixel in one training batch after the warm-up (seen at the model's input)."""
    model = mlp()
    call = wrap(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    g = guarded(model, opt, ignore=TIMING, stop_on_error=False, check_every=4)
    for i, (xb, yb) in enumerate(batches(32, 12)):
        if planted and i == 7:
            xb = xb.clone()
            xb[0, 0] = float("nan")
        opt.zero_grad()
        nn.functional.cross_entropy(call(xb), yb).backward()
        opt.step()
    return g


def label_out_of_range(wrap: Wrap, planted: bool):
    """An 8-output head for the 10 digit classes (planted: the loss raises and is explained) or a
    10-output one: a loss check, outside the model."""
    model = mlp(out=8 if planted else 10)
    call = wrap(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    g = guarded(model, opt, ignore=TIMING)
    try:
        for xb, yb in batches(32, 10):
            opt.zero_grad()
            nn.functional.cross_entropy(call(xb), yb).backward()
            opt.step()
    except IndexError:
        pass
    return g


#: slug -> the case that plants it
CASES: dict[str, Callable[[Wrap, bool], object]] = {
    "train-mode-in-eval": train_mode_in_eval,
    "graph-in-eval": graph_in_eval,
    "batch-dependent-eval": batch_dependent_eval,
    "dead-activations": dead_activations,
    "softmax-over-batch": softmax_over_batch,
    "eval-inputs-augmented": eval_inputs_augmented,
    "train-serve-skew": train_serve_skew,
    "graph-leak": graph_leak,
    "non-finite": non_finite_input,
    "label-out-of-range": label_out_of_range,
}
