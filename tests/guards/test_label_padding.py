"""loss-over-padding where the labels' padding and the inputs' padding are written by two conventions
(overt/guards/padloss.py; issue 33, branch conventions): a token-classification batch whose labels are
padded with the tag 0 while its ids are padded with the tokenizer's pad id 1, and a sequence-to-sequence
batch whose decoder targets (of their own length) are padded with the source's pad id while the loss
ignores -100.  Each twin pads its labels with -100, or with the loss's ignore_index."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from tests.conftest import TIMING
from tests.guards.helpers import guarded, slugs

V = 40


def _pad(seqs: list[torch.Tensor], value: int) -> torch.Tensor:
    out = torch.full((len(seqs), max(len(s) for s in seqs)), value)
    for r, s in enumerate(seqs):
        out[r, :len(s)] = s
    return out


def _tagged(n: int, seed: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Sentences of 4-15 tokens (ids 2..39), tagged 1-3 on multiples of 5 and 0 ("O") elsewhere."""
    g = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(n):
        ids = torch.randint(2, V, (int(torch.randint(4, 16, (1,), generator=g)),), generator=g)
        out.append((ids, torch.where(ids % 5 == 0, ids % 3 + 1, torch.zeros_like(ids))))
    return out


@pytest.mark.parametrize("label_pad", [0, -100, "ignored"])
def test_token_labels_padded_with_a_real_tag_are_named(label_pad):
    torch.manual_seed(0)
    pad_id = 1  # the tokenizer's pad id (RoBERTa's); tag 0 is "O"
    model = nn.Sequential(nn.Embedding(V, 32, padding_idx=pad_id), nn.Linear(32, 32), nn.ReLU(), nn.Linear(32, 4))
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    g = guarded(model, opt, ignore=TIMING)
    data = _tagged(320, 1)
    for i in range(0, 320, 32):
        batch = data[i:i + 32]
        ids = _pad([s for s, _ in batch], pad_id)
        labels = _pad([t for _, t in batch], 9 if label_pad == "ignored" else label_pad)
        ii = 9 if label_pad == "ignored" else -100  # the twin: labels padded with the loss's own ignore_index
        loss = F.cross_entropy(model(ids).reshape(-1, 4), labels.reshape(-1), ignore_index=ii)
        opt.zero_grad()
        loss.backward()
        opt.step()
    findings, text = g.report(), g.session.options.stream.getvalue()
    assert slugs(findings) == (["loss-over-padding"] if label_pad == 0 else []), text
    if label_pad == 0:
        assert "the value 0 written wherever the model's input ids are padding (pad id 1)" in text
        assert "test_label_padding.py:" in text


class _Seq2Seq(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(V, 32, padding_idx=0)
        self.enc = nn.GRU(32, 32, batch_first=True)
        self.dec = nn.GRU(32, 32, batch_first=True)
        self.out = nn.Linear(32, V)

    def forward(self, src, tgt_in):
        _, h = self.enc(self.emb(src))
        y, _ = self.dec(self.emb(tgt_in), h)
        return self.out(y)


@pytest.mark.parametrize("bug", [True, False])
def test_decoder_targets_padded_with_the_source_pad_id_are_named(bug):
    # sources of 6-23 tokens, targets: every other source token reversed then EOS (2): about half as long
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(1)
    pairs = []
    for _ in range(320):
        src = torch.randint(3, V, (int(torch.randint(6, 24, (1,), generator=gen)),), generator=gen)
        pairs.append((src, torch.cat([src[::2].flip(0), torch.tensor([2])])))
    model = _Seq2Seq()
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    g = guarded(model, opt, ignore=TIMING)
    for i in range(0, 320, 32):
        batch = pairs[i:i + 32]
        src = _pad([s for s, _ in batch], 0)
        tgt = _pad([t for _, t in batch], 0 if bug else -100)
        tgt_in = torch.cat([torch.ones(len(batch), 1, dtype=torch.long), tgt[:, :-1].clamp(min=0)], 1)
        loss = nn.CrossEntropyLoss()(model(src, tgt_in).reshape(-1, V), tgt.reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
    findings, text = g.report(), g.session.options.stream.getvalue()
    assert slugs(findings) == (["loss-over-padding"] if bug else []), text
    if bug:
        assert "padding id 0" in text
