"""logits-bounded at run time (issue 33, round thirteen's w308): a classification loss whose logits are bounded
by construction (cosine similarities, a tanh) cannot reach its minimum.  Planted bugs on digits -- InfoNCE
without its temperature, a cosine classifier without its scale, tanh logits, NLL on the log-softmax of cosine
logits, BCE with logits on a pair's cosine -- and their twins (a temperature, a fixed scale, a learnable CLIP-style
scale, an ArcFace-style margin with a scale, plain linear logits, label smoothing on the cosine logits)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from tests.guards.helpers import digits, guarded_run, slugs

SLUG = "logits-bounded"


class CosineClassifier(nn.Module):
    """An MLP embedding scored against normalised class prototypes; ``scale``: None (the bug), a number, or
    "learn" (a learnable log-scale, CLIP's form)."""

    def __init__(self, scale=None, margin: float = 0.0):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 32))
        self.proto = nn.Parameter(torch.randn(10, 32))
        self.scale, self.margin = scale, margin
        self.log_scale = nn.Parameter(torch.tensor(2.7)) if scale == "learn" else None

    def forward(self, x, y=None):
        cos = F.normalize(self.body(x), dim=1) @ F.normalize(self.proto, dim=1).t()
        if self.margin and y is not None:  # CosFace-style additive margin on the target class
            cos = cos - self.margin * F.one_hot(y, 10).float()
        if self.scale is None:
            return cos
        if self.scale == "learn":
            return self.log_scale.exp() * cos
        return self.scale * cos


def _classifier(scale=None, steps: int = 40, margin: float = 0.0, nll: bool = False, smoothing: float = 0.0):
    x, y = digits()

    def train():
        torch.manual_seed(0)
        model = CosineClassifier(scale, margin)
        opt = torch.optim.Adam(model.parameters(), lr=1e-2)
        for step in range(steps):
            i = (step * 64) % 1344
            xb, yb = x[i:i + 64], y[i:i + 64]
            out = model(xb, yb)
            if nll:
                loss = F.nll_loss(F.log_softmax(out, 1), yb)
            else:
                loss = F.cross_entropy(out, yb, label_smoothing=smoothing)
            opt.zero_grad()
            loss.backward()
            opt.step()

    return guarded_run(train)


def _infonce(tem=None, steps: int = 30):
    x, y = digits()
    by_class = [torch.nonzero(y[:1400] == c).flatten() for c in range(10)]

    def train():
        torch.manual_seed(0)
        model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 16))
        opt = torch.optim.Adam(model.parameters(), lr=1e-3)
        for _ in range(steps):
            c = int(torch.randint(0, 10, ()))
            a = by_class[c][torch.randint(0, len(by_class[c]), (32,))]
            p = by_class[c][torch.randint(0, len(by_class[c]), (32,))]
            n = torch.randint(0, 1400, (128,))
            q, k, kn = (F.normalize(model(x[i] + 0.1 * torch.randn(len(i), 64)), dim=1) for i in (a, p, n))
            logits = torch.cat([(q * k).sum(1, keepdim=True), q @ kn.t()], 1)
            if tem is not None:
                logits = logits / tem
            loss = F.cross_entropy(logits, torch.zeros(32, dtype=torch.long))
            opt.zero_grad()
            loss.backward()
            opt.step()

    return guarded_run(train)


def _tanh(bug: bool, steps: int = 30):
    x, y = digits()

    def train():
        torch.manual_seed(0)
        model = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10))
        opt = torch.optim.Adam(model.parameters(), lr=1e-2)
        for step in range(steps):
            i = (step * 64) % 1344
            out = model(x[i:i + 64])
            loss = F.cross_entropy(torch.tanh(out) if bug else out, y[i:i + 64])
            opt.zero_grad()
            loss.backward()
            opt.step()

    return guarded_run(train)


def _siamese(scale=None, steps: int = 30):
    """Pairs of digits scored by the cosine of their embeddings, same class or not, with BCE on logits."""
    x, y = digits()

    def train():
        torch.manual_seed(0)
        model = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 16))
        opt = torch.optim.Adam(model.parameters(), lr=1e-3)
        for _ in range(steps):
            i, j = torch.randint(0, 1400, (64,)), torch.randint(0, 1400, (64,))
            cos = F.cosine_similarity(model(x[i]), model(x[j]), dim=1)
            logit = cos if scale is None else scale * cos
            loss = F.binary_cross_entropy_with_logits(logit, (y[i] == y[j]).float())
            opt.zero_grad()
            loss.backward()
            opt.step()

    return guarded_run(train)


def _one(findings) -> dict:
    found = [f for f in findings if f.slug == SLUG]
    assert len(found) == 1, slugs(findings)
    return found[0]


def test_infonce_without_temperature_is_named_with_its_floor():
    f = _one(_infonce()[0])
    assert "F.cross_entropy" in f.message and "cosine similarities" in f.message
    assert "129 classes" in f.message and "2.91" in f.message  # log(1 + 128 e^-2)
    assert "logits = torch.cat(" in f.message  # the line that made the logits
    assert "temperature" in f.fix


def test_infonce_with_temperature_is_silent():
    assert SLUG not in slugs(_infonce(tem=0.1)[0])


def test_cosine_classifier_without_scale_is_named():
    f = _one(_classifier()[0])
    assert "10 classes" in f.message and "0.80" in f.message


def test_nll_on_log_softmax_of_cosine_logits_is_named():
    assert SLUG in slugs(_classifier(nll=True)[0])


def test_scaled_cosine_classifiers_are_silent():
    assert SLUG not in slugs(_classifier(scale=16.0)[0])
    assert SLUG not in slugs(_classifier(scale="learn")[0])
    assert SLUG not in slugs(_classifier(scale=30.0, margin=0.35)[0])  # CosFace: a margin and a scale


def test_label_smoothing_is_silent():
    assert SLUG not in slugs(_classifier(smoothing=0.1)[0])


def test_tanh_logits_are_named_and_plain_logits_are_silent():
    f = _one(_tanh(True)[0])
    assert "tanh" in f.message
    assert SLUG not in slugs(_tanh(False)[0])


def test_bce_on_a_pairs_cosine_is_named_and_a_scaled_one_is_silent():
    f = _one(_siamese()[0])
    assert "binary_cross_entropy_with_logits" in f.message and "0.313" in f.message
    assert SLUG not in slugs(_siamese(scale=10.0)[0])
