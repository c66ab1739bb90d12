"""val-overlaps-train at run time (overt/guards/evaloverlap.py, issue 33): the session compares the data
set of the first evaluation pass over each data set with the data set of the latest training pass.
Planted: a test set loaded from the training split (a torchvision-style ``train`` flag), a validation
subset drawn from the training indices, a regression on a tensor copy of the training rows.  Quiet:
a held-out test set, training accuracy on the training loader next to it, a copy of the training data
evaluated next to a held-out set, k-fold, a distillation pass over the training inputs.  Small real
runs on digits, found as ``overt run`` finds them (global hooks)."""

from __future__ import annotations

import io

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, Dataset, Subset, TensorDataset

from overt.guards.options import GuardOptions
from overt.guards.session import GuardSession
from tests.conftest import TIMING
from tests.guards.helpers import digits, mlp, slugs

SLUG = "val-overlaps-train"


def _fit(model: nn.Module, data, epochs: int = 2, loss=F.cross_entropy) -> None:
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    model.train()
    for _ in range(epochs):
        for xb, yb in DataLoader(data, batch_size=64, shuffle=True):
            opt.zero_grad()
            loss(model(xb), yb).backward()
            opt.step()


def _score(model: nn.Module, data) -> float:
    model.eval()
    correct = 0
    with torch.no_grad():
        for xb, yb in DataLoader(data, batch_size=128):
            correct += int((model(xb).argmax(1) == yb).sum())
    model.train()
    return correct / len(data)


def _run(body) -> list:
    session = GuardSession(GuardOptions(stream=io.StringIO(), ignore=TIMING), auto=True)
    try:
        body()
    finally:
        findings = session.close()
    return findings


def _split(train: bool) -> TensorDataset:  # a torchvision-style data set: the split chosen by a flag
    x, y = digits()
    return TensorDataset(x[:500], y[:500]) if train else TensorDataset(x[1400:], y[1400:])


def test_a_test_set_loaded_from_the_training_split_is_named():
    def body() -> None:
        model = mlp()
        _fit(model, _split(train=True))
        _score(model, _split(train=True))  # train=True where train=False was meant

    findings = _run(body)
    assert slugs(findings) == [SLUG]
    assert "500 of 500" in findings[0].message and "train=False" in findings[0].fix


class _Mnist(Dataset):
    """As torchvision's MNIST keeps it: every image of the split in ``.data`` (uint8), a transform
    applied per item, the split chosen by ``train``."""

    def __init__(self, train: bool, augment: bool = False) -> None:
        x, y = digits()
        rows = slice(0, 500) if train else slice(1400, None)
        self.data, self.targets = (x[rows] * 16).to(torch.uint8).numpy(), y[rows]
        self.augment = augment

    def __len__(self) -> int:
        return len(self.data)

    def __getitem__(self, i: int):
        x = torch.as_tensor(self.data[i], dtype=torch.float32) / 16
        if self.augment:  # a random transform: reading items would not compare them
            x = x + 0.05 * torch.randn_like(x)
        return x, self.targets[i]


def test_a_torchvision_style_test_set_from_the_training_split_is_named():
    def body(test_train: bool) -> None:
        model = mlp()
        _fit(model, _Mnist(train=True, augment=True))
        _score(model, _Mnist(train=test_train))

    findings = _run(lambda: body(True))
    assert slugs(findings) == [SLUG]
    assert "_Mnist" in findings[0].message
    assert _run(lambda: body(False)) == []


def test_validation_drawn_from_the_training_indices_is_named():
    x, y = digits()
    base = TensorDataset(x, y)
    train = Subset(base, list(range(1400)))
    val = Subset(base, torch.randperm(1400, generator=torch.Generator().manual_seed(1))[:280].tolist())

    def body() -> None:
        model = mlp()
        for _ in range(2):
            _fit(model, train, epochs=1)
            _score(model, val)

    findings = _run(body)
    assert slugs(findings) == [SLUG]
    assert "indices into the same data set" in findings[0].message


def test_a_regression_evaluated_on_a_copy_of_its_training_rows_is_named():
    x, _ = digits()
    target = x[:, :8].sum(1, keepdim=True)
    train = TensorDataset(x[:600], target[:600])
    test = TensorDataset(x[:600].clone(), target[:600].clone())  # another copy of the same rows

    def body() -> None:
        torch.manual_seed(0)
        model = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 1))
        _fit(model, train, loss=F.mse_loss)
        model.eval()
        with torch.no_grad():
            sum(float(F.mse_loss(model(xb), yb)) for xb, yb in DataLoader(test, batch_size=100))

    assert slugs(_run(body)) == [SLUG]


