"""loss-over-padding when the model's inputs are corrupted where the loss has targets (overt/guards/padloss.py;
issue 33, branch losses12): a masked-language-modelling collator that lets padding positions be chosen for
masking (huggingface/transformers#11155's form) makes padding a target while the inputs' own padding is broken
by mask and random tokens.  The padding is proven on the sequence the targets restore.  Twins: the collator
that excludes the padding (the fix), and one that masks only the real tokens of left-padded rows."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from tests.conftest import TIMING
from tests.guards.helpers import guarded, slugs

V, PAD, MASK, L = 30, 30, 31, 20


def _sentences(n: int, seed: int, left: bool) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    x = torch.full((n, L), PAD)
    for i in range(n):
        k = int(torch.randint(5, L + 1, (1,), generator=g))
        row = (torch.arange(k) * 7 + int(torch.randint(0, V, (1,), generator=g))) % V
        if left:
            x[i, L - k:] = row
        else:
            x[i, :k] = row
    return x


def _collate(x: torch.Tensor, exclude_padding: bool, g: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    labels = x.clone()
    prob = torch.full(x.shape, 0.15)
    if exclude_padding:
        prob.masked_fill_(x == PAD, 0.0)
    masked = torch.bernoulli(prob, generator=g).bool()
    labels[~masked] = -100
    inputs = x.clone()
    replace = torch.bernoulli(torch.full(x.shape, 0.8), generator=g).bool() & masked
    inputs[replace] = MASK
    rand = torch.bernoulli(torch.full(x.shape, 0.5), generator=g).bool() & masked & ~replace
    inputs[rand] = torch.randint(0, V, x.shape, generator=g)[rand]
    return inputs, labels


class _Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(V + 2, 32)
        self.mix = nn.Sequential(nn.Linear(32, 32), nn.ReLU())
        self.out = nn.Linear(32, V + 2)

    def forward(self, x):
        h = self.emb(x)
        return self.out(self.mix(h + h.mean(1, keepdim=True)))


@pytest.mark.parametrize("exclude_padding,left", [(False, False), (False, True), (True, False), (True, True)])
def test_mlm_collator_that_masks_padding_is_named(exclude_padding, left):
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(2)
    data = _sentences(640, 1, left)
    model = _Encoder()
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    gd = guarded(model, opt, ignore=TIMING)
    for i in range(0, 640, 32):
        inputs, labels = _collate(data[i:i + 32], exclude_padding, g)
        loss = F.cross_entropy(model(inputs).reshape(-1, V + 2), labels.reshape(-1), ignore_index=-100)
        opt.zero_grad()
        loss.backward()
        opt.step()
    findings, text = gd.report(), gd.session.options.stream.getvalue()
    assert slugs(findings) == ([] if exclude_padding else ["loss-over-padding"]), text
    if not exclude_padding:
        assert "the padding id 30, inside the padded end" in text
        assert "test_mlm_padding.py:" in text
        assert "masked_fill_(input_ids == 30, 0.0)" in text


def test_token_targets_that_are_the_inputs_are_silent_when_padding_is_ignored():
    # a denoising objective whose labels are every original token, padding set to -100: the restored
    # sequence's padding holds no counted target
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(2)
    data = _sentences(640, 1, False)
    model = _Encoder()
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    gd = guarded(model, opt, ignore=TIMING)
    for i in range(0, 640, 32):
        x = data[i:i + 32]
        inputs, _ = _collate(x, False, g)
        labels = x.masked_fill(x == PAD, -100)
        loss = F.cross_entropy(model(inputs).reshape(-1, V + 2), labels.reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert slugs(gd.report()) == [], gd.session.options.stream.getvalue()


def test_tags_ending_like_the_padding_are_silent():
    # token classification whose tag 0 ends every sentence three times (three closing tokens) while the ids are padded
    # with 0 and the labels with -100: the restored sequence ends in a run of 0s, but the loss predicts 4 tags,
    # not the ids' vocabulary
    torch.manual_seed(0)
    data = _sentences(640, 1, False)
    ids = torch.where(data == PAD, 0, data + 1)
    tags = torch.where(data == PAD, -100, data % 3 + 1)
    length = (data != PAD).sum(1)
    rows = torch.arange(len(data))
    tags[rows, length - 1] = 0
    tags[rows, length - 2] = 0
    tags[rows, length - 3] = 0
    model = nn.Sequential(nn.Embedding(V + 2, 32), nn.Linear(32, 32), nn.ReLU(), nn.Linear(32, 4))
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    gd = guarded(model, opt, ignore=TIMING)
    for i in range(0, 640, 32):
        loss = F.cross_entropy(model(ids[i:i + 32]).reshape(-1, 4), tags[i:i + 32].reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert slugs(gd.report()) == [], gd.session.options.stream.getvalue()
