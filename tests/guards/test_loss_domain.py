"""Every loss's input domain (``softmax-before-cross-entropy``): KL divergence's input must be
log-probabilities and its target probabilities (log-probabilities with ``log_target=True``)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from tests.conftest import TIMING

from .helpers import batches, digits, guarded, mlp, slugs


def _distill(student_out, target_of, loss_fn, steps: int = 8):
    """A student learning digits from a fixed teacher's soft labels (temperature 2)."""
    torch.manual_seed(1)
    teacher = mlp(hidden=48)
    student = mlp()
    opt = torch.optim.Adam(student.parameters(), lr=1e-2)
    g = guarded(student, opt, check_every=1)
    for xb, _ in batches(32, steps):
        with torch.no_grad():
            t_logits = teacher(xb) / 2.0
        loss = loss_fn(student_out(student(xb) / 2.0), target_of(t_logits))
        opt.zero_grad()
        loss.backward()
        opt.step()
    return g.report()


def test_kl_div_module_fed_probabilities():
    findings = _distill(lambda s: s.softmax(-1), lambda t: t.softmax(-1), nn.KLDivLoss(reduction="batchmean"))
    assert slugs(findings) == ["softmax-before-cross-entropy"]
    assert "log-probabilities" in findings[0].message and "kl_div" in findings[0].where
    assert "test_loss_domain.py" in findings[0].where


def test_kl_div_fed_raw_logits():
    findings = _distill(lambda s: s, lambda t: F.softmax(t, 1), lambda a, b: F.kl_div(a, b, reduction="batchmean"))
    assert slugs(findings) == ["softmax-before-cross-entropy"]
    assert "raw logits" in findings[0].message


def test_kl_div_log_target_given_probabilities():
    findings = _distill(lambda s: F.log_softmax(s, 1), lambda t: F.softmax(t, 1),
                        lambda a, b: F.kl_div(a, b, reduction="batchmean", log_target=True))
    assert slugs(findings) == ["softmax-before-cross-entropy"]
    assert "log_target=True" in findings[0].message


def test_kl_div_in_its_domain_is_quiet():
    kl = nn.KLDivLoss(reduction="batchmean", log_target=True)
    for student_out, target_of, loss_fn in (
            (lambda s: F.log_softmax(s, 1), lambda t: F.softmax(t, 1),
             lambda a, b: F.kl_div(a, b, reduction="batchmean")),
            (lambda s: s.log_softmax(-1), lambda t: t.log_softmax(-1), kl)):
        assert _distill(student_out, target_of, loss_fn) == []


