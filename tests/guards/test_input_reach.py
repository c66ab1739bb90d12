"""input-columns-unread at run time (issue 33, branch embrows14): digits' 64 pixels cut into four groups of 16
columns, each encoded by its own linear layer, with a slice offset that is never advanced (the planted bug: every
encoder reads pixels 0-15, pixels 16-63 reach nothing), its twin that advances it, and correct programs near the
premise that must stay silent: an offset advanced by overlapping windows that cover every column, a model that
reads the whole input once more beside its slices, one that leaves a packed tail out but reads each column at most
once, and a plain MLP."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from tests.guards.helpers import batches, guarded_run, slugs


class Groups(nn.Module):
    def __init__(self, starts, width=16, whole=False):
        super().__init__()
        torch.manual_seed(0)
        self.starts, self.width, self.whole = starts, width, whole
        self.encoders = nn.ModuleList(nn.Linear(width, 8) for _ in starts)
        self.head = nn.Linear(8 * len(starts) + (64 if whole else 0), 10)

    def forward(self, x):
        parts = [enc(x[:, s:s + self.width]) for s, enc in zip(self.starts, self.encoders)]
        if self.whole:
            parts.append(x)
        return self.head(torch.relu(torch.cat(parts, 1)))


class Offset(nn.Module):
    """Four column groups encoded in a loop with a running offset (advanced or not)."""

    def __init__(self, advance: bool):
        super().__init__()
        torch.manual_seed(0)
        self.advance = advance
        self.encoders = nn.ModuleList(nn.Linear(16, 8) for _ in range(4))
        self.head = nn.Linear(32, 10)

    def forward(self, x):
        start = 0
        parts = []
        for enc in self.encoders:
            parts.append(enc(x[:, start:start + 16]))
            if self.advance:
                start += 16
        return self.head(torch.relu(torch.cat(parts, 1)))


def _run(model, steps: int = 12):
    def train():
        opt = torch.optim.Adam(model.parameters(), lr=3e-3)
        for xb, yb in batches(32, steps):
            loss = F.cross_entropy(model(xb), yb)
            opt.zero_grad()
            loss.backward()
            opt.step()
    return guarded_run(train)


def test_an_offset_never_advanced_is_named_with_its_line_and_its_twin_is_silent():
    findings, text = _run(Offset(advance=False))
    assert slugs(findings) == ["input-columns-unread"], text
    f = findings[0]
    assert "reads columns 0-15 4 times" in f.message and "x[:, start:start + 16]" in f.message, f.message
    assert "test_input_reach.py" in f.where
    assert slugs(_run(Offset(advance=True))[0]) == []


def test_correct_programs_near_the_premise_are_silent():
    # overlapping windows that cover every column (a stride smaller than the width)
    assert slugs(_run(Groups([0, 12, 24, 36, 48]))[0]) == []
    # the same group read twice, but the whole input read too: every column reaches the output
    assert slugs(_run(Groups([0, 0, 16, 32], whole=True))[0]) == []
    # a packed tail left out, each column read once (no part read twice)
    assert slugs(_run(Groups([0, 16]))[0]) == []
    # a plain MLP
    assert slugs(_run(nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10)))[0]) == []


def test_an_offset_advanced_by_one_is_named():
    findings, text = _run(Groups([0, 1, 2, 3]))
    assert slugs(findings) == ["input-columns-unread"], text


class Categorical(nn.Module):
    """Eight categorical columns (digits' pixels binned to 0..16) looked up in one shared table with a per-column
    offset; the planted bug reads column 0 for every column."""

    def __init__(self, bug: bool):
        super().__init__()
        torch.manual_seed(0)
        self.bug = bug
        self.table = nn.Embedding(17 * 8, 4)
        self.head = nn.Sequential(nn.Linear(32, 32), nn.ReLU(), nn.Dropout(0.1), nn.Linear(32, 10))

    def forward(self, ids):
        parts = []
        for k in range(8):
            col = 0 if self.bug else k
            parts.append(self.table(ids[:, col] + 17 * k))
        return self.head(torch.cat(parts, 1))


def test_categorical_columns_read_through_one_column_are_named_and_the_twin_is_silent():
    pixels = [19, 20, 27, 28, 35, 36, 43, 44]

    def run(bug: bool):
        model = Categorical(bug)

        def train():
            opt = torch.optim.Adam(model.parameters(), lr=3e-3)
            for xb, yb in batches(32, 12):
                ids = (xb[:, pixels] * 16).round().long()
                loss = F.cross_entropy(model(ids), yb)
                opt.zero_grad()
                loss.backward()
                opt.step()
        return guarded_run(train)

    findings, text = run(True)
    assert slugs(findings) == ["input-columns-unread"], text
    assert "columns 1-7" in findings[0].message and "reads columns 0 8 times" in findings[0].message, findings[0].message
    assert slugs(run(False)[0]) == []
