"""Sequence models, masks, targets and state (issue 33, branch seqmodel): each invariant's planted
bug in a form other than its wild case (tests/wild w57, w58, w61, w67, w74), beside its clean twin,
on real small runs (token sequences of a Markov chain, digits)."""

from __future__ import annotations

import copy

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from tests.conftest import TIMING
from tests.guards.helpers import digits, guarded, markov_tokens, mlp, slugs

V, T = 8, 24
_chain = markov_tokens


def _fit_lm(model: nn.Module, steps: int = 8, **kw):
    torch.manual_seed(0)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    g = guarded(model, opt, ignore=TIMING, **kw)
    data = _chain(320, 1)
    for i in range(steps):
        ids = data[40 * i:40 * (i + 1)]
        x, y = ids[:, :-1], ids[:, 1:]
        loss = F.cross_entropy(model(x).reshape(-1, V), y.reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
    return g.report(), g.session.options.stream.getvalue()


# -- causal-mask-missing ----------------------------------------------------------------------


class _GRU(nn.Module):
    def __init__(self, bidirectional: bool):
        super().__init__()
        self.embed = nn.Embedding(V, 16)
        self.rnn = nn.GRU(16, 16, batch_first=True, bidirectional=bidirectional)
        self.head = nn.Linear(32 if bidirectional else 16, V)

    def forward(self, ids):
        return self.head(self.rnn(self.embed(ids))[0])


class _Attention(nn.Module):
    def __init__(self, d: int, causal: bool):
        super().__init__()
        self.qkv = nn.Linear(d, 3 * d)
        self.causal = causal

    def forward(self, h):
        q, k, v = self.qkv(h).unsqueeze(1).chunk(3, dim=-1)  # one head
        return F.scaled_dot_product_attention(q, k, v, is_causal=self.causal).squeeze(1)


class _TinyGPT(nn.Module):
    def __init__(self, causal: bool):
        super().__init__()
        self.embed = nn.Embedding(V, 16)
        self.pos = nn.Parameter(torch.randn(T, 16) * 0.1)
        self.attn = _Attention(16, causal)
        self.head = nn.Linear(16, V)

    def forward(self, ids):
        h = self.embed(ids) + self.pos[: ids.shape[1]]
        return self.head(h + self.attn(h))


class _SentenceAutoencoder(nn.Module):
    """A sequence autoencoder: the encoder's final state (a summary of the whole sentence) conditions a
    teacher-forced decoder.  Every output sees every input through that bottleneck, by design."""

    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(V, 16)
        self.encoder = nn.GRU(16, 16, batch_first=True)
        self.decoder = nn.GRU(16, 16, batch_first=True)
        self.head = nn.Linear(16, V)

    def forward(self, ids):
        e = self.embed(ids)
        _, summary = self.encoder(e)
        return self.head(self.decoder(e, summary)[0])


def test_a_bidirectional_language_model_is_named_at_its_rnn():
    findings, text = _fit_lm(_GRU(bidirectional=True))
    assert slugs(findings) == ["causal-mask-missing"], text
    assert "_GRU.rnn (GRU" in text and "test_seqmodel.py:" in text


def test_attention_without_is_causal_is_named_at_its_call():
    findings, text = _fit_lm(_TinyGPT(causal=False))
    assert slugs(findings) == ["causal-mask-missing"], text
    assert "F.scaled_dot_product_attention at tests/guards/test_seqmodel.py:" in text and "is_causal=True" in text


@pytest.mark.parametrize("model", [lambda: _GRU(bidirectional=False), lambda: _TinyGPT(causal=True),
                                   _SentenceAutoencoder], ids=["gru", "gpt-causal", "autoencoder"])
def test_causal_models_and_bottlenecks_are_silent(model):
    findings, text = _fit_lm(model())
    assert "causal-mask-missing" not in slugs(findings), text


# -- attention-mask-inverted ------------------------------------------------------------------

PAD = 0


def _padded(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Sequences of 3-11 tokens padded to 12; the label: does token 7 occur?"""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(1, 30, (n, 12), generator=g)
    lengths = torch.randint(3, 12, (n,), generator=g)
    ids[torch.arange(12)[None] >= lengths[:, None]] = PAD
    return ids, (ids == 7).any(1).long()


class _MHAClassifier(nn.Module):
    def __init__(self, inverted: bool):
        super().__init__()
        self.embed = nn.Embedding(30, 32, padding_idx=PAD)
        self.attn = nn.MultiheadAttention(32, 4, batch_first=True)
        self.fc = nn.Linear(32, 2)
        self.inverted = inverted

    def forward(self, ids):
        h = self.embed(ids)
        pad = ids == PAD
        out, _ = self.attn(h, h, h, key_padding_mask=~pad if self.inverted else pad)  # True: ignore
        return self.fc(out.mean(1))


@pytest.mark.parametrize("inverted", [True, False])
def test_a_key_padding_mask_passed_inverted_is_named(inverted):
    torch.manual_seed(0)
    x, y = _padded(640, 1)
    model = _MHAClassifier(inverted)
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    g = guarded(model, opt, ignore=TIMING | {"vanishing-gradients"})
    for i in range(10):
        loss = F.cross_entropy(model(x[32 * i:32 * (i + 1)]), y[32 * i:32 * (i + 1)])
        opt.zero_grad()
        loss.backward()
        opt.step()
    findings, text = g.report(), g.session.options.stream.getvalue()
    assert slugs(findings) == (["attention-mask-inverted"] if inverted else []), text
    if inverted:
        assert "test_seqmodel.py:" in text and "key_padding_mask" in text


# -- labels-all-ignored -----------------------------------------------------------------------


def _sft(max_len: int, side: str):
    """Prompt + completion token sequences; labels only on the completion (-100 on the prompt).
    Half the prompts are long: cut from the right at ``max_len``, their completion is gone."""
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)
    rows, labels = [], []
    for i in range(256):
        prompt = torch.randint(1, V, (14 if i % 2 else 4,), generator=g).tolist()
        completion = [(prompt[-1] * 3 + 1) % V, 1]
        ids = prompt + completion
        lab = [-100] * len(prompt) + completion
        if len(ids) > max_len:
            keep = slice(0, max_len) if side == "right" else slice(len(ids) - max_len, len(ids))
            ids, lab = ids[keep], lab[keep]
        rows.append(ids + [PAD] * (max_len - len(ids)))
        labels.append(lab + [-100] * (max_len - len(lab)))
    return torch.tensor(rows), torch.tensor(labels)


@pytest.mark.parametrize("side", ["right", "left"])
def test_examples_truncated_to_no_label_are_named(side):
    ids, labels = _sft(12, side)
    model = _GRU(bidirectional=False)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    g = guarded(model, opt, ignore=TIMING)
    for i in range(8):
        xb, yb = ids[32 * i:32 * (i + 1)], labels[32 * i:32 * (i + 1)]
        loss = F.cross_entropy(model(xb)[:, :-1].reshape(-1, V), yb[:, 1:].reshape(-1))  # next-token targets
        opt.zero_grad()
        loss.backward()
        opt.step()
    findings, text = g.report(), g.session.options.stream.getvalue()
    assert slugs(findings) == (["labels-all-ignored"] if side == "right" else []), text
    if side == "right":
        assert "ignore_index=-100" in text and "truncat" in text


def test_unlabelled_samples_in_classification_are_left_alone():
    """Semi-supervised: a third of the digits unlabelled (-100), whatever their content: deliberate."""
    torch.manual_seed(0)
    x, y = digits()
    y[torch.arange(len(y)) % 3 == 0] = -100
    model = mlp()
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    g = guarded(model, opt, ignore=TIMING)
    for i in range(10):
        loss = F.cross_entropy(model(x[64 * i:64 * (i + 1)]), y[64 * i:64 * (i + 1)], ignore_index=-100)
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert "labels-all-ignored" not in slugs(g.report()), g.session.options.stream.getvalue()


# -- loss-compares-itself ---------------------------------------------------------------------


@pytest.mark.parametrize("bug", [True, False])
def test_a_consistency_loss_between_a_tensor_and_itself_is_named(bug):
    """Mean teacher: an EMA copy of the student, equal to it at the first step; the buggy loss compares
    the teacher's log-probabilities with themselves (log_target=True)."""
    torch.manual_seed(0)
    x, y = digits()
    model = mlp()
    teacher = copy.deepcopy(model)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    g = guarded(model, opt, ignore=TIMING)
    for i in range(60):  # the clock checks steps 0-4 and 50
        xb, yb = x[64 * (i % 20):64 * (i % 20 + 1)], y[64 * (i % 20):64 * (i % 20 + 1)]
        with torch.no_grad():
            t = F.log_softmax(teacher(xb), 1)
        s = F.log_softmax(model(xb), 1)
        consistency = F.kl_div(t if bug else s, t, log_target=True, reduction="batchmean")
        loss = F.cross_entropy(model(xb[:16]), yb[:16]) + consistency
        opt.zero_grad()
        loss.backward()
        opt.step()
        with torch.no_grad():
            for pt, ps in zip(teacher.parameters(), model.parameters()):
                pt.mul_(0.9).add_(ps, alpha=0.1)
    findings, text = g.report(), g.session.options.stream.getvalue()
    assert slugs(findings) == (["loss-compares-itself"] if bug else []), text


# -- init-after-load ----------------------------------------------------------------------------


def _init(m: nn.Module) -> None:
    if isinstance(m, nn.Linear):
        nn.init.normal_(m.weight, 0.0, 0.02)
        nn.init.zeros_(m.bias)


@pytest.mark.parametrize("after", ["apply-init", "new-head", "none"])
def test_weights_initialised_after_loading_are_named(after):
    torch.manual_seed(0)
    x, y = digits()
    trained = mlp()
    state = {k: v + 0.5 for k, v in trained.state_dict().items()}  # a checkpoint unlike a fresh init
    model = mlp()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    g = guarded(model, opt, ignore=TIMING)
    model.load_state_dict(state)
    if after == "apply-init":
        model.apply(_init)  # the whole model: the checkpoint is gone
    elif after == "new-head":
        model[-1].reset_parameters()  # a new head on the loaded backbone: fine
    for i in range(6):
        loss = F.cross_entropy(model(x[64 * i:64 * (i + 1)]), y[64 * i:64 * (i + 1)])
        opt.zero_grad()
        loss.backward()
        opt.step()
    findings, text = g.report(), g.session.options.stream.getvalue()
    assert slugs(findings) == (["init-after-load"] if after == "apply-init" else []), text
    if after == "apply-init":
        assert "test_seqmodel.py:" in text and "4 of its 4 parameters" in text


# -- loss-over-padding --------------------------------------------------------------------------


@pytest.mark.parametrize("labels", ["pad-id", "ignored", "pad-ignored"])
def test_a_loss_over_the_padding_is_named(labels):
    """A GRU language model on sentences of 6-23 tokens padded with 0 (token ids 1-7): the targets keep
    the pad id and the loss counts them, or the padding is -100, or ignore_index is the pad id."""
    torch.manual_seed(0)
    data = _chain(320, 1) % 7 + 1
    lengths = torch.randint(6, T, (len(data),), generator=torch.Generator().manual_seed(2))
    data[torch.arange(T)[None] >= lengths[:, None]] = PAD
    model = _GRU(bidirectional=False)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    g = guarded(model, opt, ignore=TIMING)
    for i in range(8):
        ids = data[40 * i:40 * (i + 1)]
        x, y = ids[:, :-1], ids[:, 1:].clone()
        if labels == "ignored":
            y[y == PAD] = -100
        ii = PAD if labels == "pad-ignored" else -100
        loss = F.cross_entropy(model(x).reshape(-1, V), y.reshape(-1), ignore_index=ii)
        opt.zero_grad()
        loss.backward()
        opt.step()
    findings, text = g.report(), g.session.options.stream.getvalue()
    assert slugs(findings) == (["loss-over-padding"] if labels == "pad-id" else []), text
    if labels == "pad-id":
        assert "padding id 0" in text and "test_seqmodel.py:" in text


def test_an_ema_copy_loaded_once_and_updated_before_its_first_forward_is_left_alone():
    """ema.load_state_dict(model.state_dict()) at the start, updated after every step, evaluated at the
    end: its weights moved before its first forward, but they were never replaced."""
    torch.manual_seed(0)
    x, y = digits()
    model, ema = mlp(), mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    g = guarded(model, opt, ignore=TIMING)
    ema.load_state_dict(model.state_dict())
    for i in range(20):
        loss = F.cross_entropy(model(x[64 * i:64 * (i + 1)]), y[64 * i:64 * (i + 1)])
        opt.zero_grad()
        loss.backward()
        opt.step()
        with torch.no_grad():
            for pe, pm in zip(ema.parameters(), model.parameters()):
                pe.mul_(0.9).add_(pm, alpha=0.1)
    ema.eval()
    with torch.no_grad():
        ema(x[1500:])
    assert "init-after-load" not in slugs(g.report()), g.session.options.stream.getvalue()


def test_short_examples_left_unlabelled_by_random_masking_are_left_alone():
    """A masked LM: 15% of the real tokens are targets; half the sequences are 2-4 tokens long, so many of
    those draw no target at all in a batch (and others next epoch)."""
    torch.manual_seed(0)
    g0 = torch.Generator().manual_seed(3)
    ids = torch.randint(1, V, (320, T), generator=g0)
    lengths = torch.where(torch.arange(320) % 2 == 0, torch.randint(2, 5, (320,), generator=g0), torch.tensor(T))
    ids[torch.arange(T)[None] >= lengths[:, None]] = PAD
    labels = torch.where((torch.rand(ids.shape, generator=g0) < 0.15) & (ids != PAD), ids, torch.tensor(-100))
    model = _GRU(bidirectional=True)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    g = guarded(model, opt, ignore=TIMING)
    for i in range(8):
        xb, yb = ids[40 * i:40 * (i + 1)], labels[40 * i:40 * (i + 1)]
        loss = F.cross_entropy(model(xb).reshape(-1, V), yb.reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert (labels == -100).all(1).float().mean() > 0.2
    assert "labels-all-ignored" not in slugs(g.report()), g.session.options.stream.getvalue()