def test_held_out_evaluation_and_training_accuracy_are_quiet():
    train, test = _split(train=True), _split(train=False)

    def held_out() -> None:
        model = mlp()
        _fit(model, train)
        _score(model, test)

    def train_accuracy_too() -> None:  # the training loader itself, and a second copy, next to a held-out set
        model = mlp()
        _fit(model, train)
        _score(model, train)
        _score(model, _split(train=True))
        _score(model, test)

    def train_accuracy_only() -> None:  # the very data set it trained on: training accuracy, named so
        model = mlp()
        _fit(model, train)
        _score(model, train)

    for body in (held_out, train_accuracy_too, train_accuracy_only):
        assert _run(body) == [], body.__name__


def test_k_fold_and_a_distillation_pass_over_the_training_inputs_are_quiet():
    x, y = digits()
    base = TensorDataset(x[:900], y[:900])

    def k_fold() -> None:  # fold 2's validation rows were fold 1's training rows
        for k in range(3):
            val_idx = list(range(k * 300, (k + 1) * 300))
            train_idx = [i for i in range(900) if i < k * 300 or i >= (k + 1) * 300]
            model = mlp()
            _fit(model, Subset(base, train_idx), epochs=1)
            _score(model, Subset(base, val_idx))

    def distillation() -> None:  # the student's pass starts with only the eval-mode teacher known
        teacher = mlp()
        _fit(teacher, base)
        teacher.eval()
        student = nn.Sequential(nn.Linear(64, 16), nn.ReLU(), nn.Linear(16, 10))
        opt = torch.optim.Adam(student.parameters(), lr=1e-2)
        for (xb,) in DataLoader(TensorDataset(x[:900].clone()), batch_size=64, shuffle=True):
            with torch.no_grad():
                soft = F.softmax(teacher(xb), dim=1)
            loss = F.kl_div(F.log_softmax(student(xb), dim=1), soft, reduction="batchmean")
            opt.zero_grad()
            loss.backward()
            opt.step()

    for body in (k_fold, distillation):
        assert _run(body) == [], body.__name__


def test_lightning_validation_over_training_rows_is_named_and_a_held_out_set_is_quiet():
    """Lightning stops each validation pass at its length (no StopIteration): the pass is resolved at the
    next pass's first batch.  The planted data module validates on a copy of the training rows."""
    pytest.importorskip("lightning")
    import tempfile

    from overt.integrations.lightning import OvertCallback
    from tests.integrations.projects import lightning_digits

    class Leaky(lightning_digits.DigitsData):
        def val_dataloader(self):
            x, y = self.train_set.tensors
            return DataLoader(TensorDataset(x[:300].clone(), y[:300].clone()), batch_size=128)

    found = {}
    for name, data in (("leaky", Leaky()), ("held-out", lightning_digits.DigitsData())):
        cb = OvertCallback(ignore=sorted(TIMING))
        with tempfile.TemporaryDirectory() as root:
            lightning_digits.fit(None, callbacks=[cb], root=root, logger=False, datamodule=data)
        found[name] = [f.slug for f in cb.findings if f.slug == SLUG]
    assert found == {"leaky": [SLUG], "held-out": []}, found


def _digit_graph() -> torch.Tensor:
    """The undirected 5-nearest-neighbour graph of 300 digits, each edge once (u < v)."""
    x, _ = digits()
    x = x[:300]
    near = torch.cdist(x, x).topk(6, largest=False).indices[:, 1:]
    pairs = torch.stack([torch.arange(300).repeat_interleave(5), near.reshape(-1)], 1)
    pairs = torch.stack([pairs.min(1).values, pairs.max(1).values], 1)
    return torch.unique(pairs, dim=0)


