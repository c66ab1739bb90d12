"""Small real training loops on sklearn's digits for the guard tests."""

from __future__ import annotations

import io
import json
import sys
import textwrap
from functools import lru_cache
from pathlib import Path

import torch
from torch import nn

import overt
from overt.guards import run_cli
from overt.guards.patches import ACTIVE


@lru_cache(maxsize=1)
def _digits() -> tuple[torch.Tensor, torch.Tensor]:
    from sklearn.datasets import load_digits

    d = load_digits()
    x = torch.tensor(d.data, dtype=torch.float32) / 16.0
    y = torch.tensor(d.target, dtype=torch.long)
    return x, y


def markov_tokens(n: int, seed: int, vocab: int = 8, length: int = 24) -> torch.Tensor:
    """``(n, length)`` token sequences of a Markov chain (next = 3 * token + 1 mod vocab, 10% noise):
    next-token prediction is learnable in a few steps."""
    g = torch.Generator().manual_seed(seed)
    seq = torch.zeros(n, length, dtype=torch.long)
    seq[:, 0] = torch.randint(vocab, (n,), generator=g)
    for t in range(1, length):
        noise = torch.rand(n, generator=g) < 0.1
        seq[:, t] = torch.where(noise, torch.randint(vocab, (n,), generator=g), (seq[:, t - 1] * 3 + 1) % vocab)
    return seq


def digits() -> tuple[torch.Tensor, torch.Tensor]:
    """(inputs (1797, 64) float32 in [0, 1], labels (1797,) long)."""
    x, y = _digits()
    return x.clone(), y.clone()


def batches(batch_size: int = 32, n: int | None = None, start: int = 0):
    """Yield ``n`` consecutive (x, y) training batches (cycling over the first 1500 samples)."""
    x, y = _digits()
    i = start
    count = 0
    while n is None or count < n:
        j = (i * batch_size) % (1500 - batch_size)
        yield x[j:j + batch_size], y[j:j + batch_size]
        i += 1
        count += 1


def val_batches(batch_size: int = 64):
    x, y = _digits()
    for j in range(1500, 1797, batch_size):
        yield x[j:j + batch_size], y[j:j + batch_size]


def mlp(hidden: int = 32, dropout: float = 0.0, bn: bool = False, out: int = 10) -> nn.Sequential:
    torch.manual_seed(0)
    layers: list[nn.Module] = [nn.Linear(64, hidden)]
    if bn:
        layers.append(nn.BatchNorm1d(hidden))
    layers.append(nn.ReLU())
    if dropout:
        layers.append(nn.Dropout(dropout))
    layers.append(nn.Linear(hidden, out))
    return nn.Sequential(*layers)


def guarded(model, opt, **kw):
    """``overt.guard`` with output captured (``g.session.options.stream.getvalue()``)."""
    kw.setdefault("stream", io.StringIO())
    return overt.guard(model, opt, **kw)


def slugs(findings) -> list[str]:
    return sorted({f.slug for f in findings})


def train(model, opt, steps: int = 10, batch_size: int = 32, loss_fn=None):
    """The canonical loop: zero_grad, forward, loss, backward, step."""
    if loss_fn is None:
        loss_fn = nn.CrossEntropyLoss()
    model.train()
    for xb, yb in batches(batch_size, steps):
        opt.zero_grad()
        loss = loss_fn(model(xb), yb)
        loss.backward()
        opt.step()
    return loss


def evaluate(model):
    model.eval()
    correct = 0
    with torch.no_grad():
        for xb, yb in val_batches():
            correct += int((model(xb).argmax(1) == yb).sum())
    model.train()
    return correct


class Digits(torch.utils.data.Dataset):
    """Digits as a map-style data set with an optional per-sample transform."""

    def __init__(self, transform=None):
        self.x, self.y = digits()
        self.transform = transform

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        x = self.x[i]
        return (self.transform(x) if self.transform else x), self.y[i]


def noise(x):
    """A random augmentation: Gaussian noise, a fresh draw per call."""
    return x + 0.3 * torch.randn_like(x)


def guarded_run(train, check_every: int = 10) -> tuple[list, str]:
    """Run ``train()`` under a guard session that finds models and optimizers itself (``overt run``'s
    way), checking every ``check_every``-th step after the warm-up: (findings, printed text)."""
    from overt.guards.options import GuardOptions
    from overt.guards.session import GuardSession
    from tests.conftest import TIMING

    session = GuardSession(GuardOptions(stream=io.StringIO(), ignore=TIMING, check_every=check_every), auto=True)
    try:
        train()
    finally:
        findings = session.close()
    return findings, session.options.stream.getvalue()


def guarded_fit(params, losses, lr: float = 1e-3, check_every: int = 10) -> list:
    """Train ``params`` with Adam on each loss the generator ``losses`` yields (it runs the forwards, lazily),
    under a guard session that finds models itself (``overt run``'s way): the findings."""
    from overt.guards.options import GuardOptions
    from overt.guards.session import GuardSession
    from tests.conftest import TIMING

    session = GuardSession(GuardOptions(stream=io.StringIO(), ignore=TIMING, check_every=check_every), auto=True)
    try:
        opt = torch.optim.Adam(list(params), lr=lr)
        for loss in losses:
            opt.zero_grad()
            loss.backward()
            opt.step()
    finally:
        findings = session.close()
    return findings


#: a digits MLP trained for 60 steps: the head of the metric-probe tests' scripts (run under overt run)
METRIC_HEAD = '''
import numpy as np
import torch
from sklearn.datasets import load_digits
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)
d = load_digits()
x = torch.tensor(d.data, dtype=torch.float32) / 16
y = torch.tensor(d.target)
model = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10))
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
for step in range(60):
    i = (step * 32) % 1400
    opt.zero_grad()
    F.cross_entropy(model(x[i:i + 32]), y[i:i + 32]).backward()
    opt.step()
'''


def run_script_probe(tmp_path: Path, body: str, head: str = METRIC_HEAD) -> list[dict]:
    """``head`` then ``body`` (dedented) run as a script under ``overt run``; its findings.  A script that
    crashes fails the test (a clean twin that never reached its code would otherwise pass as silent): exit
    status 1 with no error-level finding to account for it."""
    path = tmp_path / "train.py"
    path.write_text(head + textwrap.dedent(body))
    report = tmp_path / "report.json"
    saved = sys.argv[:], sys.path[0], sys.modules["__main__"]
    try:
        code = run_cli.main(["--report", str(report), str(path)])
    finally:
        sys.argv, sys.path[0], sys.modules["__main__"] = saved
    assert not ACTIVE
    findings = json.loads(report.read_text())["findings"]
    assert code == 0 or any(f["severity"] == "error" for f in findings), \
        f"the script exited {code} under overt run with no error finding: it crashed (its traceback is above)"
    return findings


def slug_set(findings: list[dict]) -> list[str]:
    return sorted({f["slug"] for f in findings})
