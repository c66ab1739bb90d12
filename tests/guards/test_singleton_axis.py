"""A softmax, argmax or normalisation over an axis of size 1 (singleton-axis, issue 33; w158, w163), on
real small runs over digits, planted in forms other than the wild cases': an ``nn.Softmax`` layer over
flattened attention scores, a mixture-of-experts gate of one expert through ``F.softmax``, ``F.normalize``
of a one-wide embedding, a one-logit binary classifier evaluated with ``torch.max(out, 1)``, a regression
head read by ``torch.argmax`` -- each with its twin -- and the size-1 calls that must stay silent (a site
whose axis is longer on other calls, ``max`` values whose indices are never read, one sample)."""

from __future__ import annotations

import io

import torch
import torch.nn.functional as F
from torch import nn

from overt.guards.options import GuardOptions
from overt.guards.session import GuardSession
from overt.guards.singleton import MIN_CALLS
from tests.conftest import TIMING
from tests.guards.helpers import batches, slugs, train


def _line(marker: str) -> str:
    """``test_singleton_axis.py:N`` of the line of this file that holds ``marker``."""
    lines = open(__file__).read().splitlines()
    n = next(n for n, line in enumerate(lines, 1) if marker in line and "_line(" not in line)
    return f"test_singleton_axis.py:{n}"


def _session() -> GuardSession:
    torch.manual_seed(0)
    return GuardSession(GuardOptions(stream=io.StringIO(), ignore=TIMING), auto=True)


def _train(model: nn.Module, loss, steps: int = 6):
    session = _session()
    try:
        train(model, torch.optim.Adam(model.parameters(), lr=1e-2), steps=steps, loss_fn=loss)
    finally:
        findings = session.close()
    return findings, session.options.stream.getvalue()


ce = F.cross_entropy


# -- training: attention pooling, a gate, a normalised embedding ----------------------------------------
class TokenPool(nn.Module):
    """Each digit as 16 tokens of 4 pixels, pooled by attention: a score per token, softmaxed over the
    tokens (twin) or, flattened to ``(B * 16, 1)``, over its axis of size 1 by an ``nn.Softmax`` layer."""

    def __init__(self, flat: bool):
        super().__init__()
        self.flat = flat
        self.embed = nn.Linear(4, 16)
        self.score = nn.Linear(16, 1)
        self.norm = nn.Softmax(dim=1)
        self.head = nn.Linear(16, 10)

    def forward(self, x):
        b = len(x)
        h = torch.tanh(self.embed(x.view(b, 16, 4)))
        if self.flat:
            w = self.norm(self.score(h.reshape(b * 16, 16))).view(b, 16)  # POOL-FLAT
        else:
            w = self.norm(self.score(h).view(b, 16))
        return self.head((w.unsqueeze(-1) * h).sum(1))


def test_attention_scores_softmaxed_by_a_layer_over_their_singleton_axis_are_named():
    findings, text = _train(TokenPool(flat=True), ce)
    assert slugs(findings) == ["singleton-axis"], text
    assert "softmax at " in text and f"{_line('# POOL-FLAT')} works" in text and "(512, 1) tensor" in text, text
    assert "always 1" in text and "view(batch, seq_len)" in text, text
    findings, text = _train(TokenPool(flat=False), ce)
    assert findings == [], text


class Experts(nn.Module):
    """A mixture of experts whose gate weighs ``experts`` linear heads with ``F.softmax(gate, dim=-1)``:
    with one expert the gate is 1 whatever the input (the twin has four)."""

    def __init__(self, experts: int):
        super().__init__()
        self.gate = nn.Linear(64, experts)
        self.heads = nn.ModuleList(nn.Linear(64, 10) for _ in range(experts))

    def forward(self, x):
        g = F.softmax(self.gate(x), dim=-1)  # GATE
        return sum(g[:, i:i + 1] * head(x) for i, head in enumerate(self.heads))


def test_a_gate_over_one_expert_is_named_and_four_experts_are_silent():
    findings, text = _train(Experts(1), ce)
    assert slugs(findings) == ["singleton-axis"], text
    assert "softmax at " in text and f"{_line('# GATE')} works" in text and "(32, 1) tensor" in text, text
    findings, text = _train(Experts(4), ce)
    assert findings == [], text


class Direction(nn.Module):
    """An embedding normalised to unit length before a cosine classifier; one wide, only its sign is left."""

    def __init__(self, width: int):
        super().__init__()
        self.embed = nn.Linear(64, width)
        self.classes = nn.Parameter(torch.randn(10, width))

    def forward(self, x):
        z = F.normalize(self.embed(x), dim=1)  # NORMALIZE
        return 10 * z @ F.normalize(self.classes, dim=1).t()


def test_a_one_wide_embedding_normalised_is_named_and_a_wider_one_is_silent():
    findings, text = _train(Direction(1), ce)
    assert slugs(findings) == ["singleton-axis"], text
    assert "normalize at " in text and f"{_line('# NORMALIZE')} works" in text and "sign" in text, text
    findings, text = _train(Direction(8), ce)
    assert findings == [], text