def test_bce_loss_fed_raw_logits_is_explained():
    model = mlp(out=1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    g = guarded(model, opt, check_every=1)
    xb, yb = next(batches(32, 1))
    with pytest.raises(RuntimeError, match="between 0 and 1"):  # PyTorch's own error stays the user's
        nn.BCELoss()(model(xb).squeeze(1), (yb % 2).float())
    findings = g.report()
    assert slugs(findings) == ["softmax-before-cross-entropy"]
    assert "BCEWithLogitsLoss" in findings[0].fix


def test_bce_loss_on_sigmoid_outputs_is_quiet():
    model = nn.Sequential(mlp(out=1), nn.Sigmoid())
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    g = guarded(model, opt, check_every=1)
    for xb, yb in batches(32, 4):
        opt.zero_grad()
        nn.BCELoss()(model(xb).squeeze(1), (yb % 2).float()).backward()
        opt.step()
    assert g.report() == []


def _segment(targets_of, steps: int = 4):
    """A per-pixel binary 'mask' task on digits: each of the 64 pixels is on (>= 8 of 16) or off."""
    model = mlp(out=64)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    g = guarded(model, opt, check_every=1)
    for xb, _ in batches(32, steps):
        mask = (xb >= 0.5).float()
        opt.zero_grad()
        F.binary_cross_entropy_with_logits(model(xb), targets_of(mask)).backward()
        opt.step()
    return g.report()


def test_binary_targets_read_as_0_255():
    findings = _segment(lambda m: m * 255)
    assert slugs(findings) == ["wrong-loss-for-task"]
    assert "[0, 255]" in findings[0].message and "/ 255" in findings[0].fix


def test_binary_targets_in_their_domain_are_quiet():
    assert _segment(lambda m: m) == []
    assert _segment(lambda m: m * 0.9 + 0.05) == []  # label smoothing stays in [0, 1]


def test_binary_targets_in_minus_one_one():
    findings = _segment(lambda m: m * 2 - 1)
    assert slugs(findings) == ["wrong-loss-for-task"]
    assert "{-1, 1}" in findings[0].message


def test_an_ignore_code_beside_both_classes_is_quiet():
    """-1 marks a missing label, masked out of a reduction='none' loss (multi-label data with gaps)."""
    model = mlp(out=64)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    g = guarded(model, opt, check_every=1)
    for xb, _ in batches(32, 4):
        y = (xb >= 0.5).float()
        y[:, :8] = -1.0  # unknown
        loss = F.binary_cross_entropy_with_logits(model(xb), y, reduction="none")
        loss = loss[y >= 0].mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert g.report() == []


class _LogSoftmaxOver(nn.Module):
    """An MLP ending in ``log_softmax(dim=...)`` (pointnet.pytorch#27's ``F.log_softmax(x, dim=0)``)."""

    def __init__(self, dim: int):
        super().__init__()
        self.net, self.dim = mlp(), dim

    def forward(self, x):
        return F.log_softmax(self.net(x), dim=self.dim)


def _nll_run(model, steps: int = 4):
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    g = guarded(model, opt, check_every=1)
    for xb, yb in batches(32, steps):
        opt.zero_grad()
        F.nll_loss(model(xb), yb).backward()
        opt.step()
    return g.report()


def test_log_softmax_over_the_batch_into_nll():
    findings = _nll_run(_LogSoftmaxOver(0))
    assert "softmax-over-batch" in slugs(findings)
    found = next(f for f in findings if f.slug == "softmax-over-batch")
    assert "dimension 0" in found.message and "nll_loss" in found.where


def test_log_softmax_over_time_into_nll():
    """A (batch, time, classes) output normalised over time, flattened for NLLLoss."""
    torch.manual_seed(0)
    rnn, head = nn.GRU(8, 16, batch_first=True), nn.Linear(16, 10)
    opt = torch.optim.Adam([*rnn.parameters(), *head.parameters()], lr=1e-2)
    model = nn.ModuleDict({"rnn": rnn, "head": head})
    g = guarded(model, opt, check_every=1)
    for xb, yb in batches(32, 4):
        seq = xb.view(32, 8, 8)  # eight rows of eight pixels, read as a sequence
        out = head(rnn(seq)[0])  # (32, 8, 10)
        logp = F.log_softmax(out, dim=1)  # over time
        loss = F.nll_loss(logp.reshape(-1, 10), yb.repeat_interleave(8))
        opt.zero_grad()
        loss.backward()
        opt.step()
    findings = g.report()
    assert slugs(findings) == ["softmax-before-cross-entropy"]
    assert "class dimension" in findings[0].message


def test_log_softmax_over_classes_into_nll_is_quiet():
    assert _nll_run(_LogSoftmaxOver(1)) == []
    assert _nll_run(_LogSoftmaxOver(-1)) == []


# -- BCEWithLogitsLoss: values in [0, 1] are evidence only with a maker that bounds them, or persisting --

def _conv_segment(head, steps: int = 40, check_every: int = 1, lr: float = 3e-3):
    """A small conv net segments the strokes of digits with BCEWithLogitsLoss on ``head(logits)``; its
    untrained outputs (the default init, seed 0) all lie in [0, 1] for the first steps."""
    torch.manual_seed(0)
    x, _ = digits()
    images = x[:steps * 16].reshape(-1, 1, 8, 8)
    model = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 1, 1))
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    g = guarded(model, opt, check_every=check_every, ignore=TIMING)
    for i in range(steps):
        xb = images[i * 16:(i + 1) * 16]
        opt.zero_grad()
        F.binary_cross_entropy_with_logits(head(model(xb)), (xb > 0.4).float()).backward()
        opt.step()
    return g.report(), g.session.options.stream.getvalue()


