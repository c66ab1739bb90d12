"""eval-state-carried (overt/guards/carried.py): a recurrent state carried from one evaluation
batch into the next while training starts each batch fresh; stateful sequence training and
evaluation, and generation, stay quiet.  Small real runs on digits (each digit a sequence of its
8 pixel rows)."""

from __future__ import annotations

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from tests.conftest import TIMING
from tests.guards.helpers import digits, guarded, slugs


class Rows(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.gru = nn.GRU(8, 24, batch_first=True)
        self.head = nn.Linear(24, 10)

    def init_hidden(self, batch):
        return torch.zeros(1, batch, 24)

    def forward(self, x, hidden):
        out, hidden = self.gru(x.reshape(len(x), 8, 8), hidden)
        return self.head(out[:, -1]), hidden


def _run(reset_in_eval: bool) -> list:
    x, y = digits()
    model = Rows()
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    g = guarded(model, opt, ignore=TIMING)
    for xb, yb in DataLoader(TensorDataset(x[:640], y[:640]), batch_size=64, shuffle=True):
        opt.zero_grad()
        logits, _ = model(xb, model.init_hidden(len(xb)))
        nn.functional.cross_entropy(logits, yb).backward()
        opt.step()
    model.eval()
    with torch.no_grad():
        hidden = model.init_hidden(100)
        for xb, _ in DataLoader(TensorDataset(x[1397:1797], y[1397:1797]), batch_size=100):
            if reset_in_eval:
                hidden = model.init_hidden(len(xb))
            _, hidden = model(xb, hidden)
    return g.report()


def test_a_hidden_state_carried_across_evaluation_batches_is_named():
    findings = _run(reset_in_eval=False)
    assert slugs(findings) == ["eval-state-carried"]
    f = findings[0]
    assert "'hidden'" in f.message and "test_carried_state.py:" in f.where


def test_a_fresh_state_per_evaluation_batch_is_quiet():
    assert _run(reset_in_eval=True) == []


class CharLM(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.embed = nn.Embedding(17, 16)
        self.lstm = nn.LSTM(16, 32, batch_first=True)
        self.out = nn.Linear(32, 17)

    def forward(self, tokens, state):
        h, state = self.lstm(self.embed(tokens), state)
        return self.out(h), state


def _stream(n: int) -> torch.Tensor:
    x, _ = digits()
    return x.reshape(-1)[:n].mul(16).long()  # pixel values 0-16: one contiguous token stream


def _fresh(batch: int):
    return torch.zeros(1, batch, 32), torch.zeros(1, batch, 32)


def test_stateful_training_and_evaluation_over_one_stream_is_quiet():
    """pytorch/examples' word_language_model: the (detached) state is carried across contiguous
    batches in training and in evaluation alike."""
    model = CharLM()
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    g = guarded(model, opt, ignore=TIMING)
    chunks = _stream(4 * 40 * 17).reshape(40, 4, 17).permute(0, 1, 2)  # 40 consecutive windows of 4 streams
    loader = DataLoader(TensorDataset(chunks), batch_size=None, shuffle=False)  # overt: ignore[unshuffled-training]
    state = _fresh(4)
    for (window,) in loader:
        state = tuple(s.detach() for s in state)
        opt.zero_grad()
        logits, state = model(window[:, :-1], state)
        nn.functional.cross_entropy(logits.reshape(-1, 17), window[:, 1:].reshape(-1)).backward()
        opt.step()
    model.eval()
    with torch.no_grad():
        state = _fresh(4)
        for (window,) in loader:
            _, state = model(window[:, :-1], state)
    assert g.report() == []


def test_generation_from_a_model_trained_on_fresh_states_is_quiet():
    """Sampling feeds each step the previous step's state: the inputs come from the model, not
    from a DataLoader."""
    model = CharLM()
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    g = guarded(model, opt, ignore=TIMING)
    windows = _stream(160 * 17).reshape(160, 17)
    for (window,) in DataLoader(TensorDataset(windows), batch_size=16, shuffle=True):
        opt.zero_grad()
        logits, _ = model(window[:, :-1], _fresh(len(window)))
        nn.functional.cross_entropy(logits.reshape(-1, 17), window[:, 1:].reshape(-1)).backward()
        opt.step()
    model.eval()
    with torch.no_grad():
        token, state = torch.zeros(1, 1, dtype=torch.long), _fresh(1)
        for _ in range(20):
            logits, state = model(token, state)
            token = logits[:, -1].argmax(-1, keepdim=True)
    assert g.report() == []


class DefaultState(Rows):
    def forward(self, x, hidden=None):  # training passes no state: the GRU starts from zeros
        return super().forward(x, hidden)


def test_a_state_carried_in_evaluation_where_training_passes_none_is_named():
    x, y = digits()
    model = DefaultState()
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    g = guarded(model, opt, ignore=TIMING)
    for xb, yb in DataLoader(TensorDataset(x[:640], y[:640]), batch_size=64, shuffle=True):
        opt.zero_grad()
        nn.functional.cross_entropy(model(xb)[0], yb).backward()
        opt.step()
    model.eval()
    with torch.no_grad():
        hidden = None
        for xb, _ in DataLoader(TensorDataset(x[1397:1797], y[1397:1797]), batch_size=100):
            _, hidden = model(xb, hidden=hidden)
    assert slugs(g.report()) == ["eval-state-carried"]
