"""eval-classes-renumbered at run time (overt/guards/labelmap.py via predshape.py; issue 33, w124): a
classifier trained on class indices, scored in evaluation against labels numbered by another map, is named
at the comparison's line, whatever renumbered them (classes listed per split, an encoder fitted again,
1-based labels, a reversed class list).  Correct labels, a model that merely confuses two classes, a model
trained without class indices, and too few evaluated samples stay quiet."""

from __future__ import annotations

import torch
from torch import nn

from tests.conftest import TIMING
from tests.guards.helpers import digits, guarded, mlp, slugs, train
from overt.guards.labelmap import reindexed


def _run(relabel, *, steps: int = 120, loss_fn=None, score=None, val_n: int = 297):
    """Train an MLP on digits (guarded), then score it on the validation samples against
    ``relabel(y)``; returns (findings, printed text, accuracy)."""
    model = mlp()
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    g = guarded(model, opt, ignore=TIMING)
    train(model, opt, steps=steps, loss_fn=loss_fn)
    x, y = digits()
    xv, yv = x[1500:1500 + val_n], relabel(y[1500:1500 + val_n])
    model.eval()
    correct = 0
    with torch.no_grad():
        for i in range(0, len(xv), 64):
            out = model(xv[i:i + 64])
            correct += int((score or (lambda o, t: (o.argmax(1) == t).sum()))(out, yv[i:i + 64]))
    model.train()
    return g.report(), g.session.options.stream.getvalue(), correct / len(xv)


def test_labels_listed_per_split_without_one_class_are_named_at_the_comparison():
    # w124's mechanism: the evaluation split lacks class 3, so every class after it is one index lower
    def per_split(y):
        names = sorted(set(y.tolist()) - {3})
        index = {c: i for i, c in enumerate(names)}
        return torch.tensor([index.get(int(c), 0) for c in y])

    findings, text, acc = _run(per_split)
    assert slugs(findings) == ["eval-classes-renumbered"], text
    f = findings[0]
    assert "test_label_map.py:" in f.where and "renumbered" in f.message
    assert "label 4 is predicted as 5" in f.message or "label 5 is predicted as 6" in f.message
    assert acc < 0.5


def test_a_label_encoder_fitted_again_on_the_evaluation_data_is_named():
    from sklearn.preprocessing import LabelEncoder

    def refit(y):  # the evaluation data's own encoder, fitted where classes 0 and 1 are absent
        names = [f"class-{int(c) + 2}" for c in y]  # 2..11 as names: the encoder sorts them as strings
        return torch.tensor(LabelEncoder().fit_transform(names))

    findings, text, _ = _run(refit)
    assert slugs(findings) == ["eval-classes-renumbered"], text


def test_one_based_labels_and_a_reversed_class_list_are_named_with_eq():
    findings, text, _ = _run(lambda y: y + 1, score=lambda o, t: torch.eq(o.argmax(dim=1), t).sum())
    assert slugs(findings) == ["eval-classes-renumbered"], text
    findings, text, _ = _run(lambda y: 9 - y, score=lambda o, t: o.argmax(1).eq(t).sum())
    assert slugs(findings) == ["eval-classes-renumbered"], text


def test_correct_labels_are_quiet():
    findings, text, acc = _run(lambda y: y)
    assert findings == [], text
    assert acc > 0.85


def test_a_model_that_confuses_two_classes_is_quiet():
    # trained with classes 3 and 5 merged: it predicts 3 for both; the labels are numbered correctly
    def merged(out, target):
        return nn.functional.cross_entropy(out, torch.where(target == 5, torch.full_like(target, 3), target))

    findings, text, _ = _run(lambda y: y, loss_fn=merged)
    assert findings == [], text


def test_no_class_index_training_or_too_few_samples_is_quiet():
    # trained without class-index targets (a regression on one-hot vectors): its argmax indices are not
    # known to be the labels' numbering
    def one_hot_mse(out, target):
        return nn.functional.mse_loss(out, nn.functional.one_hot(target, 10).float())

    findings, text, _ = _run(lambda y: y + 1, loss_fn=one_hot_mse)
    assert findings == [], text
    findings, text, _ = _run(lambda y: y + 1, val_n=24)  # under 32 pairs: nothing concluded
    assert findings == [], text


def test_a_small_tabular_split_renumbered_is_named():
    # 40 evaluated samples (a small test split): concluded when the renumbered accuracy is 0.8 or more
    findings, text, _ = _run(lambda y: y + 1, val_n=40)
    assert slugs(findings) == ["eval-classes-renumbered"], text


def test_reindexed_reads_the_confusion_counts():
    y = torch.arange(10).repeat(20)
    assert reindexed(y, y) is None
    shifted = reindexed(y, (y + 1) % 10)
    assert shifted is not None and shifted.as_given == 0.0 and shifted.relabelled == 1.0
    assert len(shifted.moved) == 10
    # one swapped pair in a mostly right model: the gain stays under the threshold
    swapped = y.clone()
    swapped[y == 2], swapped[y == 7] = 7, 2
    assert reindexed(y, swapped) is None
    # random predictions: no relabelling scores well
    g = torch.Generator().manual_seed(0)
    assert reindexed(torch.randint(10, (500,), generator=g), torch.randint(10, (500,), generator=g)) is None


def test_two_classes_predicted_at_random_never_read_as_renumbered():
    """Swapping two labels doubles chance's tries: binary predictions drawn independently of the labels,
    64-127 pairs, concluded about once in a hundred draws before the chance bound (57 of 6,000); none now,
    while a swapped binary model still is."""
    g = torch.Generator().manual_seed(7)
    for _ in range(1500):
        n = int(torch.randint(64, 128, (1,), generator=g))
        preds, labels = torch.randint(0, 2, (n,), generator=g), torch.randint(0, 2, (n,), generator=g)
        assert reindexed(preds, labels) is None
    labels = torch.randint(0, 2, (64,), generator=g)
    preds = labels.clone()
    preds[:6] = 1 - preds[:6]  # 58 of 64 right before the swap
    found = reindexed(1 - preds, labels)
    assert found is not None and found.relabelled > 0.9 and found.as_given < 0.1
