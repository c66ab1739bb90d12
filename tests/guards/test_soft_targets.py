"""soft-targets-misaligned at run time (issue 33, round three's w94): distillation soft targets that
belong to other samples than the batch's.  Planted bugs in two forms (a teacher-output cache sliced
by batch position under a shuffled loader with ``nn.KLDivLoss``; log-probabilities replayed from a
list with ``log_target=True``), their clean twins (the cache looked up by the samples' own indices;
the teacher run on the batch), and two-peer mutual learning from scratch, whose targets start flat."""

from __future__ import annotations


import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from tests.guards.helpers import guarded_run, digits, mlp, slugs

T = 4.0


def _teacher() -> nn.Module:
    torch.manual_seed(0)
    x, y = digits()
    teacher = mlp(hidden=64)
    opt = torch.optim.Adam(teacher.parameters(), lr=1e-2)
    for _ in range(3):
        for i in range(0, 1400, 64):
            opt.zero_grad()
            F.cross_entropy(teacher(x[i:i + 64]), y[i:i + 64]).backward()
            opt.step()
    opt.zero_grad()
    teacher.eval()
    return teacher


def _cached(bug: bool, epochs: int = 2):
    teacher = _teacher()
    x, y = digits()
    ds = TensorDataset(x[:1400], y[:1400], torch.arange(1400))
    with torch.no_grad():
        cache = teacher(x[:1400])  # in dataset order

    def train():
        student = mlp(hidden=32)
        opt = torch.optim.Adam(student.parameters(), lr=1e-2)
        kd, ce = nn.KLDivLoss(reduction="batchmean"), nn.CrossEntropyLoss()
        for _ in range(epochs):
            for b, (xb, yb, idx) in enumerate(DataLoader(ds, batch_size=64, shuffle=True)):
                t_out = cache[b * 64:b * 64 + len(xb)] if bug else cache[idx]
                out = student(xb)
                loss = 0.9 * T * T * kd(F.log_softmax(out / T, 1), F.softmax(t_out / T, 1)) + 0.1 * ce(out, yb)
                opt.zero_grad()
                loss.backward()
                opt.step()
    return guarded_run(train)


def _replayed_log_targets(bug: bool, epochs: int = 2):
    teacher = _teacher()
    x, y = digits()
    loader = DataLoader(TensorDataset(x[:1400], y[:1400]), batch_size=64, shuffle=True)
    with torch.no_grad():
        replay = [F.log_softmax(teacher(xb) / T, 1) for xb, _ in loader]

    def train():
        student = mlp(hidden=32)
        opt = torch.optim.SGD(student.parameters(), lr=0.1)
        for _ in range(epochs):
            for i, (xb, yb) in enumerate(loader):
                if bug:
                    t_log = replay[i]
                else:
                    with torch.no_grad():
                        t_log = F.log_softmax(teacher(xb) / T, 1)
                out = student(xb)
                loss = F.kl_div(F.log_softmax(out / T, 1), t_log, reduction="batchmean", log_target=True) * T * T \
                    + F.cross_entropy(out, yb)
                opt.zero_grad()
                loss.backward()
                opt.step()
    return guarded_run(train)


def test_a_cache_sliced_by_batch_position_is_named_and_the_indexed_twin_is_silent():
    findings, text = _cached(bug=True)
    assert slugs(findings) == ["soft-targets-misaligned"], text
    assert "test_soft_targets.py:" in text and "chance for 10 classes" in text
    findings, text = _cached(bug=False)
    assert findings == [], text


def test_replayed_log_targets_are_named_and_the_teacher_on_the_batch_is_silent():
    findings, text = _replayed_log_targets(bug=True)
    assert slugs(findings) == ["soft-targets-misaligned"], text
    findings, text = _replayed_log_targets(bug=False)
    assert findings == [], text


def test_mutual_learning_from_scratch_is_silent():
    torch.manual_seed(0)
    x, y = digits()

    def train():
        a, b = mlp(hidden=32), mlp(hidden=32)
        opt = torch.optim.Adam(list(a.parameters()) + list(b.parameters()), lr=1e-2)
        for _ in range(2):
            for xb, yb in DataLoader(TensorDataset(x[:1400], y[:1400]), batch_size=64, shuffle=True):
                oa, ob = a(xb), b(xb)
                loss = F.cross_entropy(oa, yb) + F.kl_div(F.log_softmax(oa, 1), F.softmax(ob.detach(), 1),
                                                          reduction="batchmean") \
                    + F.cross_entropy(ob, yb) + F.kl_div(F.log_softmax(ob, 1), F.softmax(oa.detach(), 1),
                                                         reduction="batchmean")
                opt.zero_grad()
                loss.backward()
                opt.step()
    findings, text = guarded_run(train)
    assert findings == [], text


def test_soft_cross_entropy_targets_replayed_are_named_and_the_twin_is_silent():
    """The soft-target form of distillation: F.cross_entropy with the teacher's probabilities."""
    teacher = _teacher()
    x, y = digits()
    loader = DataLoader(TensorDataset(x[:1400], y[:1400]), batch_size=64, shuffle=True)
    for bug in (True, False):
        with torch.no_grad():
            replay = [F.softmax(teacher(xb) / T, 1) for xb, _ in loader]

        def train():
            student = mlp(hidden=32)
            opt = torch.optim.Adam(student.parameters(), lr=1e-2)
            for _ in range(2):
                for i, (xb, yb) in enumerate(loader):
                    with torch.no_grad():
                        soft = replay[i] if bug else F.softmax(teacher(xb) / T, 1)
                    out = student(xb)
                    loss = F.cross_entropy(out / T, soft) * T * T + F.cross_entropy(out, yb)  # T²: loss-terms-misscaled
                    opt.zero_grad()
                    loss.backward()
                    opt.step()
        findings, text = guarded_run(train)
        text = text
        assert slugs(findings) == (["soft-targets-misaligned"] if bug else []), text
        if bug:
            assert "given to F.cross_entropy" in text
