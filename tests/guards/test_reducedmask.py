"""mask-on-reduced-loss (overt/guards/reducedmask.py, issue 33, session 56): a per-sample mask or weight multiplied
into a value already reduced over the whole batch. Named in three forms of the family: a KL summed without ``dim``
and multiplied by a per-event mask next to a per-event reconstruction (GNTPP's VAE, w295), a cross-entropy left at
its default mean and then masked (``(F.cross_entropy(z, y) * mask).sum() / mask.sum()``), an MSE left at its mean and
multiplied by per-sample weights. Their twins stay quiet: the same losses reduced per sample first, a mask of ones, a
class-weight vector (another row count), a regulariser over the parameters times a per-sample weight-free scale, a
reduction over the feature dimension only. Small real runs on the digits, found as ``overt run`` finds models."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from tests.guards.helpers import batches, guarded_fit

SLUG = "mask-on-reduced-loss"


def _named(findings) -> list:
    return [f for f in findings if f.slug == SLUG]


def _mask(n: int, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return (torch.rand(n, generator=g) < 0.7).float()


# -- a per-event VAE on padded sequences of digits (w295's form) ----------------------------------------------------
def _vae(kl_dim: bool, steps: int = 25) -> list:
    torch.manual_seed(0)
    enc = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 8))
    dec = nn.Sequential(nn.Linear(4, 32), nn.ReLU(), nn.Linear(32, 64))

    class VAE(nn.Module):
        def __init__(self):
            super().__init__()
            self.enc, self.dec = enc, dec

        def forward(self, x):
            mean, log_var = self.enc(x).chunk(2, -1)
            z = mean + torch.randn_like(mean) * (0.5 * log_var).exp()
            return self.dec(z), mean, log_var

    model = VAE()

    def losses():
        for i, (xb, _) in enumerate(batches(80, steps)):
            events = xb.view(8, 10, 64)
            lengths = torch.randint(2, 11, (8,), generator=torch.Generator().manual_seed(i))
            mask = (torch.arange(10)[None, :] < lengths[:, None]).float()
            recon, mean, log_var = model(events)
            rec = ((recon - events) ** 2).sum(-1) * mask
            terms = 1 + log_var - mean.pow(2) - log_var.exp()
            kl = -0.5 * (torch.sum(terms, dim=-1) if kl_dim else torch.sum(terms)) * mask
            yield (rec + kl).sum() / mask.sum()

    return guarded_fit(model.parameters(), losses())


def test_kl_summed_over_the_batch_then_masked_is_named():
    found = _named(_vae(kl_dim=False))
    assert len(found) == 1, found
    msg = found[0].message
    assert "torch.sum(...) taken without dim" in msg and "8x10x4" in msg and "8x10 tensor" in msg, msg
    assert "per-sample mask" in msg and "helpers.py" in found[0].where  # the backward line


def test_kl_summed_per_event_is_quiet():
    assert not _named(_vae(kl_dim=True))


# -- a classifier with a per-sample mask or weights ---------------------------------------------------------------
def _classifier(form: str, steps: int = 25) -> list:
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10))
    class_w = torch.linspace(0.5, 1.5, 10)

    def loss_of(i: int, xb: torch.Tensor, yb: torch.Tensor) -> torch.Tensor:
        z = net(xb)
        mask = _mask(len(xb), i)
        if form == "ce-mean-masked":  # the bug: the mask multiplies the batch's mean
            return (F.cross_entropy(z, yb) * mask).sum() / mask.sum()
        if form == "ce-none-masked":  # the fix
            return (F.cross_entropy(z, yb, reduction="none") * mask).sum() / mask.sum()
        if form == "ce-mean-ones":  # a mask of ones: a scale of one
            ones = torch.ones(len(xb))
            return (F.cross_entropy(z, yb) * ones).sum() / ones.sum()
        if form == "mse-mean-weighted":  # the bug: per-sample weights on a mean
            w = 0.5 + torch.rand(len(xb), generator=torch.Generator().manual_seed(i))
            return (F.mse_loss(z, F.one_hot(yb, 10).float()) * w).mean()
        if form == "mse-none-weighted":  # the fix
            w = 0.5 + torch.rand(len(xb), generator=torch.Generator().manual_seed(i))
            return (F.mse_loss(z, F.one_hot(yb, 10).float(), reduction="none").mean(1) * w).mean()
        if form == "class-weights":  # a class-weight vector times a mean: another row count
            return (F.cross_entropy(z, yb) * class_w).mean()
        if form == "l2-times-rows":  # a sum over the parameters (no model output) times a per-sample scale
            reg = sum(p.pow(2).sum() for p in net.parameters())
            return F.cross_entropy(z, yb) + 1e-4 * (reg * torch.full((10,), 0.1)).mean()
        if form == "feature-sum":  # a sum over the features only: per sample
            return ((z.pow(2).sum(-1) * 1e-3 + F.cross_entropy(z, yb, reduction="none")) * mask).mean()
        raise ValueError(form)

    return guarded_fit(net.parameters(), (loss_of(i, xb, yb) for i, (xb, yb) in enumerate(batches(64, steps))))


def test_mean_cross_entropy_then_masked_is_named():
    found = _named(_classifier("ce-mean-masked"))
    assert len(found) == 1, found
    assert "F.nll_loss(..., reduction='mean')" in found[0].message, found[0].message


def test_mean_mse_times_sample_weights_is_named():
    found = _named(_classifier("mse-mean-weighted"))
    assert len(found) == 1, found
    assert "F.mse_loss(..., reduction='mean')" in found[0].message and "per-sample weights" in found[0].message


def test_per_sample_forms_and_scales_are_quiet():
    for form in ("ce-none-masked", "ce-mean-ones", "mse-none-weighted", "class-weights", "l2-times-rows",
                 "feature-sum"):
        assert not _named(_classifier(form)), form
