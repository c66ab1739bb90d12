"""padding-idx-real-index at run time (issue 33, round four's w117): an embedding whose padding_idx is
a real index that the loss depends on.  Planted on digits with a categorical feature looked up one
index per example (shape ``(batch, 1)``, a form other than w117's 1-D relation ids); the twins: the
same table without padding_idx, a per-step decoder input whose padded examples the loss ignores,
and token sequences padded at their ends."""

from __future__ import annotations

import io

import torch
import torch.nn.functional as F
from torch import nn

from overt.guards.options import GuardOptions
from overt.guards.session import GuardSession
from tests.conftest import TIMING
from tests.guards.helpers import batches, slugs


class WithGroup(nn.Module):
    """Digits plus a group id (sample position mod 4) embedded and added to the hidden layer."""

    def __init__(self, padding_idx: int | None):
        super().__init__()
        self.body = nn.Linear(64, 32)
        self.group = nn.Embedding(4, 32, padding_idx=padding_idx)
        self.head = nn.Linear(32, 10)

    def forward(self, x, ids):
        return self.head(torch.relu(self.body(x) + self.group(ids).reshape(len(x), -1)))


def _run(padding_idx, make_ids, ignore_pad=False, steps=12):
    torch.manual_seed(0)
    session = GuardSession(GuardOptions(stream=io.StringIO(), ignore=TIMING), auto=True)
    try:
        model = WithGroup(padding_idx)
        opt = torch.optim.Adam(model.parameters(), lr=1e-2)
        for k, (xb, yb) in enumerate(batches(32, steps)):
            ids = make_ids(k, len(xb))
            if ignore_pad:  # the padded examples carry no target
                yb = torch.where(ids.reshape(len(xb), -1)[:, 0] == 0, torch.full_like(yb, -100), yb)
            opt.zero_grad()
            F.cross_entropy(model(xb, ids), yb, ignore_index=-100).backward()
            opt.step()
    finally:
        findings = session.close()
    return findings, session.options.stream.getvalue()


def groups(k, n):
    return (torch.arange(n) % 4)[:, None]  # (batch, 1): group 0 is a real group


def decoder_step(k, n):
    ids = 1 + torch.arange(n) % 3
    ids[: n // 4] = 0  # finished sequences: padded
    return ids


def test_a_real_index_as_padding_idx_is_named_and_its_twin_is_silent():
    findings, text = _run(0, groups)
    assert slugs(findings) == ["padding-idx-real-index"], text
    assert "WithGroup.group (Embedding(4, 32, padding_idx=0))" in text and "test_padding_row.py:27" in text
    findings, text = _run(None, groups)
    assert findings == [], text


def test_padding_the_loss_ignores_is_silent():
    findings, text = _run(0, decoder_step, ignore_pad=True)
    assert findings == [], text


def test_padded_token_sequences_are_silent():
    torch.manual_seed(0)
    session = GuardSession(GuardOptions(stream=io.StringIO(), ignore=TIMING), auto=True)
    try:
        emb = nn.Embedding(12, 16, padding_idx=0)
        model = nn.Sequential(emb, nn.Flatten(), nn.Linear(16 * 6, 2))
        opt = torch.optim.Adam(model.parameters(), lr=1e-2)
        g = torch.Generator().manual_seed(0)
        for _ in range(12):
            ids = torch.randint(1, 12, (32, 6), generator=g)
            ids[:, 4:] = 0  # padded at the end, and the flattened head reads the padding too
            y = (ids[:, 0] > 6).long()
            opt.zero_grad()
            F.cross_entropy(model(ids), y).backward()
            opt.step()
    finally:
        findings = session.close()
    assert findings == [], session.options.stream.getvalue()