def one_unit_ce(out, yb):
    return nn.CrossEntropyLoss()(out, (yb % 2).float().unsqueeze(1))  # ONE-UNIT-CE


def one_unit_bce(out, yb):
    return nn.BCEWithLogitsLoss()(out, (yb % 2).float().unsqueeze(1))


def test_one_output_unit_trained_by_cross_entropy_is_named_and_bce_is_silent():
    findings, text = _train(nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 1)), one_unit_ce)
    assert slugs(findings) == ["singleton-axis"], text
    assert "cross_entropy at " in text and f"{_line('# ONE-UNIT-CE')} works" in text, text
    assert "always 0" in text and "BCEWithLogitsLoss" in text, text
    findings, text = _train(nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 1)), one_unit_bce)
    assert findings == [], text


# -- evaluation: one output per sample read by an index --------------------------------------------------
def _evaluated(model: nn.Module, loss, predict, batches_seen: int = 4):
    """Train ``model`` with ``loss``, then evaluate it (``model.eval()``, no_grad) on the held-out digits,
    scoring ``predict(out)`` against the parity of the digit."""
    session = _session()
    try:
        train(model, torch.optim.Adam(model.parameters(), lr=1e-2), steps=6, loss_fn=loss)
        model.eval()
        correct = 0
        with torch.no_grad():
            for xb, yb in batches(50, batches_seen, start=40):
                correct += int((predict(model(xb)) == yb % 2).sum())
    finally:
        findings = session.close()
    return findings, session.options.stream.getvalue()


def _binary():
    return nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 1))


def bce(out, yb):
    return F.binary_cross_entropy_with_logits(out.squeeze(1), (yb % 2).float())


def _max_index(out):
    _, pred = torch.max(out, 1)  # MAX-INDEX
    return pred


def test_a_one_logit_classifier_read_by_max_indices_is_named_and_its_threshold_is_silent():
    findings, text = _evaluated(_binary(), bce, _max_index)
    assert slugs(findings) == ["singleton-axis"], text
    assert "max at " in text and f"{_line('# MAX-INDEX')} works" in text and "(out.squeeze(-1) > 0)" in text, text
    findings, text = _evaluated(_binary(), bce, lambda out: (out.squeeze(1) > 0).long())
    assert findings == [], text


def _argmax_method(out):
    return out.argmax(1)  # ARGMAX-METHOD


def test_a_one_logit_classifier_read_by_the_argmax_method_is_named():
    findings, text = _evaluated(_binary(), bce, _argmax_method)
    assert slugs(findings) == ["singleton-axis"], text
    assert "argmax at " in text and f"{_line('# ARGMAX-METHOD')} works" in text, text


def mse(out, yb):
    return F.mse_loss(out.squeeze(1), yb.float())


def _argmax(out):
    return torch.argmax(out, dim=1)  # ARGMAX-FUNCTION


def test_a_regression_output_read_by_argmax_is_named_and_its_rounding_is_silent():
    findings, text = _evaluated(_binary(), mse, _argmax)
    assert slugs(findings) == ["singleton-axis"], text
    assert "argmax at " in text and f"{_line('# ARGMAX-FUNCTION')} works" in text, text
    assert "always 0" in text and "(50, 1) tensor" in text, text
    findings, text = _evaluated(_binary(), mse, lambda out: out.squeeze(1).round().long())
    assert findings == [], text


# -- silent: a size-1 axis that is not the site's rule ----------------------------------------------------
class Ragged(nn.Module):
    """Attention over each sample's own tokens, one sample at a time: the first samples have one token,
    the later ones more (a site whose axis is sometimes of size 1 is generic)."""

    def __init__(self):
        super().__init__()
        self.score = nn.Linear(4, 1)
        self.head = nn.Linear(4, 10)

    def forward(self, x):
        pooled = []
        for i, row in enumerate(x):
            tokens = row.view(16, 4)[: 1 if i < 8 else 16]
            w = self.score(tokens).softmax(0)
            pooled.append((w * tokens).sum(0))
        return self.head(torch.stack(pooled))


class MaxOverTime(nn.Module):
    """A max-pool over a time axis that is one step long: the values are the input, the indices unread."""

    def __init__(self):
        super().__init__()
        self.body = nn.Linear(64, 16)
        self.head = nn.Linear(16, 10)

    def forward(self, x):
        h = self.body(x).unsqueeze(1)  # (B, 1, 16)
        values, _ = h.max(dim=1)
        return self.head(values)


def test_a_sometimes_singleton_site_and_unread_max_indices_are_silent():
    findings, text = _train(Ragged(), ce)
    assert findings == [], text
    findings, text = _train(MaxOverTime(), ce)
    assert findings == [], text


def test_one_sample_at_a_time_is_silent():
    """An argmax over a (1, 1) output holds one element: nothing tells a batch of one from the bug."""
    findings, text = _evaluated(_binary(), bce, lambda out: out[:1].argmax(1), batches_seen=MIN_CALLS + 1)
    assert findings == [], text
