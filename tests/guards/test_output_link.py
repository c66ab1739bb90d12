"""Evaluation reads a model's outputs as its training loss taught them (overt/guards/outputlink.py, issue 33
w134, w139, w146, w150): logits compared with 0.5 (logits-thresholded-as-probabilities), multi-label
sigmoid outputs softmaxed over their labels, or cross_entropy logits put through a sigmoid, then thresholded
(scores-activation-mismatch), an evaluation
loss that scores the index the training loss ignored (eval-loss-scores-ignored) and evaluation sums kept
in half precision (metric-summed-in-low-precision).  Real small runs on scikit-learn's digits and on a
Markov-chain language model; each planted bug in two forms, each with its correct twins."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from tests.conftest import TIMING
from tests.guards.helpers import digits, guarded, markov_tokens, mlp, slugs

# -- logits and multi-label scores ---------------------------------------------------------------


def _tags(n_tags: int, share: float) -> torch.Tensor:
    g = torch.Generator().manual_seed(1)
    of_digit = (torch.rand(10, n_tags, generator=g) < share).float()
    of_digit[of_digit.sum(1) == 0, 0] = 1.0
    return of_digit


def _multilabel(score, functional: bool = False, n_tags: int = 6, share: float = 0.35, epochs: int = 4,
                sigmoid_in_eval: bool = False):
    """A tagger trained with BCEWithLogits on the digits' tags; ``score(output, tags)`` is the evaluation."""
    x, y = digits()
    tags = _tags(n_tags, share)[y]
    model = mlp(hidden=64, out=n_tags)
    if sigmoid_in_eval:
        class Tagger(nn.Module):
            def __init__(self, body):
                super().__init__()
                self.body = body

            def forward(self, v):
                out = self.body(v)
                return out if self.training else torch.sigmoid(out)

        model = Tagger(model)
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    loss_fn = nn.BCEWithLogitsLoss()
    g = guarded(model, opt, ignore=TIMING)
    for epoch in range(epochs):
        model.train()
        for i in range(0, 1400, 64):
            opt.zero_grad()
            out = model(x[i:i + 64])
            t = tags[i:i + 64]
            loss = F.binary_cross_entropy_with_logits(out, t) if functional else loss_fn(out, t)
            loss.backward()
            opt.step()
    model.eval()
    with torch.no_grad():
        output = model(x[1400:])
        value = float(score(output, tags[1400:]))
    return g.report(), g.session.options.stream.getvalue(), value


def _f1(decisions: torch.Tensor, tags: torch.Tensor) -> torch.Tensor:
    tp = (decisions & (tags > 0.5)).sum(0).float()
    return (2 * tp / (decisions.sum(0) + (tags > 0.5).sum(0)).clamp(min=1)).mean()


def test_logits_compared_with_half_are_named_at_the_comparison():
    findings, text, f1 = _multilabel(lambda out, t: _f1(out > 0.5, t))
    assert slugs(findings) == ["logits-thresholded-as-probabilities"], text
    assert "test_output_link.py:" in findings[0].where
    _, _, twin = _multilabel(lambda out, t: _f1(torch.sigmoid(out) > 0.5, t))
    assert f1 < twin  # the bug loses recall


def test_logits_thresholded_in_another_form_binary_functional():
    # one logit per sample, trained through F.binary_cross_entropy_with_logits on a view (squeeze), compared
    # with torch.gt / a reflected comparison inside a hand-written metric
    def accuracy(out, tags):
        return (torch.gt(out.squeeze(1), 0.5) == (tags[:, 0] > 0.5)).float().mean()

    def reflected(out, tags):
        return ((0.5 <= out[:, 0]) == (tags[:, 0] > 0.5)).float().mean()

    for score in (accuracy, reflected):
        x, y = digits()
        target = (y % 2 == 0).float()
        model = mlp(out=1)
        opt = torch.optim.SGD(model.parameters(), lr=0.5)
        g = guarded(model, opt, ignore=TIMING)
        for epoch in range(3):
            for i in range(0, 1400, 50):
                opt.zero_grad()
                F.binary_cross_entropy_with_logits(model(x[i:i + 50]).squeeze(1), target[i:i + 50]).backward()
                opt.step()
        model.eval()
        with torch.no_grad():
            score(model(x[1400:]), target[1400:, None])
        findings = g.report()
        assert slugs(findings) == ["logits-thresholded-as-probabilities"], g.session.options.stream.getvalue()


def test_logits_rounded_to_decisions_are_named():
    findings, text, _ = _multilabel(lambda out, t: _f1(torch.round(out).clamp(0, 1).bool(), t))
    assert slugs(findings) == ["logits-thresholded-as-probabilities"], text
    assert "rounded" in findings[0].message
    findings, text, _ = _multilabel(lambda out, t: _f1(torch.round(torch.sigmoid(out)).bool(), t))
    assert findings == [], text  # rounding probabilities is the 0.5 threshold


