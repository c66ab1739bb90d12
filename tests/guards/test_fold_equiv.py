"""merged-model-differs (issue 33, the wild corpus's w88 and w257): a model folded from the trained one computes
what the trained model computed.  An MLP is pretrained on digits, frozen, and adapted with LoRA to digits shifted
two pixels; after training the adapters are merged.  Planted, under a session that finds models and optimizers
itself (``overt run``'s way): a merge applied twice into the shared base layers (evaluated in eval mode), a merge
into new ``nn.Linear`` layers without the ``alpha / r`` scale (evaluated in training mode under ``no_grad``), and
a BatchNorm folded into the linear layer before it with the wrong epsilon.  Silent: each merge done right, the
frozen base evaluated on its own before the merge (a baseline), a merge that zeroes the adapter after folding it
(the trained model's weights written since its last step: not provable), a copy of the adapted model with an
earlier checkpoint loaded (nothing folded)."""

from __future__ import annotations

import copy

import torch
import torch.nn.functional as F
from torch import nn

from tests.guards.helpers import digits, guarded_run, slugs

SLUG = "merged-model-differs"


def _shift(x):
    return torch.roll(x.view(-1, 8, 8), shifts=2, dims=2).view(-1, 64)


def _fit(model, params, x, y, steps, lr=1e-2):
    opt = torch.optim.Adam(params, lr=lr)
    for s in range(steps):
        i = (s * 64) % 1280
        opt.zero_grad()
        F.cross_entropy(model(x[i:i + 64]), y[i:i + 64]).backward()
        opt.step()


class LoRALinear(nn.Module):
    def __init__(self, base, r=8, alpha=16):
        super().__init__()
        self.base = base
        self.A = nn.Parameter(torch.randn(r, base.in_features) * 0.1)
        self.B = nn.Parameter(torch.zeros(base.out_features, r))
        self.scale = alpha / r

    def forward(self, x):
        return self.base(x) + self.scale * (x @ self.A.T) @ self.B.T

    def delta(self):
        return self.scale * self.B @ self.A

    def merge(self):
        with torch.no_grad():
            self.base.weight += self.delta()


def _adapted(steps=60):
    """(pretrained base, adapted LoRA model, shifted evaluation inputs and labels), trained."""
    torch.manual_seed(0)
    x, y = digits()
    base = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10))
    _fit(base, base.parameters(), x, y, 40)
    for p in base.parameters():
        p.requires_grad_(False)
    xs = _shift(x)
    model = nn.Sequential(LoRALinear(base[0]), nn.ReLU(), LoRALinear(base[2]))
    _fit(model, [p for p in model.parameters() if p.requires_grad], xs, y, steps)
    return base, model, xs[1400:], y[1400:]


def _run(after):
    def program():
        base, model, xv, yv = _adapted()
        after(base, model, xv, yv)

    findings, text = guarded_run(program)
    return findings, text


def _merge_shared(times):
    def after(base, model, xv, yv):
        for _ in range(times):
            for m in model:
                if isinstance(m, LoRALinear):
                    m.merge()
        exported = nn.Sequential(model[0].base, nn.ReLU(), model[2].base)
        exported.eval()
        with torch.no_grad():
            (exported(xv).argmax(1) == yv).float().mean().item()
    return after


def _merge_new(scaled):
    def after(base, model, xv, yv):
        def merged_linear(m):
            out = nn.Linear(m.base.in_features, m.base.out_features)
            with torch.no_grad():
                out.weight.copy_(m.base.weight + (m.delta() if scaled else m.B @ m.A))
                out.bias.copy_(m.base.bias)
            return out

        merged = nn.Sequential(merged_linear(model[0]), nn.ReLU(), merged_linear(model[2]))
        with torch.no_grad():  # no eval(): the merged model has no dropout
            (merged(xv).argmax(1) == yv).float().mean().item()
    return after


def test_merge_applied_twice_is_named():
    findings, text = _run(_merge_shared(2))
    assert SLUG in slugs(findings), text
    message = next(f.message for f in findings if f.slug == SLUG)
    assert "times the change training made" in message and "A, 0.B" in message


