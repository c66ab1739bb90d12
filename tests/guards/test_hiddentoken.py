"""train-serve-skew, widened (overt/guards/hiddentoken.py): an evaluation attention mask that hides, in every row,
the start token every training row showed at that position; the twin shows it; padding stays silent."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from tests.conftest import TIMING
from tests.guards.helpers import guarded, slugs

V, BOS, T = 8, 8, 12


class _MaskedLM(nn.Module):
    """A one-layer causal attention language model that takes (token ids, attention mask)."""

    def __init__(self, d: int = 32):
        super().__init__()
        self.tok = nn.Embedding(V + 1, d)
        self.pos = nn.Embedding(T, d)
        self.qkv = nn.Linear(d, 3 * d)
        self.out = nn.Linear(d, V + 1)

    def forward(self, x: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        h = self.tok(x) + self.pos(torch.arange(x.shape[1]))
        q, k, v = self.qkv(h).chunk(3, dim=-1)
        w = q @ k.transpose(1, 2) / 32 ** 0.5
        w = w.masked_fill(~torch.ones(x.shape[1], x.shape[1], dtype=torch.bool).tril(), float("-inf"))
        w = w + (1.0 - attention_mask[:, None, :].float()) * -1e4
        return self.out(h + w.softmax(-1) @ v)


def _sequences(n: int, seed: int) -> torch.Tensor:
    """``n`` sequences of ``T + 1`` tokens: the start token, then a counter modulo V from a random start."""
    g = torch.Generator().manual_seed(seed)
    start = torch.randint(V, (n, 1), generator=g)
    return torch.cat([torch.full((n, 1), BOS), (start + torch.arange(T)) % V], dim=1)


def _run(eval_batch) -> tuple[list, str]:
    """Train on full sequences (mask all 1) for 30 steps, then evaluate ``eval_batch()``'s (ids, mask) once."""
    torch.manual_seed(0)
    model = _MaskedLM()
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    g = guarded(model, opt, ignore=TIMING)
    data = _sequences(640, 0)
    for i in range(30):
        x = data[(i * 32) % 640:(i * 32) % 640 + 32]
        logits = model(x[:, :-1], torch.ones(len(x), T))
        loss = nn.functional.cross_entropy(logits.reshape(-1, V + 1), x[:, 1:].reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
    model.eval()
    with torch.no_grad():
        ids, mask = eval_batch()
        model(ids, mask)
    return g.report(), g.session.options.stream.getvalue()


@pytest.mark.parametrize("shown", [False, True])
def test_evaluation_mask_hiding_the_start_token_is_named(shown):
    def batch():
        test = _sequences(64, 1)[:, :-1]
        mask = torch.ones(64, T)
        mask[:, 0] = 1.0 if shown else 0.0  # the bug: the prepended start token masked out
        return test, mask

    findings, text = _run(batch)
    assert slugs(findings) == ([] if shown else ["train-serve-skew"]), text
    if not shown:
        assert "hides a token its training always showed: token 8 stands at position 0" in text
        assert "test_hiddentoken.py" in text


def test_left_padding_at_evaluation_stays_silent():
    """Left-padded evaluation rows mask their first positions; the longest row does not."""
    def batch():
        test = _sequences(64, 1)[:, :-1].clone()
        mask = torch.ones(64, T)
        for r in range(1, 64):
            pad = r % 4
            test[r, :pad] = 0
            mask[r, :pad] = 0
        return test, mask

    findings, text = _run(batch)
    assert slugs(findings) == [], text


def test_right_padding_where_training_held_varied_tokens_stays_silent():
    """Every evaluation row masks its last positions (padding to a fixed length): training held varied tokens
    there, so nothing proves a token the model always saw is hidden."""
    def batch():
        test = _sequences(64, 1)[:, :-1].clone()
        test[:, -3:] = 0
        mask = torch.ones(64, T)
        mask[:, -3:] = 0
        return test, mask

    findings, text = _run(batch)
    assert slugs(findings) == [], text