def test_untrained_logits_that_happen_to_lie_in_unit_range_are_not_probabilities():
    """The correct program: raw logits that start in [0, 1] (no sigmoid made them) and leave it as training
    pushes the negative pixels' logits below 0.  Before, two checked steps in [0, 1] were reported."""
    torch.manual_seed(0)
    x, _ = digits()
    model = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 1, 1))
    with torch.no_grad():  # the premise: the untrained outputs are in [0, 1] on the first batches
        out = model(x[:32].reshape(-1, 1, 8, 8))
    assert 0 <= float(out.min()) and float(out.max()) <= 1
    findings, text = _conv_segment(lambda z: z)
    assert findings == [], text


def test_sigmoid_outputs_into_logit_loss_through_a_view_are_reported():
    findings, text = _conv_segment(lambda z: torch.sigmoid(z).flatten(1).view_as(z), steps=6)
    assert slugs(findings) == ["softmax-before-cross-entropy"], text
    assert "the model outputs probabilities (a sigmoid)" in text


def test_hand_written_sigmoid_into_logit_loss_is_reported():
    findings, text = _conv_segment(lambda z: 1 / (1 + torch.exp(-z)), steps=6)
    assert slugs(findings) == ["softmax-before-cross-entropy"], text
    assert "made by a hand-written sigmoid" in text


def test_logits_held_in_unit_range_by_training_are_reported():
    """No op that the check knows bounds them (a sigmoid written with tanh), but they stay in [0, 1] over 20 or
    more optimizer steps on targets with negatives, which the loss would have pushed below 0 were they logits."""
    findings, text = _conv_segment(lambda z: 0.5 * (torch.tanh(z) + 1))
    assert slugs(findings) == ["softmax-before-cross-entropy"], text
    assert "still after 20 or more optimizer steps" in text and "its last operation is Mul" in text


def test_logits_in_unit_range_under_a_sparse_check_clock_are_quiet():
    """The correct program under the default clock (checked steps 0-4, then 50): the 20 steps are optimizer
    steps, not checked ones, and by step 50 training has moved the logits out of [0, 1]."""
    findings, text = _conv_segment(lambda z: z, steps=60, check_every=50)
    assert findings == [], text



@pytest.mark.slow  # a subprocess, ~15 s on the shared machine
def test_a_discriminator_kept_confused_by_gradient_reversal_is_not_fed_probabilities(tmp_path):
    """The correct twin of wild case w185 (a domain-adversarial network with its gradient reversal layer): the
    domain classifier's logits stay in [0, 1] over 20 and more steps while it ranks the domains the wrong way
    round (the reversed gradient keeps it confused). Under check_every=100 two checked steps found them in [0, 1]
    and `softmax-before-cross-entropy` was reported; a bound is shown only by logits that rank the labels right."""
    import subprocess
    import sys
    from pathlib import Path

    from tests.wild.cases import w185_gradient_reversal_missing as case

    script = tmp_path / "dann.py"
    script.write_text(case.script(False))
    root = Path(__file__).resolve().parents[2]
    out = subprocess.run([sys.executable, "-m", "overt", "run", "--check-every", "100", str(script)],
                         capture_output=True, text=True, timeout=300, cwd=tmp_path,
                         env={**__import__("os").environ, "PYTHONPATH": str(root), "OMP_NUM_THREADS": "1"})
    text = out.stdout + out.stderr
    assert out.returncode == 0 and "softmax-before-cross-entropy" not in text and "METRIC" in text, text
