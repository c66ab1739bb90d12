"""Input-reading checks see a model called with keywords (overt/guards/modelinputs.py): ``model(input_ids=...,
attention_mask=...)`` is seen as the same call made positionally, by train-serve-skew (hiddentoken),
response-mask-skips-first-token (firstresponse) and generation-reads-untrained-position (untrainedread), on
small real runs called both ways; the twins stay silent both ways."""

from __future__ import annotations

import pytest
import torch
from torch import nn
import torch.nn.functional as F

from overt.guards.modelinputs import as_positional
from tests.conftest import TIMING
from tests.guards.helpers import guarded, slugs
from tests.guards import test_firstresponse as fr
from tests.guards import test_hiddentoken as ht
from tests.guards import test_untrainedread as ur


class _Out:
    """What a Hugging Face causal LM returns: an object with ``logits`` (and ``loss``)."""

    def __init__(self, logits: torch.Tensor, loss: torch.Tensor | None):
        self.logits, self.loss = logits, loss


class _Named(nn.Module):
    """A language model with a Hugging Face forward signature: ``(input_ids, attention_mask=None, labels=None)``."""

    def __init__(self, inner: nn.Module, masked: bool):
        super().__init__()
        self.inner, self.masked = inner, masked

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
                labels: torch.Tensor | None = None) -> _Out:
        logits = self.inner(input_ids, attention_mask) if self.masked else self.inner(input_ids)
        loss = None if labels is None else F.cross_entropy(logits.flatten(0, 1), labels.flatten())
        return _Out(logits, loss)


