"""generation-reads-untrained-position (overt/guards/untrainedread.py): behaviour cloning with the loss on the
state tokens instead of the actions, then greedy decoding of the actions; twins: the action mask, a loss over
every position, sampling beyond the training length."""

from __future__ import annotations

import pytest
import torch
from torch import nn
import torch.nn.functional as F

from tests.conftest import TIMING
from tests.guards.helpers import guarded, slugs

SEP, VOCAB, K = 10, 11, 4


class _Policy(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(VOCAB, 16)
        self.rnn = nn.GRU(16, 32, batch_first=True)
        self.out = nn.Linear(32, VOCAB)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(self.rnn(self.emb(x))[0])


class _TuplePolicy(_Policy):
    """Returns ``(logits, None)`` as GPT-style models do."""

    def forward(self, x: torch.Tensor):
        return super().forward(x), None


def _run(which: str, decode: int = K, start: int = K + 1, tuple_out: bool = False) -> tuple[list, str]:
    """Train on ``state <sep> action`` rows with the loss on ``which`` tokens, then decode ``decode`` tokens
    greedily from the first ``start`` tokens of held-out rows."""
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    states = torch.randint(0, 10, (700, K), generator=g)
    rows = torch.cat([states, torch.full((700, 1), SEP), states.flip(1)], dim=1)
    actions = torch.zeros_like(rows, dtype=torch.float)
    actions[:, K + 1:] = 1.0
    mask = {"actions": actions, "states": 1.0 - actions, "all": torch.ones_like(actions)}[which]
    model = _TuplePolicy() if tuple_out else _Policy()
    out = (lambda y: y[0]) if tuple_out else (lambda y: y)
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    guard = guarded(model, opt, ignore=TIMING)
    for i in range(20):
        x, m = rows[i * 32:i * 32 + 32], mask[i * 32:i * 32 + 32]
        token_loss = F.cross_entropy(out(model(x[:, :-1])).reshape(-1, VOCAB), x[:, 1:].reshape(-1), reduction="none")
        loss = (token_loss * m[:, 1:].reshape(-1)).sum() / m[:, 1:].sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
    model.eval()
    with torch.no_grad():
        ctx = rows[640:, :start]
        for _ in range(decode):
            ctx = torch.cat([ctx, out(model(ctx))[:, -1].argmax(-1, keepdim=True)], dim=1)
    return guard.report(), guard.session.options.stream.getvalue()


@pytest.mark.parametrize("which", ["states", "actions"])
def test_actions_generated_where_the_loss_weighed_the_states_are_named(which):
    findings, text = _run(which)
    assert slugs(findings) == (["generation-reads-untrained-position"] if which == "states" else []), text
    if which == "states":
        assert "reads its prediction at position 4, inside the 8 positions" in text
        assert "test_untrainedread.py" in text


def test_loss_over_every_position_stays_silent():
    findings, text = _run("all")
    assert slugs(findings) == [], text


def test_sampling_beyond_the_training_length_stays_silent():
    """A model trained on every position, sampled far past its training length: nothing inside it is untrained."""
    findings, text = _run("all", decode=12, start=2)
    assert slugs(findings) == [], text


@pytest.mark.parametrize("which", ["states", "actions"])
def test_models_returning_logits_and_loss_are_followed(which):
    findings, text = _run(which, tuple_out=True)
    assert slugs(findings) == (["generation-reads-untrained-position"] if which == "states" else []), text


def test_right_padded_names_sampled_to_the_full_length_stays_silent():
    """Words of varied length right-padded with 0 and their padded targets ignored (-1): the last positions are
    trained by the longest words only and a few checked batches may hold none; sampling reaches them. Those
    positions hold only padding in the batches seen, so they are not judged."""
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    n, T = 640, 10
    lengths = torch.randint(2, 6, (n,), generator=g)
    lengths[400::50] = T - 1  # a few long words, absent from the first batches
    x = torch.zeros(n, T, dtype=torch.long)
    y = torch.full((n, T), -1)
    for r in range(n):
        word = torch.randint(1, VOCAB, (int(lengths[r]),), generator=g)
        x[r, 1:1 + len(word)] = word
        y[r, :len(word)] = word
        y[r, len(word)] = 0
    model = _Policy()
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    guard = guarded(model, opt, ignore=TIMING)
    for i in range(1, 20):
        loss = F.cross_entropy(model(x[i * 32:i * 32 + 32]).reshape(-1, VOCAB), y[i * 32:i * 32 + 32].reshape(-1),
                               ignore_index=-1)
        opt.zero_grad()
        loss.backward()
        opt.step()
    model.eval()
    with torch.no_grad():
        ctx = torch.zeros(16, 1, dtype=torch.long)
        for _ in range(T - 1):
            ctx = torch.cat([ctx, torch.multinomial(model(ctx)[:, -1].softmax(-1), 1)], dim=1)
    findings, text = guard.report(), guard.session.options.stream.getvalue()
    assert slugs(findings) == [], text
