"""A DataLoader fetch of torch's own code runs with the axes window's mode aside; one that can run the user's
code stays under it (overt/guards/plainfetch.py; issue 33, the eighth overhead pass).  Real DataLoaders on the
digits data, the default checks."""

from __future__ import annotations

import io
from typing import Any

import torch
import torch.nn.functional as F
from torch.overrides import _get_current_function_mode_stack
from torch.utils.data import DataLoader, Dataset, RandomSampler, Subset, TensorDataset

from overt.guards import aside, axes, plainfetch
from overt.guards.options import GuardOptions
from overt.guards.session import GuardSession
from tests.conftest import TIMING
from tests.guards.helpers import _digits, mlp


class _Rows(Dataset):
    """The user's data set: its ``__getitem__`` notes the function modes it runs under."""

    def __init__(self, x: torch.Tensor, y: torch.Tensor):
        self.x, self.y = x, y
        self.seen: list[list[str]] = []

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        self.seen.append([type(m).__name__ for m in _get_current_function_mode_stack()])
        return self.x[i], self.y[i]


class _MySampler(RandomSampler):
    pass


class _MyTensors(TensorDataset):
    pass


def test_torch_only_fetches_are_told_from_those_that_run_the_users_code():
    x, y = _digits()
    x, y = x[:256], y[:256]
    tensors = TensorDataset(x, y)
    assert plainfetch.torch_only(iter(DataLoader(tensors, batch_size=32)))
    assert plainfetch.torch_only(iter(DataLoader(tensors, batch_size=32, shuffle=True)))
    assert plainfetch.torch_only(iter(DataLoader(Subset(tensors, range(100)), batch_size=32)))
    assert plainfetch.torch_only(iter(DataLoader(tensors, batch_size=None)))  # no auto-collation
    assert not plainfetch.torch_only(iter(DataLoader(_Rows(x, y), batch_size=32)))
    assert not plainfetch.torch_only(iter(DataLoader(_MyTensors(x, y), batch_size=32)))
    assert not plainfetch.torch_only(iter(DataLoader(tensors, batch_size=32, collate_fn=lambda b: b)))
    assert not plainfetch.torch_only(iter(DataLoader(tensors, batch_size=32, sampler=_MySampler(tensors))))


def _train(dataset: Dataset, calls: list[str]) -> list[str]:
    """A few epochs of a hand-written loop under the default checks; the torch calls the axes window's mode saw,
    by the file that made them (counted through the mode's own method)."""
    orig = axes._IndexMode.__torch_function__

    def counted(self: Any, func: Any, types: Any, args: tuple = (), kwargs: Any = None) -> Any:
        import sys

        calls.append(sys._getframe(1).f_code.co_filename)
        return orig(self, func, types, args, kwargs)

    axes._IndexMode.__torch_function__ = counted
    torch.manual_seed(0)
    session = GuardSession(GuardOptions(stream=io.StringIO(), ignore=TIMING), auto=True)
    try:
        model = mlp()
        opt = torch.optim.SGD(model.parameters(), lr=1e-2)
        for _ in range(2):
            for xb, yb in DataLoader(dataset, batch_size=32, shuffle=True):
                opt.zero_grad()
                F.cross_entropy(model(xb), yb).backward()
                opt.step()
    finally:
        axes._IndexMode.__torch_function__ = orig
        findings = session.close()
    assert aside.WINDOW is None
    return [f.slug for f in findings]


def test_the_window_sees_the_users_data_set_and_not_torchs_own_fetch():
    x, y = _digits()
    x, y = x[:320], y[:320]
    rows = _Rows(x, y)
    calls: list[str] = []
    slugs = _train(rows, calls)
    # the user's __getitem__ runs under the window's mode during the first checked steps
    assert any(seen == [axes._IndexMode.__name__] for seen in rows.seen), rows.seen[:40]
    assert any(f.endswith("test_plainfetch.py") for f in calls)
    calls_tensors: list[str] = []
    assert _train(TensorDataset(x, y), calls_tensors) == slugs
    # a TensorDataset's fetch (one index per sample and field, the default collate) is not seen by the mode
    assert not [f for f in calls_tensors if f.endswith(("dataset.py", "collate.py"))], calls_tensors[:20]
    # the model's own calls still are
    assert calls_tensors