def _call(model: nn.Module, keywords: bool, ids: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
    if keywords:
        out = model(input_ids=ids) if mask is None else model(input_ids=ids, attention_mask=mask)
    else:
        out = model(ids) if mask is None else model(ids, mask)
    return out.logits


# -- the binding itself -------------------------------------------------------------------------------------------
class _Kw(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(2, 2)

    def forward(self, a, b=None, c=3, *, d=None):
        return a


class _Star(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(2, 2)

    def forward(self, *args, **kwargs):
        return args


def test_keywords_bind_to_the_positional_call_with_defaults_between():
    m, x, y = _Kw(), torch.zeros(2), torch.ones(2)
    assert as_positional(m, (), {"a": x}) == (x,)
    assert as_positional(m, (x,), {}) == (x,)
    got = as_positional(m, (x,), {"c": y})
    assert got[0] is x and got[1] is None and got[2] is y
    got = as_positional(m, (), {"b": y, "a": x})
    assert got[0] is x and got[1] is y and len(got) == 2


def test_keywords_without_a_positional_slot_leave_the_arguments_alone():
    m, x, y = _Kw(), torch.zeros(2), torch.ones(2)
    assert as_positional(m, (x,), {"d": y}) == (x,)  # keyword-only
    assert as_positional(m, (x,), {"a": y}) == (x,)  # given twice (the call itself fails)
    assert as_positional(m, (), {"b": y}) == ()  # a required parameter left out
    assert as_positional(_Star(), (), {"input_ids": x}) == ()  # **kwargs forward


# -- hiddentoken --------------------------------------------------------------------------------------------------
def _hidden_run(keywords: bool, shown: bool) -> tuple[list, str]:
    torch.manual_seed(0)
    model = _Named(ht._MaskedLM(), masked=True)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    g = guarded(model, opt, ignore=TIMING)
    data = ht._sequences(640, 0)
    for i in range(30):
        x = data[(i * 32) % 640:(i * 32) % 640 + 32]
        logits = _call(model, keywords, x[:, :-1], torch.ones(len(x), ht.T))
        loss = F.cross_entropy(logits.reshape(-1, ht.V + 1), x[:, 1:].reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
    model.eval()
    with torch.no_grad():
        test = ht._sequences(64, 1)[:, :-1]
        mask = torch.ones(64, ht.T)
        mask[:, 0] = 1.0 if shown else 0.0
        _call(model, keywords, test, mask)
    return g.report(), g.session.options.stream.getvalue()


@pytest.mark.parametrize("keywords", [False, True])
@pytest.mark.parametrize("shown", [False, True])
def test_hidden_start_token_is_named_however_the_model_is_called(keywords, shown):
    findings, text = _hidden_run(keywords, shown)
    assert slugs(findings) == ([] if shown else ["train-serve-skew"]), text


def test_labels_given_by_keyword_are_not_taken_for_the_mask():
    """``model(input_ids=x, labels=y)``: no attention mask is passed; the labels (same shape, 0/1 tags, 0 in every
    evaluation row at the start token's position) are not one."""
    torch.manual_seed(0)
    model = _Named(ht._MaskedLM(), masked=False)
    model.inner.forward = lambda x, m=None: ht._MaskedLM.forward(model.inner, x, torch.ones_like(x))
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    g = guarded(model, opt, ignore=TIMING)
    data = ht._sequences(640, 0)
    for i in range(30):
        x = data[(i * 32) % 640:(i * 32) % 640 + 32]
        tags = x[:, 1:] % 2
        tags[:, 0] = 1  # 1 in every training row at the start token's position
        loss = model(input_ids=x[:, :-1], labels=tags).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
    model.eval()
    with torch.no_grad():
        test = ht._sequences(64, 1)
        labels = test[:, 1:] % 2
        labels[:, 0] = 0
        model(input_ids=test[:, :-1], labels=labels)
    assert slugs(g.report()) == [], g.session.options.stream.getvalue()


# -- firstresponse ------------------------------------------------------------------------------------------------
def _first_run(keywords: bool, sliced: str) -> tuple[list, str]:
    seqs, mask = fr._reversal((fr.SEP,))
    torch.manual_seed(0)
    model = _Named(fr._LM(), masked=False)
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    g = guarded(model, opt, ignore=TIMING)
    for i in range(20):
        x, m = seqs[i * 32 % 640:i * 32 % 640 + 32], mask[i * 32 % 640:i * 32 % 640 + 32]
        logits = _call(model, keywords, x[:, :-1])
        token_loss = F.cross_entropy(logits.reshape(-1, fr.VOCAB), x[:, 1:].reshape(-1), reduction="none")
        w = (m[:, :-1] if sliced == "head" else m[:, 1:]).reshape(-1)
        loss = (token_loss * w).sum() / w.sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
    return g.report(), g.session.options.stream.getvalue()


@pytest.mark.parametrize("keywords", [False, True])
@pytest.mark.parametrize("sliced", ["head", "tail"])
def test_response_mask_without_the_shift_is_named_however_the_model_is_called(keywords, sliced):
    findings, text = _first_run(keywords, sliced)
    assert slugs(findings) == (["response-mask-skips-first-token"] if sliced == "head" else []), text


# -- untrainedread ------------------------------------------------------------------------------------------------
def _decode_run(keywords: bool, which: str) -> tuple[list, str]:
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    K = ur.K
    states = torch.randint(0, 10, (700, K), generator=g)
    rows = torch.cat([states, torch.full((700, 1), ur.SEP), states.flip(1)], dim=1)
    actions = torch.zeros_like(rows, dtype=torch.float)
    actions[:, K + 1:] = 1.0
    mask = actions if which == "actions" else 1.0 - actions
    model = _Named(ur._Policy(), masked=False)
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    guard = guarded(model, opt, ignore=TIMING)
    for i in range(20):
        x, m = rows[i * 32:i * 32 + 32], mask[i * 32:i * 32 + 32]
        logits = _call(model, keywords, x[:, :-1])
        token_loss = F.cross_entropy(logits.reshape(-1, ur.VOCAB), x[:, 1:].reshape(-1), reduction="none")
        loss = (token_loss * m[:, 1:].reshape(-1)).sum() / m[:, 1:].sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
    model.eval()
    with torch.no_grad():
        ctx = rows[640:, :K + 1]
        for _ in range(K):
            ctx = torch.cat([ctx, _call(model, keywords, ctx)[:, -1].argmax(-1, keepdim=True)], dim=1)
    return guard.report(), guard.session.options.stream.getvalue()


@pytest.mark.parametrize("keywords", [False, True])
@pytest.mark.parametrize("which", ["states", "actions"])
def test_generation_reading_untrained_positions_is_named_however_the_model_is_called(keywords, which):
    findings, text = _decode_run(keywords, which)
    assert slugs(findings) == (["generation-reads-untrained-position"] if which == "states" else []), text


# -- an additive attention mask given by keyword is no non-finite input -------------------------------------------
class _Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(10, 16)
        layer = nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, batch_first=True)
        self.enc = nn.TransformerEncoder(layer, 1, enable_nested_tensor=False)
        self.out = nn.Linear(16, 10)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None, scale: torch.Tensor | None = None):
        h = self.emb(x) if scale is None else self.emb(x) * scale
        return self.out(self.enc(h, mask=mask, is_causal=mask is not None))


@pytest.mark.parametrize("keywords", [False, True])
@pytest.mark.parametrize("poisoned", [False, True])
def test_causal_mask_of_zeros_and_minus_infinity_is_no_non_finite_input(keywords, poisoned):
    """``model(x, mask=nn.Transformer.generate_square_subsequent_mask(T))``: the mask's -inf are by design; a float
    input holding inf among real values (the twin, ``scale``) is still non-finite."""
    torch.manual_seed(0)
    model = _Encoder()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    g = guarded(model, opt, ignore=TIMING, stop_on_error=False)
    data = torch.randint(0, 10, (64, 9))
    mask = nn.Transformer.generate_square_subsequent_mask(8)
    scale = torch.ones(8, 16)
    if poisoned:
        scale[0, 0] = float("inf")
    for i in range(6):
        x = data[i * 8:i * 8 + 8]
        logits = model(x[:, :-1], mask=mask, scale=scale) if keywords else model(x[:, :-1], mask, scale)
        loss = F.cross_entropy(logits.reshape(-1, 10), x[:, 1:].reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
    findings, text = g.report(), g.session.options.stream.getvalue()
    assert ("non-finite" in slugs(findings)) == poisoned, text
