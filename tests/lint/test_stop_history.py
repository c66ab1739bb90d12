"""Early stops that act on the history they were given (session 55, ``stop20``): a best already updated from the
metric the patience check then compares with it (OVT710 ``best-value-not-tracked`` through one call), and a stop
that compares the latest loss with the worst of the window before it (OVT828 ``stop-on-window-worst``).  Each
planted script trains an MLP on the digits with plain SGD (a slow, steady run); the test shows what the bug does
to the run (when it stops), that lint names the cause on it, and that it stays silent on the twin, which differs
only in the bug."""

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

torch.manual_seed(0)
_d = load_digits()
X = torch.tensor(_d.data, dtype=torch.float32) / 16.0
Y = torch.tensor(_d.target)
model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 10))
opt = torch.optim.SGD(model.parameters(), lr=0.02)
PATIENCE = 3
EPOCHS = 40


def train_epoch():
    model.train()
    for i in range(0, 1000, 100):
        opt.zero_grad()
        F.cross_entropy(model(X[i:i + 100]), Y[i:i + 100]).backward()
        opt.step()


def val_loss(rows):
    model.eval()
    with torch.no_grad():
        return F.cross_entropy(model(X[rows]), Y[rows]).item()
'''

_TRAINER = _HEAD + '''

class Trainer:
    def __init__(self):
        self.best_loss, self.best_state, self.wait = float("inf"), None, 0

    def evaluate(self):
        loss = val_loss(slice(1000, 1400))
        if loss < self.best_loss:
            self.best_loss = loss
            self.best_state = copy.deepcopy(model.state_dict())
        return loss

    def should_stop(self, loss, best):
        if loss < best:
            self.wait = 0
        else:
            self.wait += 1
        return self.wait >= PATIENCE


trainer = Trainer()
epochs_run = 0
for epoch in range(EPOCHS):
    train_epoch()
    epochs_run += 1
    previous = trainer.best_loss
    loss = trainer.evaluate()
    if trainer.should_stop(loss, __BEST__):
        break
'''

_WINDOW = _HEAD + '''

def should_stop_early(history):
    if len(history) > PATIENCE:
__STOP__
    return False


history, epochs_run = [], 0
g = torch.Generator().manual_seed(1)
for epoch in range(EPOCHS):
    train_epoch()
    epochs_run += 1
    history.append(val_loss(1000 + torch.randperm(400, generator=g)[:16]))   # a small, noisy validation batch
    if should_stop_early(history):
        break
'''

_PAIRS = {
    "best-value-not-tracked": (_TRAINER, ("__BEST__", "trainer.best_loss", "previous")),
    "stop-on-window-worst": (_WINDOW, ("__STOP__", "        return history[-1] > max(history[-PATIENCE - 1:-1])",
                                       "        return min(history[-PATIENCE:]) >= min(history[:-PATIENCE])")),
}


def _write(tmp_path: Path, slug: str, bug: bool) -> Path:
    body, (mark, bad, good) = _PAIRS[slug]
    path = tmp_path / f"{slug}-{'bug' if bug else 'twin'}.py"
    path.write_text(body.replace(mark, bad if bug else good))
    return path


@pytest.mark.parametrize("slug", sorted(_PAIRS))
def test_lint_names_the_stop_bug_and_not_its_twin(slug, tmp_path):
    bug = [f.slug for f in lint_file(_write(tmp_path, slug, True)).findings]
    twin = [f.slug for f in lint_file(_write(tmp_path, slug, False)).findings]
    assert bug == [slug]
    assert twin == []


def test_the_planted_stops_end_runs_that_still_improve(tmp_path, monkeypatch, one_thread):
    """The trainer whose best is updated first stops after exactly PATIENCE evaluations although every one
    improved; the window rule stops a run whose best is recent; both twins train longer."""
    monkeypatch.chdir(tmp_path)
    stuck = runpy.run_path(str(_write(tmp_path, "best-value-not-tracked", True)))
    fixed = runpy.run_path(str(_write(tmp_path, "best-value-not-tracked", False)))
    assert stuck["epochs_run"] == 3 and fixed["epochs_run"] > 3
    early = runpy.run_path(str(_write(tmp_path, "stop-on-window-worst", True)))
    patient = runpy.run_path(str(_write(tmp_path, "stop-on-window-worst", False)))
    h = early["history"]
    assert early["epochs_run"] < patient["epochs_run"]
    assert min(h[-4:-1]) < min(h[:-4])  # the window the bug stopped on held a new best