def test_merge_applied_once_is_quiet():
    findings, text = _run(_merge_shared(1))
    assert SLUG not in slugs(findings), text


def test_merge_into_new_layers_without_scale_is_named():
    findings, text = _run(_merge_new(False))
    assert SLUG in slugs(findings), text


def test_merge_into_new_layers_with_scale_is_quiet():
    findings, text = _run(_merge_new(True))
    assert SLUG not in slugs(findings), text


def test_base_evaluated_before_merging_is_quiet():
    def after(base, model, xv, yv):
        base.eval()
        with torch.no_grad():  # the pretrained model's accuracy, for comparison
            (base(xv).argmax(1) == yv).float().mean().item()
        _merge_shared(1)(base, model, xv, yv)

    findings, text = _run(after)
    assert SLUG not in slugs(findings), text


def test_merge_that_zeroes_the_adapter_is_quiet():
    def after(base, model, xv, yv):
        for m in model:
            if isinstance(m, LoRALinear):
                m.merge()
                with torch.no_grad():
                    m.B.zero_()  # the adapted model now computes the merged function too
        _merge_shared(0)(base, model, xv, yv)

    findings, text = _run(after)
    assert SLUG not in slugs(findings), text


def test_earlier_checkpoint_in_a_copy_is_quiet():
    def program():
        base, model, xv, yv = _adapted(steps=20)
        best = copy.deepcopy(model.state_dict())
        _fit(model, [p for p in model.parameters() if p.requires_grad], _shift(digits()[0]), digits()[1], 20)
        restored = copy.deepcopy(model)
        restored.load_state_dict(best)
        restored.eval()
        with torch.no_grad():
            restored(xv)

    findings, text = guarded_run(program)
    assert SLUG not in slugs(findings), text


class BnNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(64, 64)
        self.bn = nn.BatchNorm1d(64)
        self.fc2 = nn.Linear(64, 10)

    def forward(self, x):
        return self.fc2(F.relu(self.bn(self.fc1(x))))


def _fold_bn(correct):
    def program():
        torch.manual_seed(0)
        x, y = digits()
        model = BnNet()
        _fit(model, model.parameters(), x, y, 60)
        bn = model.bn
        var = bn.running_var + bn.eps
        std = var.sqrt() if correct else var  # the planted fold forgets the square root
        fused = nn.Linear(64, 64)
        with torch.no_grad():
            fused.weight.copy_(model.fc1.weight * (bn.weight / std)[:, None])
            fused.bias.copy_((model.fc1.bias - bn.running_mean) * bn.weight / std + bn.bias)
        head = nn.Linear(64, 10)
        with torch.no_grad():
            head.weight.copy_(model.fc2.weight)
            head.bias.copy_(model.fc2.bias)
        folded = nn.Sequential(fused, nn.ReLU(), head)
        folded.eval()
        with torch.no_grad():
            folded(x[1400:])

    return guarded_run(program)


def test_norm_folded_without_square_root_is_named():
    findings, text = _fold_bn(False)
    assert SLUG in slugs(findings), text


def test_norm_folded_right_is_quiet():
    findings, text = _fold_bn(True)
    assert SLUG not in slugs(findings), text


def test_model_fine_tuned_from_the_trained_weights_is_quiet():
    def program():
        base, model, xv, yv = _adapted(steps=20)
        # a smaller model initialised from the adapted one's base layers and trained on its own
        student = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10))
        with torch.no_grad():
            student[0].weight.copy_(model[0].base.weight)
            student[0].bias.copy_(model[0].base.bias)
        x, y = digits()
        _fit(student, student.parameters(), x, y, 20)
        with torch.no_grad():
            student[0].bias.copy_(model[0].base.bias)  # one tensor still the trained model's
        student.eval()
        with torch.no_grad():
            student(xv)

    findings, text = guarded_run(program)
    assert SLUG not in slugs(findings), text