class _Link(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.emb = nn.Embedding(300, 16)

    def forward(self, pairs: torch.Tensor) -> torch.Tensor:
        return (self.emb(pairs[:, 0]) * self.emb(pairs[:, 1])).sum(1)


def _link_run(train_pairs: torch.Tensor, test_pairs: torch.Tensor) -> list:
    def body() -> None:
        model = _Link()
        opt = torch.optim.Adam(model.parameters(), lr=1e-2)
        for _ in range(2):
            for (pos,) in DataLoader(TensorDataset(train_pairs), batch_size=128, shuffle=True):
                neg = torch.randint(0, 300, pos.shape)
                loss = F.binary_cross_entropy_with_logits(torch.cat([model(pos), model(neg)]),
                                                          torch.cat([torch.ones(len(pos)), torch.zeros(len(neg))]))
                opt.zero_grad()
                loss.backward()
                opt.step()
        model.eval()
        with torch.no_grad():
            for (pos,) in DataLoader(TensorDataset(test_pairs), batch_size=256):
                model(pos).sigmoid().mean()

    return _run(body)


def test_test_edges_whose_reverse_trains_are_named_and_a_split_of_the_undirected_edges_is_quiet():
    """An edge list holding each undirected edge both ways, split at random as directed pairs (THUDM/CogDL#18):
    most test edges' reverses train.  The twin splits the undirected edges and doubles the training ones; a
    directed list split at random (each pair one way only) is another graph and stays quiet."""
    und = _digit_graph()
    g = torch.Generator().manual_seed(1)
    both = torch.cat([und, und.flip(1)])
    order = torch.randperm(len(both), generator=g)  # noqa: OVT541 (planted)
    cut = int(0.8 * len(both))
    findings = _link_run(both[order[:cut]], both[order[cut:]])
    assert slugs(findings) == [SLUG]
    assert "reverse (v, u) is a training edge" in findings[0].message and "undirected edges" in findings[0].fix

    order = torch.randperm(len(und), generator=g)
    cut = int(0.8 * len(und))
    train_und = und[order[:cut]]
    assert _link_run(torch.cat([train_und, train_und.flip(1)]), und[order[cut:]]) == []
    assert _link_run(und[order[:cut]], und[order[cut:]]) == []  # directed: no pair listed both ways


def test_edges_split_as_subsets_of_one_doubled_list_are_named():
    und = _digit_graph()
    both = TensorDataset(torch.cat([und, und.flip(1)]))
    train, test = torch.utils.data.random_split(both, [0.8, 0.2], generator=torch.Generator().manual_seed(2))
    from overt.guards.overlap import shared_samples

    shared, n, how = shared_samples(train, test)
    assert n == len(test) and shared > 0.6 * n and "reverse" in how


def test_test_images_whose_mirror_trains_are_named_and_augmenting_after_the_split_is_quiet():
    """Flipped copies added before a random split: most test images are a training image flipped left to right.
    The twin splits the originals and mirrors the training part only."""
    x, y = digits()
    images, labels = x[:600].reshape(-1, 1, 8, 8), y[:600]
    both = TensorDataset(torch.cat([images, images.flip(-1)]), torch.cat([labels, labels]))
    train, test = torch.utils.data.random_split(both, [0.8, 0.2], generator=torch.Generator().manual_seed(3))

    def conv() -> nn.Module:
        torch.manual_seed(0)
        return nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.Flatten(), nn.Linear(512, 10))

    def body(train_set, test_set) -> None:
        model = conv()
        _fit(model, train_set)
        _score(model, test_set)

    # another copy of the rows, as a data set of its own: the indices do not tell
    flat_train = TensorDataset(*both[train.indices])
    flat_test = TensorDataset(*both[test.indices])
    findings = _run(lambda: body(flat_train, flat_test))
    assert slugs(findings) == [SLUG]
    assert "mirror image" in findings[0].message and "flipped copies" in findings[0].fix

    assert slugs(_run(lambda: body(train, test))) == [SLUG]  # Subsets of the doubled set: indices apart, rows not

    order = torch.randperm(600, generator=torch.Generator().manual_seed(3))
    tr, te = order[:480], order[480:]
    twin_train = TensorDataset(torch.cat([images[tr], images[tr].flip(-1)]), torch.cat([labels[tr], labels[tr]]))
    assert _run(lambda: body(twin_train, TensorDataset(images[te], labels[te]))) == []


def test_dense_user_item_pairs_are_not_read_as_an_undirected_graph():
    """(user, item) pairs of a dense interaction matrix (two id spaces that share numbers): half of the pairs
    have their 'reverse' by chance, which is no edge listed twice."""
    from overt.guards.overlap import reversed_pairs

    g = torch.Generator().manual_seed(0)
    pairs = (torch.rand(60, 60, generator=g) < 0.7).nonzero()
    order = torch.randperm(len(pairs), generator=g)
    cut = int(0.8 * len(pairs))
    assert reversed_pairs(TensorDataset(pairs[order[:cut]]), TensorDataset(pairs[order[cut:]])) is None
