"""Labels and losses consistent with the data (issue 33, families 4 and 5): class weights against
the label frequencies, sequence targets against the inputs, labels against the inputs.  Each
planted bug beside its clean twin, on real small runs (digits, a Markov-chain language model)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from tests.conftest import TIMING
from tests.guards.helpers import digits, guarded, markov_tokens, slugs

# -- class-weights-inverted -----------------------------------------------------------------


def _is_nine(weights: list[float] | None, steps: int = 12, dense: bool = False):
    """Is the digit a 9 (10% of the data)?  CrossEntropyLoss with the given class weights
    (``dense``: as a per-position target, logits (N, 2, 1) against labels (N, 1), as in segmentation)."""
    torch.manual_seed(0)
    x, y = digits()
    y = (y == 9).long()
    model = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 2))
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    g = guarded(model, opt, ignore=TIMING)
    loss_fn = nn.CrossEntropyLoss(weight=torch.tensor(weights) if weights else None)
    for i in range(steps):
        xb, yb = x[64 * i:64 * (i + 1)], y[64 * i:64 * (i + 1)]
        opt.zero_grad()
        out = model(xb)
        if dense:
            out, yb = out[:, :, None], yb[:, None]
        loss_fn(out, yb).backward()
        opt.step()
    return g.report(), g.session.options.stream.getvalue()


@pytest.mark.parametrize("dense", [False, True])
def test_class_weights_listed_against_the_label_frequencies_are_named(dense):
    findings, text = _is_nine([1 / 0.1, 1 / 0.9], dense=dense)  # the frequent class 0 weighted up: reversed
    assert slugs(findings) == ["class-weights-inverted"], text
    assert "class 0 (" in text and "weighs 10" in text and "test_data_invariants.py:" in text


@pytest.mark.parametrize("weights", [[1 / 0.9, 1 / 0.1], None, [1.0, 1.0]])
def test_class_weights_in_label_order_or_none_are_silent(weights):
    findings, text = _is_nine(weights)
    assert findings == [], text


@pytest.mark.parametrize("pos_weight", [0.11, 9.0])
def test_an_inverted_pos_weight_is_named(pos_weight):
    torch.manual_seed(0)
    x, y = digits()
    model = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 1))
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    g = guarded(model, opt, ignore=TIMING)
    loss_fn = nn.BCEWithLogitsLoss(pos_weight=torch.tensor([pos_weight]))
    for i in range(12):
        xb, yb = x[64 * i:64 * (i + 1)], (y[64 * i:64 * (i + 1)] == 9).float()[:, None]
        opt.zero_grad()
        loss_fn(model(xb), yb).backward()
        opt.step()
    findings = g.report()
    text = g.session.options.stream.getvalue()
    assert slugs(findings) == (["class-weights-inverted"] if pos_weight < 1 else []), text


# -- sequence-targets-misaligned ------------------------------------------------------------

V, T = 8, 24
_chain = markov_tokens


class _LM(nn.Module):
    """A GRU language model with the Hugging Face convention: the loss shifts the labels itself."""

    def __init__(self, bidirectional: bool = False):
        super().__init__()
        self.embed = nn.Embedding(V, 16)
        self.gru = nn.GRU(16, 16, batch_first=True, bidirectional=bidirectional)
        self.head = nn.Linear(32 if bidirectional else 16, V)

    def forward(self, ids, labels=None):
        logits = self.head(self.gru(self.embed(ids))[0])
        loss = None
        if labels is not None:
            loss = F.cross_entropy(logits[:, :-1].reshape(-1, V), labels[:, 1:].reshape(-1), ignore_index=-100)
        return loss, logits


def _lm(variant: str, bidirectional: bool = False):
    torch.manual_seed(0)
    model = _LM(bidirectional)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    g = guarded(model, opt, ignore=TIMING)
    data = _chain(320, 1)
    for i in range(8):
        ids = data[40 * i:40 * (i + 1)]
        if variant == "shifted-twice":  # the caller shifts, and the model's loss shifts again
            loss, _ = model(ids, labels=torch.cat([ids[:, 1:], torch.full((len(ids), 1), -100)], 1))
        elif variant == "labels=ids":
            loss, _ = model(ids, labels=ids)
        elif variant == "no-shift":  # the targets are the inputs: the model sees what it predicts
            _, logits = model(ids)
            loss = F.cross_entropy(logits.reshape(-1, V), ids.reshape(-1))
        elif variant in ("shift-reversed", "delay-3"):  # logits[:, k:] scored against ids[:, :-k]: a past token
            k = 1 if variant == "shift-reversed" else 3
            _, logits = model(ids)
            loss = F.cross_entropy(logits[:, k:].reshape(-1, V), ids[:, :-k].reshape(-1))
        else:  # nanoGPT's x/y pairs: y is x one position later
            x, y = ids[:, :-1], ids[:, 1:]
            _, logits = model(x)
            loss = F.cross_entropy(logits.reshape(-1, V), y.reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
    return g.report(), g.session.options.stream.getvalue()


def test_labels_shifted_twice_are_named():
    findings, text = _lm("shifted-twice")
    assert slugs(findings) == ["sequence-targets-misaligned"], text
    assert "shifted by 2 positions" in text and "test_data_invariants.py:" in text


def test_targets_equal_to_the_inputs_of_a_causal_model_are_named():
    findings, text = _lm("no-shift")
    assert slugs(findings) == ["sequence-targets-misaligned"], text
    assert "the inputs themselves" in text


def test_a_shift_made_the_wrong_way_is_named():
    findings, text = _lm("shift-reversed")
    assert slugs(findings) == ["sequence-targets-misaligned"], text
    assert "the inputs 1 position(s) back" in text


@pytest.mark.parametrize("variant", ["labels=ids", "x/y", "delay-3"])
def test_next_token_targets_are_silent(variant):
    """Next-token targets; and a recall task that scores each position against the token three back (w336's
    twin, session 51): a delay by design, which no slip of a shift gives."""
    findings, text = _lm(variant)
    assert findings == [], text


def test_a_model_not_proven_causal_is_left_alone():
    """A bidirectional model (an autoencoder through a bottleneck looks the same): what an output
    may see is not known, so no target offset is judged."""
    findings, text = _lm("no-shift", bidirectional=True)
    assert "sequence-targets-misaligned" not in slugs(findings), text


# -- labels-unrelated-to-inputs ---------------------------------------------------------------


def _digits_run(labels: str, lr: float = 1e-2, epochs: int = 3, **kw):
    torch.manual_seed(0)
    x, y = digits()
    x, y = x[:1408], y[:1408]
    if labels == "misaligned":  # the label array shuffled on its own, apart from the inputs
        y = y[torch.randperm(len(y), generator=torch.Generator().manual_seed(1))]
    model = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10))
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    g = guarded(model, opt, ignore=TIMING, **kw)
    loader = DataLoader(TensorDataset(x, y), batch_size=64, shuffle=True)
    for _ in range(epochs):
        for xb, yb in loader:
            opt.zero_grad()
            F.cross_entropy(model(xb), yb).backward()
            opt.step()
    return g.report(), g.session.options.stream.getvalue()


def test_labels_paired_with_other_inputs_are_named():
    findings, text = _digits_run("misaligned")
    assert "labels-unrelated-to-inputs" in slugs(findings), text
    assert "nearest neighbour" in text and "test_data_invariants.py:" in text


def test_labels_that_belong_to_their_inputs_are_silent():
    findings, text = _digits_run("aligned")
    assert findings == [], text


def test_a_run_shorter_than_two_epochs_is_not_judged():
    """One epoch: the model may still be at the start of learning (the loss near the label
    entropy for a legitimate reason), so the labels are not judged."""
    findings, text = _digits_run("misaligned", epochs=1, check_every=5)  # checked steps up to 20
    assert "labels-unrelated-to-inputs" not in slugs(findings), text


def test_a_model_that_cannot_learn_correct_labels_is_not_blamed_on_the_labels():
    """A learning rate far too small keeps the loss at the label entropy too; the labels still
    follow the inputs (neighbours share them), so this check stays silent."""
    findings, text = _digits_run("aligned", lr=1e-7)
    assert "labels-unrelated-to-inputs" not in slugs(findings), text