def _two_class(score):
    """Even/odd digits through a two-logit head trained by cross_entropy."""
    x, y = digits()
    target = (y % 2 == 0).long()
    model = mlp(out=2)
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    g = guarded(model, opt, ignore=TIMING)
    for epoch in range(3):
        for i in range(0, 1400, 50):
            opt.zero_grad()
            F.cross_entropy(model(x[i:i + 50]), target[i:i + 50]).backward()
            opt.step()
    model.eval()
    with torch.no_grad():
        value = float(score(model(x[1400:]), target[1400:]))
    return g.report(), g.session.options.stream.getvalue(), value


def test_cross_entropy_logit_of_one_class_compared_with_half_is_named():
    findings, text, acc = _two_class(lambda out, t: ((out[:, 1] > 0.5).long() == t).float().mean())
    assert slugs(findings) == ["logits-thresholded-as-probabilities"], text
    assert "cross_entropy" in findings[0].message
    # the same outputs through a sigmoid per class (as if the classes were independent labels)
    findings, text, _ = _two_class(lambda out, t: ((torch.sigmoid(out)[:, 1] > 0.5).long() == t).float().mean())
    assert slugs(findings) == ["scores-activation-mismatch"], text
    assert "sigmoid" in findings[0].message and "cross_entropy" in findings[0].message
    for score in (lambda out, t: ((F.softmax(out, dim=1)[:, 1] > 0.5).long() == t).float().mean(),
                  lambda out, t: (torch.sigmoid(out).argmax(1) == t).float().mean(),  # the order, not a threshold
                  lambda out, t: (out.argmax(1) == t).float().mean()):
        findings, text, twin = _two_class(score)
        assert findings == [], text


def test_segmentation_mask_logits_thresholded_are_named():
    # another domain: a per-pixel mask (the digit's ink) from a noisy 8x8 image, a conv net, Dice at 0.5
    x, _ = digits()
    g0 = torch.Generator().manual_seed(2)
    images = x.reshape(-1, 1, 8, 8)
    masks = (images > 0.3).float()
    noisy = images + 0.3 * torch.randn(images.shape, generator=g0)

    def dice(pred, mask):
        return (2 * (pred * mask).sum() / (pred.sum() + mask.sum()).clamp(min=1)).item()

    for bug in (True, False):
        torch.manual_seed(0)
        model = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 1, 3, padding=1))
        opt = torch.optim.Adam(model.parameters(), lr=1e-2)
        g = guarded(model, opt, ignore=TIMING)
        for i in range(0, 1400, 50):
            opt.zero_grad()
            F.binary_cross_entropy_with_logits(model(noisy[i:i + 50]), masks[i:i + 50]).backward()
            opt.step()
        model.eval()
        with torch.no_grad():
            logits = model(noisy[1400:])
            pred = (logits > 0.5).float() if bug else (torch.sigmoid(logits) > 0.5).float()
            dice(pred, masks[1400:])
        findings = g.report()
        assert slugs(findings) == (["logits-thresholded-as-probabilities"] if bug else []), \
            g.session.options.stream.getvalue()


def test_thresholds_that_read_the_logits_rightly_are_quiet():
    for score in (lambda out, t: _f1(torch.sigmoid(out) > 0.5, t),   # the sigmoid first
                  lambda out, t: _f1(out > 0, t),                     # the logit's own threshold
                  lambda out, t: _f1(out.sigmoid_() > 0.5, t)):       # in place: values now in [0, 1]
        findings, text, _ = _multilabel(score)
        assert findings == [], text
    # a model that applies the sigmoid itself in eval mode: its outputs are probabilities there
    findings, text, _ = _multilabel(lambda out, t: _f1(out > 0.5, t), sigmoid_in_eval=True)
    assert findings == [], text


class _F1:
    """A metric object written by hand in torchmetrics' style: update(preds, target), compute()."""

    def __init__(self, threshold: float = 0.5):
        self.threshold, self.tp, self.fp, self.fn = threshold, 0.0, 0.0, 0.0

    def update(self, preds: torch.Tensor, target: torch.Tensor) -> None:
        hard = preds >= self.threshold
        self.tp += float((hard & (target > 0.5)).sum())
        self.fp += float((hard & (target < 0.5)).sum())
        self.fn += float((~hard & (target > 0.5)).sum())

    def compute(self) -> float:
        return 2 * self.tp / max(2 * self.tp + self.fp + self.fn, 1.0)


