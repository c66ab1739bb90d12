"""response-mask-skips-first-token (overt/guards/firstresponse.py): an SFT loss mask sliced ``[:, :-1]`` over
next-token predictions (the prediction at the delimiter never trained); twins: ``[:, 1:]``, a multi-token
template, a loss over every position, left padding."""

from __future__ import annotations

import pytest
import torch
from torch import nn
import torch.nn.functional as F

from tests.conftest import TIMING
from tests.guards.helpers import guarded, slugs

SEP, ROLE, PAD, VOCAB, K = 10, 11, 12, 13, 4


class _LM(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(VOCAB, 16)
        self.rnn = nn.GRU(16, 32, batch_first=True)
        self.out = nn.Linear(32, VOCAB)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(self.rnn(self.emb(x))[0])


def _train(seqs: torch.Tensor, mask: torch.Tensor, sliced: str, steps: int = 20) -> tuple[list, str]:
    """Next-token training of ``seqs`` with the per-token loss weighed by ``mask`` sliced as ``sliced``."""
    torch.manual_seed(0)
    model = _LM()
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    g = guarded(model, opt, ignore=TIMING)
    for i in range(steps):
        x, m = seqs[i * 32 % 640:i * 32 % 640 + 32], mask[i * 32 % 640:i * 32 % 640 + 32]
        logits = model(x[:, :-1])
        token_loss = F.cross_entropy(logits.reshape(-1, VOCAB), x[:, 1:].reshape(-1), reduction="none")
        w = (m[:, :-1] if sliced == "head" else m[:, 1:]).reshape(-1)
        loss = (token_loss * w).sum() / w.sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
    return g.report(), g.session.options.stream.getvalue()


def _reversal(template: tuple[int, ...]) -> tuple[torch.Tensor, torch.Tensor]:
    """``prompt template response`` rows (the response the prompt reversed) and the response's mask."""
    g = torch.Generator().manual_seed(0)
    prompts = torch.randint(0, 10, (640, K), generator=g)
    seqs = torch.cat([prompts, torch.tensor(template).expand(640, -1), prompts.flip(1)], dim=1)
    mask = torch.zeros_like(seqs, dtype=torch.float)
    mask[:, K + len(template):] = 1.0
    return seqs, mask


@pytest.mark.parametrize("sliced", ["head", "tail"])
def test_response_mask_sliced_without_the_shift_is_named(sliced):
    findings, text = _train(*_reversal((SEP,)), sliced)
    assert slugs(findings) == (["response-mask-skips-first-token"] if sliced == "head" else []), text
    if sliced == "head":
        assert "made after token 10 (position 5 in the first row)" in text
        assert "test_firstresponse.py" in text


def test_multi_token_template_correctly_shifted_stays_silent():
    findings, text = _train(*_reversal((SEP, ROLE)), "tail")
    assert slugs(findings) == [], text


def test_loss_over_every_position_stays_silent():
    seqs, _ = _reversal((SEP,))
    findings, text = _train(seqs, torch.ones_like(seqs, dtype=torch.float), "tail")
    assert slugs(findings) == [], text


def test_left_padding_masked_stays_silent():
    """Left-padded rows whose loss starts one position after the last pad: the pads run, silent."""
    g = torch.Generator().manual_seed(1)
    seqs = torch.randint(0, 10, (640, 10), generator=g)
    mask = torch.ones_like(seqs, dtype=torch.float)
    for r in range(640):
        pad = 2 + r % 3
        seqs[r, :pad] = PAD
        mask[r, :pad] = 0.0
    findings, text = _train(seqs, mask, "head")
    # the padding targets reach F.cross_entropy(reduction="none") and are weighed 0 afterwards: not trained
    assert slugs(findings) == [], text
