"""data-mutated-by-reading (issue 33, invariants: reading data does not change it): a __getitem__ or a
collate_fn that normalises or augments a view of the stored data in place.  Planted bugs of different
forms (a user Dataset over a tensor with sub_/div_, a TensorDataset edited in a collate_fn, a user Dataset
over numpy arrays with ``/= 16``, an augmentation written with ``.copy_()``, a transform wrapper over a
Subset of a TensorDataset with ``-=``), each with a clean twin, and
two programs that write their data on purpose (a cache filled on first read, pseudo-labels rewritten
between epochs): all on digits."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset, Subset, TensorDataset, default_collate

from tests.conftest import TIMING
from tests.guards.helpers import digits, guarded, mlp, slugs

SLUG = "data-mutated-by-reading"
MEAN, STD = 0.3, 0.4


class TensorImages(Dataset):
    """Digits held as one tensor; the sample is normalised in place (bug) or on a copy (twin)."""

    def __init__(self, x, y, bug):
        self.x, self.y, self.bug = x, y, bug

    def __len__(self):
        return len(self.y)

    def __getitem__(self, i):
        img = self.x[i] if self.bug else self.x[i].clone()
        img.sub_(MEAN).div_(STD)  # the write the finding names
        return img, self.y[i]


class NumpyImages(Dataset):
    """Digits held as numpy arrays of 0..16; the view is scaled with ``/=`` (bug) or a copy is (twin)."""

    def __init__(self, x, y, bug):
        self.x, self.y, self.bug = x.numpy() * 16.0, y.numpy(), bug

    def __len__(self):
        return len(self.y)

    def __getitem__(self, i):
        img = self.x[i] if self.bug else self.x[i].copy()
        img /= 16.0
        return torch.from_numpy(img), int(self.y[i])


class FlipImages(Dataset):
    """Half the samples mirrored with ``.copy_()`` on the stored row (bug) or built anew (twin)."""

    def __init__(self, x, y, bug):
        self.x, self.y, self.bug = x.view(-1, 8, 8), y, bug

    def __len__(self):
        return len(self.y)

    def __getitem__(self, i):
        img = self.x[i]
        if torch.rand(()) < 0.5:
            if self.bug:
                img.copy_(img.flip(-1))
            else:
                img = img.flip(-1)
        return img.reshape(64), self.y[i]


class Standardised(Dataset):
    """A transform wrapper over a Subset of a TensorDataset: standardises the inner row in place (bug) or
    returns a new tensor (twin)."""

    def __init__(self, dataset, bug):
        self.dataset, self.bug = dataset, bug

    def __len__(self):
        return len(self.dataset)

    def __getitem__(self, i):
        xb, yb = self.dataset[i]
        if self.bug:
            xb -= MEAN
        else:
            xb = xb - MEAN
        return xb, yb


def scale_in_collate(batch):
    """A TensorDataset's rows rescaled in the collate function, in place."""
    for xb, _ in batch:
        xb.mul_(2.0).sub_(1.0)
    return default_collate(batch)


def scale_in_collate_twin(batch):
    xs, ys = default_collate(batch)
    return xs * 2.0 - 1.0, ys


def _fit(train_set, epochs=3, after_epoch=None, **loader_kw):
    loader = DataLoader(train_set, batch_size=64, shuffle=True, **loader_kw)
    model = mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    g = guarded(model, opt, ignore=TIMING)
    for _ in range(epochs):
        for xb, yb in loader:
            opt.zero_grad()
            F.cross_entropy(model(xb.float()), yb).backward()
            opt.step()
        if after_epoch is not None:
            after_epoch(model)
    return g.report(), g.session.options.stream.getvalue()


def _sets(form, bug):
    x, y = digits()
    x, y = x[:1000].clone(), y[:1000].clone()
    if form == "tensor":
        return TensorImages(x, y, bug), {}
    if form == "numpy":
        return NumpyImages(x, y, bug), {}
    if form == "copy_":
        return FlipImages(x, y, bug), {}
    if form == "wrapper":
        return Standardised(Subset(TensorDataset(x, y), range(100, 900)), bug), {}
    return TensorDataset(x, y), {"collate_fn": scale_in_collate if bug else scale_in_collate_twin}


@pytest.mark.parametrize("form", ["tensor", "numpy", "copy_", "collate", "wrapper"])
@pytest.mark.parametrize("bug", [True, False])
def test_reading_that_writes_the_stored_data(form, bug):
    data, kw = _sets(form, bug)
    findings, text = _fit(data, **kw)
    if not bug:
        assert SLUG not in slugs(findings), text
        return
    assert SLUG in slugs(findings), text
    where = {"tensor": "sub_() at ",
             "numpy": "__getitem__ at ",
             "copy_": "copy_() at ",
             "collate": "mul_() at ",
             "wrapper": "sub_() at "}[form]
    assert where in text and "test_data_mutated_by_reading.py:" in text, text
    assert ".clone()" in text


class CachedImages(Dataset):
    """A cache tensor filled on first read (written on the first pass only): not judged."""

    def __init__(self, x, y):
        self.src, self.y = x, y
        self.cache = torch.zeros_like(x)
        self.filled = torch.zeros(len(y), dtype=torch.bool)

    def __len__(self):
        return len(self.y)

    def __getitem__(self, i):
        if not self.filled[i]:
            self.cache[i] = (self.src[i] - MEAN) / STD
            self.filled[i] = True
        return self.cache[i], self.y[i]


class PseudoLabelled(Dataset):
    """Targets rewritten on purpose between epochs by the data set's own method: not judged."""

    def __init__(self, x, y):
        self.x, self.y = x, y.clone()

    def __len__(self):
        return len(self.y)

    def __getitem__(self, i):
        return self.x[i], self.y[i]

    def relabel(self, model):
        with torch.no_grad():
            self.y[:] = model(self.x).argmax(1)


def test_cache_filled_on_first_read_is_silent():
    x, y = digits()
    findings, text = _fit(CachedImages(x[:1000].clone(), y[:1000].clone()), epochs=3)
    assert SLUG not in slugs(findings), text


def test_pseudo_labels_written_between_epochs_are_silent():
    x, y = digits()
    data = PseudoLabelled(x[:1000].clone(), y[:1000].clone())

    def relabel(model):
        data.relabel(model)
        data.y[:10] = 0  # and written outside the data set too

    findings, text = _fit(data, after_epoch=relabel)
    assert SLUG not in slugs(findings), text