def test_a_metric_object_given_logits_is_named():
    def hand_written(out, tags):
        metric = _F1()
        metric.update(out, tags)
        return metric.compute()

    findings, text, _ = _multilabel(hand_written)
    assert slugs(findings) == ["logits-thresholded-as-probabilities"], text
    assert "test_output_link.py:" in findings[0].where  # the comparison inside update()


@pytest.mark.slow  # (importing torchmetrics)
def test_torchmetrics_given_logits_is_quiet():
    from torchmetrics.classification import MultilabelF1Score

    def library(out, tags):  # torchmetrics applies the sigmoid itself to values outside [0, 1]
        metric = MultilabelF1Score(num_labels=tags.shape[1], threshold=0.5)
        metric.update(out, tags.long())
        return metric.compute()

    findings, text, _ = _multilabel(library)
    assert findings == [], text


def test_outputs_trained_by_another_loss_compared_with_half_are_quiet():
    x, y = digits()
    target = (y.float() / 9.0)[:, None]  # a regression onto [0, 1]: 0.5 is a value of the target itself
    model = mlp(out=1)
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    g = guarded(model, opt, ignore=TIMING)
    for i in range(0, 1400, 50):
        opt.zero_grad()
        F.mse_loss(model(x[i:i + 50]), target[i:i + 50]).backward()
        opt.step()
    model.eval()
    with torch.no_grad():
        (model(x[1400:]) > 0.5).float().mean()
    assert g.report() == [], g.session.options.stream.getvalue()


def test_multilabel_scores_softmaxed_then_thresholded_are_named():
    findings, text, f1 = _multilabel(lambda out, t: _f1(F.softmax(out, dim=1) > 0.5, t))
    assert slugs(findings) == ["scores-activation-mismatch"], text
    assert "test_output_link.py:" in findings[0].where
    _, _, twin = _multilabel(lambda out, t: _f1(torch.sigmoid(out) > 0.5, t))
    assert f1 < twin
    # the tensor method, functional training, another threshold
    findings, text, _ = _multilabel(lambda out, t: _f1(out.softmax(-1) >= 0.3, t), functional=True)
    assert slugs(findings) == ["scores-activation-mismatch"], text


def test_softmax_kept_for_ranking_or_on_single_label_targets_is_quiet():
    # the top label of each sample: a softmax keeps the sigmoid's order within a row
    findings, text, _ = _multilabel(lambda out, t: F.softmax(out, dim=1).argmax(1).float().mean())
    assert findings == [], text
    # one positive label per row (one-hot targets): nothing proves the labels are independent
    findings, text, _ = _multilabel(lambda out, t: _f1(F.softmax(out, dim=1) > 0.5, t), n_tags=10, share=0.0)
    assert findings == [], text


# -- an evaluation loss over what training ignored -------------------------------------------------

PAD = 0


class _LM(nn.Module):
    def __init__(self, vocab: int):
        super().__init__()
        torch.manual_seed(0)
        self.emb = nn.Embedding(vocab, 16)
        self.rnn = nn.GRU(16, 32, batch_first=True)
        self.out = nn.Linear(32, vocab)

    def forward(self, s):
        return self.out(self.rnn(self.emb(s))[0])


def _padded(n: int, seed: int, vocab: int = 9) -> torch.Tensor:
    """Markov sequences over the tokens 1..vocab-1, right-padded with PAD to 24 (lengths 6-24)."""
    seq = markov_tokens(n, seed, vocab=vocab - 1) + 1
    lengths = torch.randint(6, 25, (n,), generator=torch.Generator().manual_seed(seed + 1))
    seq[torch.arange(24)[None, :] >= lengths[:, None]] = PAD
    return seq


def _perplexity(evaluate, module_loss: bool = False):
    vocab = 9
    data, held = _padded(320, 0), _padded(64, 5)
    model = _LM(vocab)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    train_loss = nn.CrossEntropyLoss(ignore_index=PAD) if module_loss else None
    g = guarded(model, opt, ignore=TIMING)
    for epoch in range(3):
        model.train()
        for s in data.split(32):
            opt.zero_grad()
            logits, labels = model(s[:, :-1]).reshape(-1, vocab), s[:, 1:].reshape(-1)
            loss = train_loss(logits, labels) if module_loss else F.cross_entropy(logits, labels, ignore_index=PAD)
            loss.backward()
            opt.step()
    model.eval()
    with torch.no_grad():
        value = evaluate(model, held, vocab)
    return g.report(), g.session.options.stream.getvalue(), value


def _eval_all_positions(model, held, vocab):
    total, count = 0.0, 0
    for s in held.split(16):
        logits, labels = model(s[:, :-1]).reshape(-1, vocab), s[:, 1:].reshape(-1)
        total += F.cross_entropy(logits, labels, reduction="sum").item()
        count += labels.numel()
    return math.exp(total / count)


