"""loss-over-padding with a per-token loss weighed afterwards (overt/guards/padloss.py): ``F.cross_entropy(...,
reduction="none")`` multiplied by a mask that zeroes the padding counts no padding target (left or right
padding, called positionally or with keywords); the buggy twins -- the per-token loss averaged over every
position, or weighed by a mask that is all ones -- train on the padding and are named."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from tests.conftest import TIMING
from tests.guards.helpers import guarded, slugs

PAD, V = 0, 24


class _LM(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(V, 16)
        self.rnn = nn.GRU(16, 32, batch_first=True)
        self.out = nn.Linear(32, V)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None) -> torch.Tensor:
        return self.out(self.rnn(self.emb(input_ids))[0])


def _padded(side: str) -> tuple[torch.Tensor, torch.Tensor]:
    """640 rows of 4-11 tokens (ids 1..23, a counter) padded with 0 to 12 on ``side``, and their attention mask."""
    g = torch.Generator().manual_seed(0)
    ids = torch.full((640, 12), PAD)
    mask = torch.zeros(640, 12)
    for r in range(640):
        n = int(torch.randint(4, 12, (1,), generator=g))
        row = (torch.randint(0, 23, (1,), generator=g) + torch.arange(n)) % 23 + 1
        at = slice(0, n) if side == "right" else slice(12 - n, 12)
        ids[r, at], mask[r, at] = row, 1.0
    return ids, mask


def _run(side: str, weigh: str, keywords: bool = False) -> tuple[list, str]:
    ids, mask = _padded(side)
    torch.manual_seed(0)
    model = _LM()
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    g = guarded(model, opt, ignore=TIMING)
    for i in range(12):
        x, m = ids[i * 32:i * 32 + 32], mask[i * 32:i * 32 + 32]
        logits = model(input_ids=x[:, :-1], attention_mask=m[:, :-1]) if keywords else model(x[:, :-1], m[:, :-1])
        token_loss = F.cross_entropy(logits.reshape(-1, V), x[:, 1:].reshape(-1), reduction="none")
        if weigh == "mask":
            w = m[:, 1:].reshape(-1)
            loss = (token_loss * w).sum() / w.sum()
        elif weigh == "ones":  # the bug: the weights never exclude the padding
            w = torch.ones_like(m[:, 1:]).reshape(-1)
            loss = (token_loss * w).sum() / w.sum()
        else:  # the bug: the per-token loss averaged over every position
            loss = token_loss.mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    return g.report(), g.session.options.stream.getvalue()


@pytest.mark.parametrize("keywords", [False, True])
@pytest.mark.parametrize("side", ["left", "right"])
def test_per_token_loss_masked_after_the_call_stays_silent(side, keywords):
    findings, text = _run(side, "mask", keywords)
    assert "loss-over-padding" not in slugs(findings), text


@pytest.mark.parametrize("weigh", ["ones", "mean"])
@pytest.mark.parametrize("side", ["left", "right"])
def test_per_token_loss_that_keeps_the_padding_is_named(side, weigh):
    findings, text = _run(side, weigh)
    assert "loss-over-padding" in slugs(findings), text
    assert "test_padloss_weighed.py:" in text
