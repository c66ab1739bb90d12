"""unshuffled-training at run time (overt/guards/epochorder.py, issue 33 w335): a training epoch whose order follows
a per-sample quantity the program holds -- a bucketing batch sampler that yields its batches sorted by size, a
DataLoader reading a data set sorted by label in its stored order -- is named, one epoch after it was first seen;
the same sampler with its batches shuffled, a first epoch sorted on purpose (SortaGrad), a curriculum named so, a
sorted evaluation sampler and an unshuffled loader over data in no particular order stay quiet.  On digits, under
``overt.guard``; the per-sample quantity is a digit's ink (the sum of its pixels), standing for a length."""

from __future__ import annotations

import random

import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

from tests.guards.helpers import digits, guarded, mlp, slugs

SLUG = "unshuffled-training"
BATCH = 32


class BucketSampler:
    """Sorts the samples by size, cuts batches; shuffles the batches unless ``ordered``.  ``sorted_epochs``: the
    first epochs stay sorted (SortaGrad), the later ones are shuffled."""

    def __init__(self, sizes, ordered, sorted_epochs=None):
        self.sizes, self.ordered, self.sorted_epochs = sizes, ordered, sorted_epochs
        self.epoch = 0

    def __iter__(self):
        order = sorted(range(len(self.sizes)), key=self.sizes.__getitem__)
        batches = [order[i:i + BATCH] for i in range(0, len(order), BATCH)]
        keep = self.ordered if self.sorted_epochs is None else self.epoch < self.sorted_epochs
        if not keep:
            random.shuffle(batches)
        self.epoch += 1
        return iter(batches)


class CurriculumSampler(BucketSampler):
    pass


def _train_on(sampler, epochs=3, val_sampler=None):
    x, y = digits()
    torch.manual_seed(0)
    random.seed(0)
    model = mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    g = guarded(model, opt, check_every=10)
    for _ in range(epochs):
        for batch in sampler:
            opt.zero_grad()
            F.cross_entropy(model(x[batch]), y[batch]).backward()
            opt.step()
        if val_sampler is not None:
            with torch.no_grad():
                for batch in val_sampler:
                    model(x[batch])
    return g.report()


def _ink():
    x, _ = digits()
    return x.sum(1).tolist()


def test_batches_yielded_in_size_order_are_named():
    findings = _train_on(BucketSampler(_ink(), ordered=True))
    assert SLUG in slugs(findings)
    f = next(f for f in findings if f.slug == SLUG)
    assert "in the order of BucketSampler.sizes" in f.message and "one epoch later" in f.message
    assert "test_epoch_order.py" in f.where
    assert "random.shuffle(batches)" in f.fix


def test_shuffled_batches_a_sortagrad_first_epoch_and_a_curriculum_are_quiet():
    assert SLUG not in slugs(_train_on(BucketSampler(_ink(), ordered=False)))
    assert SLUG not in slugs(_train_on(BucketSampler(_ink(), ordered=False, sorted_epochs=1)))
    assert SLUG not in slugs(_train_on(CurriculumSampler(_ink(), ordered=True)))


def test_a_sorted_evaluation_sampler_is_quiet():
    val_sampler = BucketSampler(_ink(), ordered=True)
    assert SLUG not in slugs(_train_on(BucketSampler(_ink(), ordered=False), val_sampler=val_sampler))


def _train_loader(x, y, epochs=3):
    torch.manual_seed(0)
    model = mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    g = guarded(model, opt, check_every=10)
    settings = {"batch_size": BATCH}  # shuffle left to a setting (lint sees no shuffle=False)
    loader = DataLoader(TensorDataset(x, y), **settings)
    for _ in range(epochs):
        for xb, yb in loader:
            opt.zero_grad()
            F.cross_entropy(model(xb), yb).backward()
            opt.step()
    return g.report()


def test_a_loader_reading_data_sorted_by_label_is_named():
    x, y = digits()
    order = torch.argsort(y, stable=True)
    findings = _train_loader(x[order], y[order])
    assert SLUG in slugs(findings)
    f = next(f for f in findings if f.slug == SLUG)
    assert "TensorDataset.tensors[1]" in f.message and "training DataLoader built at" in f.message


def test_an_unshuffled_loader_over_data_in_no_order_is_quiet():
    x, y = digits()  # digits' labels cycle through the classes: a stored order unrelated to them
    assert SLUG not in slugs(_train_loader(x, y))
