"""mc-samples-identical (issue 33: the samples of a Monte Carlo estimate differ): Monte Carlo dropout passes drawn
with the model in eval mode.  Planted bugs of different forms (a list comprehension under no_grad, a for loop with
gradients on, a generator into torch.stack, a module class with functional dropout) and clean twins, on digits."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from tests.conftest import TIMING
from tests.guards.helpers import digits, guarded, mlp, slugs, train


class FunctionalDropoutNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(64, 32)
        self.drop = nn.Dropout(0.3)  # registered, so the guards know the model has dropout
        self.fc2 = nn.Linear(32, 10)

    def forward(self, x):
        return self.fc2(self.drop(F.relu(self.fc1(x))))


class NoisyLatent(nn.Module):
    """Samples a latent in every mode (a VAE's reparameterisation): its passes differ in eval mode too."""

    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(64, 32)
        self.drop = nn.Dropout(0.2)
        self.fc2 = nn.Linear(32, 10)

    def forward(self, x):
        h = self.drop(F.relu(self.fc1(x)))
        return self.fc2(h + torch.randn_like(h))


def _trained(model):
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    g = guarded(model, opt, ignore=TIMING)
    train(model, opt, steps=15)
    return g


def _comprehension(model, x, mc):
    model.eval()
    if mc:
        for m in model.modules():
            if isinstance(m, nn.Dropout):
                m.train()
    with torch.no_grad():
        return torch.stack([F.softmax(model(x), dim=1) for _ in range(10)]).var(0)


def _for_loop(model, x, mc):
    model.eval()
    if mc:
        model.apply(lambda m: m.train() if isinstance(m, nn.Dropout) else None)
    outs = []
    for _ in range(8):
        outs.append(model(x).detach())  # gradients on: an evaluation forward of a model in eval mode
    return torch.stack(outs).std(0)


def _generator(model, x, mc):
    model.train(False)  # eval mode, spelled the other way
    if mc:
        for m in model.modules():
            if isinstance(m, nn.Dropout):
                m.train()
    with torch.inference_mode():
        return torch.stack(tuple(model(x) for _ in range(5))).var(0)


FORMS = {"comprehension": (_comprehension, lambda: mlp(dropout=0.5)),
         "for-loop": (_for_loop, lambda: mlp(dropout=0.3)),
         "generator": (_generator, lambda: mlp(dropout=0.5)),
         "module-class": (_comprehension, FunctionalDropoutNet)}


@pytest.mark.parametrize("form", sorted(FORMS))
@pytest.mark.parametrize("mc", [False, True])
def test_monte_carlo_dropout_passes(form, mc):
    sample, build = FORMS[form]
    torch.manual_seed(0)
    model = build()
    g = _trained(model)
    x, _ = digits()
    spread = sample(model, x[1400:1500], mc)
    findings = [f for f in g.report() if f.slug != "graph-in-eval"]  # the for-loop form keeps autograd on: true
    text = g.session.options.stream.getvalue()
    if mc:
        assert float(spread.sum()) > 0
        assert findings == [], text
    else:
        assert float(spread.sum()) == 0  # the bug: every pass is the same
        assert slugs(findings) == ["mc-samples-identical"], text
        assert "test_mc_samples.py:" in text and "3 times in a row on the same input tensor" in text


def test_a_model_that_samples_in_eval_mode_is_not_reported():
    """Passes that differ for another reason (a latent drawn in forward) are a real Monte Carlo estimate."""
    torch.manual_seed(0)
    model = NoisyLatent()
    g = _trained(model)
    x, _ = digits()
    _comprehension(model, x[1400:1500], mc=False)
    assert g.report() == [], g.session.options.stream.getvalue()


def test_an_ordinary_evaluation_is_not_reported():
    """Batches of an evaluation pass, one forward each; and one input run three times from three different
    call expressions (a prediction, a loss, a metric: wasteful, not sampling)."""
    torch.manual_seed(0)
    model = mlp(dropout=0.5)
    g = _trained(model)
    x, y = digits()
    model.eval()
    with torch.no_grad():
        for i in range(1400, 1790, 64):
            model(x[i:i + 64])
        xb = x[1400:1464]
        preds = model(xb).argmax(1)
        loss = F.cross_entropy(model(xb), y[1400:1464])
        probs = model(xb).softmax(1)
    assert preds.shape == probs.shape[:1] and loss.item() > 0
    assert g.report() == [], g.session.options.stream.getvalue()


def test_a_model_without_dropout_is_not_reported():
    """Repeated passes of a model without dropout are no Monte Carlo dropout (a timing loop, say)."""
    torch.manual_seed(0)
    model = mlp()
    g = _trained(model)
    x, _ = digits()
    _comprehension(model, x[1400:1500], mc=False)
    assert g.report() == [], g.session.options.stream.getvalue()
