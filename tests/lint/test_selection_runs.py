"""Model selection on real small runs (OVT708-OVT710, OVT815, OVT816): each planted script trains an MLP on digits and
shows what its bug does (the model kept, the epoch chosen), lint names the cause on it and stays silent
on its correct twin, which differs only in the bug."""

from __future__ import annotations

import runpy
from pathlib import Path

import pytest

from overt.lint.engine import lint_file

pytest.importorskip("sklearn")

_HEAD = '''
import copy
import torch
import torch.nn.functional as F
from sklearn.datasets import load_digits
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
_d = load_digits()
X = torch.tensor(_d.data, dtype=torch.float32) / 16.0
Y = torch.tensor(_d.target)
g = torch.Generator().manual_seed(1)
noisy = torch.where(torch.rand(len(Y), generator=g) < 0.4, torch.randint(10, (len(Y),), generator=g), Y)
train_ds = TensorDataset(X[:600], noisy[:600])
val_ds = TensorDataset(X[600:1000], noisy[600:1000])
test_ds = TensorDataset(X[1000:], Y[1000:])
train_loader = DataLoader(train_ds, batch_size=600, shuffle=True)
val_loader = DataLoader(val_ds, batch_size=400)
test_loader = DataLoader(test_ds, batch_size=800)
model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 10))
opt = torch.optim.Adam(model.parameters(), lr=3e-3)


def run_epoch(model, loader, opt):
    model.train()
    total = 0.0
    for x, y in loader:
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        total += loss.item()
    return total / len(loader)


@torch.no_grad()
def evaluate(model, loader):
    model.eval()
    losses, correct, n = 0.0, 0, 0
    for x, y in loader:
        out = model(x)
        losses += F.cross_entropy(out, y, reduction="sum").item()
        correct += (out.argmax(1) == y).sum().item()
        n += len(y)
    return losses / n, correct / n
'''

#: slug -> (script with __X__ for the bug/twin difference, bug text, twin text)
_CASES = {
    "selection-on-train-data": ('''
best, best_epoch, best_state = float("inf"), -1, None
for epoch in range(60):
    train_loss = run_epoch(model, train_loader, opt)
    val_loss, _ = evaluate(model, val_loader)
    if __X__ < best:
        best, best_epoch, best_state = __X__, epoch, copy.deepcopy(model.state_dict())
model.load_state_dict(best_state)
''', "train_loss", "val_loss"),
    "selection-on-test-data": ('''
best, best_epoch, reported = 0.0, -1, None
for epoch in range(60):
    run_epoch(model, train_loader, opt)
    _, val_acc = evaluate(model, val_loader)
    _, test_acc = evaluate(model, test_loader)
    if __X__ > best:
        best, best_epoch, reported = __X__, epoch, test_acc
        torch.save(model.state_dict(), "best.pt")
''', "test_acc", "val_acc"),
    "best-value-not-tracked": ('''
best, best_epoch, best_state = __X__, -1, None
for epoch in range(60):
    run_epoch(model, train_loader, opt)
    val_loss, _ = evaluate(model, val_loader)
    if val_loss < best:
        best, best_epoch, best_state = val_loss, epoch, copy.deepcopy(model.state_dict())
if best_state is not None:
    model.load_state_dict(best_state)
''', "0.0", "float('inf')"),
    "best-model-not-restored": ('''
best, best_state = float("inf"), None
for epoch in range(60):
    run_epoch(model, train_loader, opt)
    val_loss, _ = evaluate(model, val_loader)
    if val_loss < best:
        best, best_state = val_loss, copy.deepcopy(model.state_dict())
__X__
_, final_acc = evaluate(model, test_loader)
''', "", "model.load_state_dict(best_state)"),
    "best-kept-in-wrong-direction": ('''
best, best_epoch, best_state = float("__X__inf"), -1, None
for epoch in range(60):
    run_epoch(model, train_loader, opt)
    val_loss, _ = evaluate(model, val_loader)
    if val_loss __Y__ best:
        best, best_epoch, best_state = val_loss, epoch, copy.deepcopy(model.state_dict())
model.load_state_dict(best_state)
_, final_acc = evaluate(model, test_loader)
''', ("-", ">"), ("", "<")),
}


def _write(tmp_path: Path, slug: str, bug: bool) -> Path:
    body, bug_text, twin_text = _CASES[slug]
    path = tmp_path / f"{slug}-{'bug' if bug else 'twin'}.py"
    text = bug_text if bug else twin_text
    for mark, value in zip(("__X__", "__Y__"), text if isinstance(text, tuple) else (text,)):
        body = body.replace(mark, value)
    path.write_text(_HEAD + body)
    return path


def _run(path: Path, tmp_path: Path, monkeypatch) -> dict:
    monkeypatch.chdir(tmp_path)
    return runpy.run_path(str(path))


@pytest.mark.parametrize("slug", sorted(_CASES))
def test_lint_names_the_planted_selection_bug_and_not_its_twin(slug, tmp_path):
    bug = [f.slug for f in lint_file(_write(tmp_path, slug, True)).findings]
    twin = [f.slug for f in lint_file(_write(tmp_path, slug, False)).findings]
    assert bug == [slug]
    assert twin == []


@pytest.mark.slow
def test_the_planted_bugs_change_what_is_kept(tmp_path, monkeypatch, one_thread):
    """The behaviour each bug causes, on the real run: the training loss picks the last epoch while the
    validation loss (40% noisy labels) picks an earlier one; a loss's best started at 0 keeps nothing; the
    test score reported for a model chosen on the test set is higher than the honest one; the best copy
    never restored leaves the over-fitted last model to be tested; a loss kept when it rises keeps the
    worst epoch."""
    bug = _run(_write(tmp_path, "selection-on-train-data", True), tmp_path, monkeypatch)
    twin = _run(_write(tmp_path, "selection-on-train-data", False), tmp_path, monkeypatch)
    print(bug["best_epoch"], twin["best_epoch"])
    assert bug["best_epoch"] >= 55 and twin["best_epoch"] < bug["best_epoch"]
    stuck = _run(_write(tmp_path, "best-value-not-tracked", True), tmp_path, monkeypatch)
    tracked = _run(_write(tmp_path, "best-value-not-tracked", False), tmp_path, monkeypatch)
    assert stuck["best_state"] is None and tracked["best_state"] is not None
    leak = _run(_write(tmp_path, "selection-on-test-data", True), tmp_path, monkeypatch)
    clean = _run(_write(tmp_path, "selection-on-test-data", False), tmp_path, monkeypatch)
    print(leak["reported"], leak["best_epoch"], clean["reported"], clean["best_epoch"])
    last = _run(_write(tmp_path, "best-model-not-restored", True), tmp_path, monkeypatch)
    restored = _run(_write(tmp_path, "best-model-not-restored", False), tmp_path, monkeypatch)
    print(last["final_acc"], restored["final_acc"])
    assert last["final_acc"] < restored["final_acc"]
    worst = _run(_write(tmp_path, "best-kept-in-wrong-direction", True), tmp_path, monkeypatch)
    lowest = _run(_write(tmp_path, "best-kept-in-wrong-direction", False), tmp_path, monkeypatch)
    print(worst["best_epoch"], worst["final_acc"], lowest["best_epoch"], lowest["final_acc"])
    assert worst["best"] > lowest["best"] and worst["final_acc"] < lowest["final_acc"]
    # the same training run either way: chosen on the test set, the test score reported is its maximum
    assert leak["best_epoch"] != clean["best_epoch"] and leak["reported"] > clean["reported"]
