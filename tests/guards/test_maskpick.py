"""selection-picks-masked (overt/guards/maskpick.py, issue 33): a max, min or top-k inside a loss that selects,
in every row of a pairwise matrix, an entry the program's mask excluded.  Named in the forms a mining mask is
written: the diagonal filled with -inf in similarity space and turned into +inf by ``1 - sim`` before a max
(jinnnju/PaAno#1), distances with the same-class pairs filled with +inf by ``masked_fill`` and then a max,
``torch.where`` with an infinite constant and ``topk``, a multiplicative 0/1 mask before a min (each anchor's
hardest negative is one of its own class at distance 0).  Their twins stay quiet: the mask written with the
value the selection skips, a max over an unmasked similarity matrix, a hardest positive over distances times a
positive mask, a masked min with its masked entries raised by a large constant.  Small real runs of an
embedding MLP on the digits, found as ``overt run`` finds models (global hooks)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from tests.guards.helpers import batches, guarded_fit

SLUG = "selection-picks-masked"
INF = float("inf")


def _triplet(form: str, steps: int = 45) -> list:
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 16))

    def loss_of(x, y):
        z = net(x)
        zn = F.normalize(z, dim=1)
        if form in ("diag-inf", "diag-inf-fixed"):  # anchors against a noisy view of themselves
            zp = F.normalize(net(x + 0.05 * torch.randn_like(x)), dim=1)
            sim = zn @ zp.T
            pos = 1 - sim.diagonal()
            masked = sim.clone()
            masked.diagonal().fill_(-INF if form == "diag-inf" else INF)  # the bug: -inf in similarity space
            neg, _ = torch.max(1 - masked, dim=1)
            return F.relu(pos - neg + 0.5).mean()
        dist = torch.cdist(z, z)
        same = y[:, None] == y[None, :]
        pos = (dist * same).max(1).values  # the hardest positive: distances times a 0/1 mask, a max
        if form == "masked-fill-max":  # the bug: same-class pairs filled with +inf, then a max
            neg = dist.masked_fill(same, INF).max(1).values
        elif form == "masked-fill-min":  # the twin: +inf, then a min
            neg = dist.masked_fill(same, INF).min(1).values
        elif form == "where-topk":  # the bug: torch.where with +inf, then topk's largest
            neg = torch.where(same, torch.full_like(dist, INF), dist).topk(2, dim=1).values[:, 0]
        elif form == "where-topk-fixed":
            neg = torch.where(same, torch.full_like(dist, INF), dist).topk(2, dim=1, largest=False).values[:, 0]
        elif form == "product-min":  # the bug: a 0/1 mask multiplied in, then a min picks the masked zeros
            neg = (dist * (~same).float()).min(1).values
        elif form == "product-min-raised":  # the twin: the masked entries raised out of the min's way
            neg = (dist * (~same).float() + same.float() * 1e6).min(1).values
        else:  # "plain": an unmasked similarity matrix's max (no mask at all)
            neg = (zn @ zn.T).max(1).values
        return F.relu(pos - neg + 0.5).mean()

    return guarded_fit(net.parameters(), (loss_of(xb, yb) for xb, yb in batches(64, steps)))


def _named(findings) -> list:
    return [f for f in findings if f.slug == SLUG]


def test_diagonal_masked_with_minus_inf_then_one_minus_sim_max_is_named():
    found = _named(_triplet("diag-inf"))
    assert len(found) == 1, found
    msg = found[0].message
    assert "torch.max(..., dim=1) at " in msg and "test_maskpick.py" in found[0].where
    assert "64x64 pairwise matrix" in msg and "in all 64 rows" in msg and "in-place write" in msg


def test_diagonal_masked_with_plus_inf_is_quiet():
    assert _named(_triplet("diag-inf-fixed")) == []


def test_masked_fill_inf_then_max_is_named():
    found = _named(_triplet("masked-fill-max"))
    assert len(found) == 1 and "masked_fill" in found[0].message, found


def test_masked_fill_inf_then_min_is_quiet():
    assert _named(_triplet("masked-fill-min")) == []


def test_where_inf_then_topk_largest_is_named():
    found = _named(_triplet("where-topk"))
    assert len(found) == 1 and "torch.topk" in found[0].message and "torch.where" in found[0].message, found


def test_where_inf_then_topk_smallest_is_quiet():
    assert _named(_triplet("where-topk-fixed")) == []


def test_zero_one_mask_multiplied_then_min_is_named():
    found = _named(_triplet("product-min"))
    assert len(found) == 1 and "torch.min" in found[0].message and "0/1 mask" in found[0].message, found


def test_zero_one_mask_with_masked_entries_raised_is_quiet():
    assert _named(_triplet("product-min-raised")) == []


def test_unmasked_similarity_max_is_quiet():
    assert _named(_triplet("plain")) == []