def _eval_text_only(model, held, vocab):
    total, count = 0.0, 0
    for s in held.split(16):
        logits, labels = model(s[:, :-1]).reshape(-1, vocab), s[:, 1:].reshape(-1)
        total += F.cross_entropy(logits, labels, reduction="sum", ignore_index=PAD).item()
        count += int((labels != PAD).sum())
    return math.exp(total / count)


def test_evaluation_loss_scoring_the_ignored_padding_is_named():
    findings, text, ppl = _perplexity(_eval_all_positions)
    assert slugs(findings) == ["eval-loss-scores-ignored"], text
    assert "test_output_link.py:" in findings[0].where
    _, _, twin = _perplexity(_eval_text_only)
    assert abs(ppl - twin) > 0.1


def test_evaluation_loss_module_without_ignore_index_is_named():
    def evaluate(model, held, vocab):  # a module loss, a mean per batch (a validation loss)
        criterion = nn.CrossEntropyLoss()
        return sum(criterion(model(s[:, :-1]).transpose(1, 2), s[:, 1:]).item() for s in held.split(16))

    findings, text, _ = _perplexity(evaluate, module_loss=True)
    assert slugs(findings) == ["eval-loss-scores-ignored"], text


def test_evaluation_losses_that_leave_the_padding_out_are_quiet():
    findings, text, _ = _perplexity(_eval_text_only)
    assert findings == [], text

    def masked(model, held, vocab):  # per-position losses, masked by hand
        total, count = 0.0, 0
        for s in held.split(16):
            labels = s[:, 1:]
            each = F.cross_entropy(model(s[:, :-1]).transpose(1, 2), labels, reduction="none")
            total += float((each * (labels != PAD)).sum())
            count += int((labels != PAD).sum())
        return math.exp(total / count)

    findings, text, _ = _perplexity(masked, module_loss=True)
    assert findings == [], text


# -- evaluation sums kept in half precision --------------------------------------------------------


def _trained_classifier():
    """(x, y, model in eval mode, its guard): a digits classifier trained on the first 800 digits."""
    x, y = digits()
    model = mlp(hidden=64)
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    g = guarded(model, opt, ignore=TIMING)
    for i in range(0, 800, 32):
        opt.zero_grad()
        F.cross_entropy(model(x[i:i + 32]), y[i:i + 32]).backward()
        opt.step()
    model.eval()
    return x, y, model, g


def _accuracy_sum(dtype: torch.dtype, n: int = 997, method: bool = False):
    x, y, model, g = _trained_classifier()
    correct = torch.zeros((), dtype=dtype)
    with torch.no_grad():
        for j in range(800, 800 + n, 8):
            hits = (model(x[j:j + 8]).argmax(1) == y[j:j + 8]).sum().to(dtype)
            if method:
                correct.add_(hits)
            else:
                correct += hits
    accuracy = float(correct) / len(range(800, 800 + n))
    return g.report(), g.session.options.stream.getvalue(), accuracy


def test_evaluation_count_in_bfloat16_is_named():
    findings, text, acc = _accuracy_sum(torch.bfloat16)
    assert slugs(findings) == ["metric-summed-in-low-precision"], text
    assert "test_output_link.py:" in findings[0].where
    _, _, real = _accuracy_sum(torch.float32)
    assert abs(acc - real) > 0.01  # the reported accuracy is not the real one
    findings, text, _ = _accuracy_sum(torch.bfloat16, method=True)  # Tensor.add_
    assert slugs(findings) == ["metric-summed-in-low-precision"], text


def test_evaluation_loss_total_in_float16_is_named():
    x, y, model, g = _trained_classifier()
    total = torch.zeros((), dtype=torch.float16)
    with torch.no_grad():
        for j in range(800, 1797):  # one sample at a time: a total of about a thousand small terms
            term = F.cross_entropy(model(x[j:j + 1]), y[j:j + 1]).half() + 3.0
            total.add_(term)  # overt: ignore[metric-summed-in-low-precision] (planted)
    assert slugs(g.report()) == ["metric-summed-in-low-precision"], g.session.options.stream.getvalue()


def test_sums_in_float32_or_small_half_precision_counts_are_quiet():
    findings, text, _ = _accuracy_sum(torch.float32)
    assert findings == [], text
    findings, text, _ = _accuracy_sum(torch.bfloat16, n=200)  # at most 200: exact in bfloat16
    assert findings == [], text
    findings, text, _ = _accuracy_sum(torch.float16, method=True)  # at most 997: exact in float16 (to 2048)
    assert findings == [], text
