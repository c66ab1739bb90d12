"""recurrent-state-not-carried (issue 33; tests/wild w318): a recurrent module stepped through a sequence, one time
step per call, that is given the same state at every step while the state it returns is dropped -- a GRUCell, an
LSTMCell (its (h, c) pair) and an nn.GRU fed one step per call -- each beside its twin that carries the state (also
through a function of it: detached, dropped out); silent on one encoder run over several whole sequences, on
branches expanded from one state and then carried, and on a bidirectional module.  Real small runs: the digits
read as 8 rows of 8 pixels, one row per step, classified from the steps' outputs."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from tests.guards.helpers import batches, guarded_run, slugs

SLUG = "recurrent-state-not-carried"


class RowReader(nn.Module):
    """Reads an image row by row with a recurrent module, one row per call; ``carry``: how the state moves on."""

    def __init__(self, kind: str, carry: str):
        super().__init__()
        self.kind, self.carry = kind, carry
        self.start = nn.Linear(64, 32)
        if kind == "gru-cell":
            self.rnn = nn.GRUCell(8, 32)
        elif kind == "lstm-cell":
            self.rnn = nn.LSTMCell(8, 32)
        else:
            self.rnn = nn.GRU(8, 32, batch_first=True)
        self.drop = nn.Dropout(0.1)
        self.head = nn.Linear(32 * 8, 10)

    def forward(self, x):
        rows = x.view(-1, 8, 8)
        h0 = torch.tanh(self.start(x))
        state = (h0, torch.zeros_like(h0)) if self.kind == "lstm-cell" else h0
        if self.kind == "gru" and self.carry != "none":
            state = state[None]
        fixed = state[None] if self.kind == "gru" and self.carry == "none" else state
        outs = []
        for t in range(8):
            if self.carry in ("no-state", "no-state-copies", "zero-then-carried"):
                given = state if self.carry == "zero-then-carried" and t > 0 else None
                step = rows[:, t:t + 1] if self.kind == "gru" else rows[:, t]
                if self.carry == "no-state-copies":
                    step = step.clone()  # made afresh per call: nothing says these are one sequence's steps
                new = self.rnn(step) if given is None else self.rnn(step, given)
                out = new[0][:, 0] if self.kind == "gru" else (new[0] if self.kind == "lstm-cell" else new)
                if self.kind == "gru":
                    new = new[1]
                state = new
                outs.append(out)
                continue
            if self.kind == "gru":
                out, new = self.rnn(rows[:, t:t + 1], fixed if self.carry == "none" else state)
                out = out[:, 0]
            elif self.kind == "lstm-cell":
                new = self.rnn(rows[:, t], fixed if self.carry == "none" else state)
                out = new[0]
            else:
                new = out = self.rnn(rows[:, t], fixed if self.carry == "none" else state)
            if self.carry == "state":
                state = new
            elif self.carry == "dropped-out":
                state = self.drop(new) if not isinstance(new, tuple) else (self.drop(new[0]), new[1])
            elif self.carry == "h-only":  # the cell state c given afresh at every step
                state = (new[0], state[1])
            elif self.carry == "detached":
                state = new.detach() if not isinstance(new, tuple) else tuple(s.detach() for s in new)
            outs.append(out)
        return self.head(torch.cat(outs, 1))


def _train(model: nn.Module, steps: int = 8) -> tuple[list, str]:
    def run():
        opt = torch.optim.Adam(model.parameters(), lr=1e-2)
        for xb, yb in batches(32, steps):
            loss = F.cross_entropy(model(xb), yb)
            opt.zero_grad()
            loss.backward()
            opt.step()

    return guarded_run(run, check_every=2)


@pytest.mark.parametrize("kind", ["gru-cell", "lstm-cell", "gru"])
def test_a_loop_given_the_same_state_at_every_step_is_named(kind):
    torch.manual_seed(0)
    findings, text = _train(RowReader(kind, "none"))
    assert slugs(findings) == [SLUG], text
    assert "called 8 times" in text and "test_state_carry.py:" in text, text


def test_an_lstm_cell_state_given_afresh_at_every_step_is_named():
    torch.manual_seed(0)
    findings, text = _train(RowReader("lstm-cell", "h-only"))
    assert slugs(findings) == [SLUG], text
    assert "the very same c [32, 32]" in text and "the other part is carried" in text, text


@pytest.mark.parametrize("kind,carry", [("gru-cell", "state"), ("lstm-cell", "state"), ("gru", "state"),
                                        ("gru-cell", "dropped-out"), ("lstm-cell", "detached")])
def test_a_carried_state_is_silent(kind, carry):
    torch.manual_seed(0)
    findings, text = _train(RowReader(kind, carry))
    assert SLUG not in slugs(findings), text


class SentenceEncoder(nn.Module):
    """One LSTM over each of four quarters of the image (whole sequences), all from one learned initial state."""

    def __init__(self):
        super().__init__()
        self.rnn = nn.LSTM(8, 16, batch_first=True)
        self.h0 = nn.Parameter(torch.zeros(1, 1, 16))
        self.head = nn.Linear(64, 10)

    def forward(self, x):
        rows = x.view(-1, 8, 8)
        h0 = self.h0.expand(1, x.shape[0], 16).contiguous()
        state = (h0, torch.zeros_like(h0))
        feats = [self.rnn(rows[:, 2 * i:2 * i + 2], state)[1][0][0] for i in range(4)]
        return self.head(torch.cat(feats, 1))


def test_whole_sequences_from_one_state_are_silent():
    torch.manual_seed(0)
    findings, text = _train(SentenceEncoder())
    assert SLUG not in slugs(findings), text


class Branches(nn.Module):
    """Three branches expanded from one state (one step each), each then carried through the remaining rows."""

    def __init__(self):
        super().__init__()
        self.cell = nn.GRUCell(8, 16)
        self.start = nn.Linear(64, 16)
        self.head = nn.Linear(48, 10)

    def forward(self, x):
        rows = x.view(-1, 8, 8)
        h0 = torch.tanh(self.start(x))
        ends = []
        for b in range(3):
            h = self.cell(rows[:, b], h0)
            for t in range(3, 8):
                h = self.cell(rows[:, t], h)
            ends.append(h)
        return self.head(torch.cat(ends, 1))


def test_branches_from_one_state_that_go_on_are_silent():
    torch.manual_seed(0)
    findings, text = _train(Branches())
    assert SLUG not in slugs(findings), text


class Bidirectional(nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = nn.GRU(8, 16, batch_first=True, bidirectional=True)
        self.head = nn.Linear(32 * 8, 10)

    def forward(self, x):
        rows = x.view(-1, 8, 8)
        h0 = torch.zeros(2, x.shape[0], 16)
        return self.head(torch.cat([self.rnn(rows[:, t:t + 1], h0)[0][:, 0] for t in range(8)], 1))


def test_a_bidirectional_module_is_silent():
    torch.manual_seed(0)
    findings, text = _train(Bidirectional())
    assert SLUG not in slugs(findings), text


@pytest.mark.parametrize("kind", ["gru-cell", "lstm-cell", "gru"])
def test_a_loop_given_no_state_over_the_slices_of_one_sequence_is_named(kind):
    """``rnn(rows[:, t])`` over ``t`` with no state at all: every step starts from the zero state (session 51)."""
    torch.manual_seed(0)
    findings, _ = _train(RowReader(kind, "no-state"))
    named = [f for f in findings if f.slug == SLUG]  # (and no-gradient: the unused start layer, true here)
    assert len(named) == 1, findings
    assert "none given a state" in named[0].message and "test_state_carry.py" in named[0].where


@pytest.mark.parametrize("carry", ["no-state-copies", "zero-then-carried"])
def test_no_state_on_inputs_made_afresh_or_a_state_carried_after_the_first_step_is_silent(carry):
    torch.manual_seed(0)
    findings, _ = _train(RowReader("gru-cell", carry))
    assert SLUG not in slugs(findings), findings
