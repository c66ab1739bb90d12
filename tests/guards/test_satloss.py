"""loss-saturates-when-wrong (overt/guards/satloss.py, issue 33; the wild corpus's w443): a pairwise ranking or
preference loss linear in a sigmoid of the margin between two scores (the log of a log-sigmoid loss left out), while
some pairs are ranked confidently wrong.  Planted: a Bradley-Terry reward loss ``-sigmoid(margin).mean()`` on digit
pairs (the larger label preferred), the same written ``(1 - sigmoid(margin)).sum() / n``, and a BPR loss of a
matrix factorisation written ``(1 - sigmoid(x_uij)).mean()``.  Twins stay quiet: the same runs with
``-logsigmoid``, ``softplus(-margin)`` and a margin-ranking hinge, a sigmoid of one score used as a penalty on gate
activations beside a cross-entropy, and a sigmoid loss on a task the model never ranks confidently wrong.  Small
real runs (digits, synthetic users and items), found as ``overt run`` finds models (global hooks)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from tests.guards.helpers import batches, guarded_fit

SLUG = "loss-saturates-when-wrong"


def _reward(loss_of, steps: int = 200) -> list:
    """A reward model scoring digits, trained on pairs in which the larger label is preferred."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 1))

    def losses():
        for xb, yb in batches(64, steps):
            half = len(yb) // 2
            a, b, ya, yb2 = xb[:half], xb[half:2 * half], yb[:half], yb[half:2 * half]
            keep = ya != yb2
            first = (ya > yb2)[keep][:, None]
            chosen = torch.where(first, a[keep], b[keep])
            rejected = torch.where(first, b[keep], a[keep])
            margin = model(chosen).squeeze(1) - model(rejected).squeeze(1)
            yield loss_of(margin)

    return guarded_fit(model.parameters(), losses(), lr=3e-3)


def _bpr(loss_of, epochs: int = 12) -> list:
    """Matrix factorisation of synthetic implicit feedback (a low-rank taste and some likes it does not explain),
    one verified negative per positive."""
    g = torch.Generator().manual_seed(1)
    n_users, n_items = 120, 80
    liked = (torch.randn(n_users, 3, generator=g) @ torch.randn(3, n_items, generator=g)) > 0.8
    liked |= torch.rand(n_users, n_items, generator=g) < 0.1  # likes no low-rank taste explains
    users, items = liked.nonzero(as_tuple=True)
    torch.manual_seed(0)
    mf = nn.ModuleList([nn.Embedding(n_users, 16), nn.Embedding(n_items, 16)])
    for e in mf:
        nn.init.normal_(e.weight, std=0.1)

    def losses():
        for _ in range(epochs):
            for batch in torch.randperm(len(users), generator=g).split(256):
                u, i = users[batch], items[batch]
                j = torch.randint(n_items, (len(u),), generator=g)
                bad = liked[u, j]
                while bad.any():
                    j[bad] = torch.randint(n_items, (int(bad.sum()),), generator=g)
                    bad = liked[u, j]
                eu = mf[0](u)
                yield loss_of((eu * mf[1](i)).sum(1) - (eu * mf[1](j)).sum(1))

    return guarded_fit(mf.parameters(), losses(), lr=2e-2)


def _found(findings: list) -> list:
    return [f for f in findings if f.slug == SLUG]


def test_a_reward_loss_without_its_log_is_named():
    found = _found(_reward(lambda m: -torch.sigmoid(m).mean()))
    assert len(found) == 1, found
    msg = found[0].message
    assert "linear in a sigmoid of a margin" in msg and "confidently wrong" in msg, msg
    assert "logsigmoid" in found[0].fix


def test_one_minus_sigmoid_summed_and_divided_is_named():
    assert len(_found(_reward(lambda m: (1 - torch.sigmoid(m)).sum() / len(m)))) == 1


def test_a_bpr_loss_without_its_log_is_named():
    assert len(_found(_bpr(lambda x: (1 - torch.sigmoid(x)).mean()))) == 1


def test_log_sigmoid_softplus_and_hinge_are_quiet():
    assert _found(_reward(lambda m: -F.logsigmoid(m).mean())) == []
    assert _found(_reward(lambda m: F.softplus(-m).mean())) == []
    assert _found(_reward(lambda m: F.relu(1 - m).mean())) == []
    assert _found(_bpr(lambda x: -F.logsigmoid(x).mean())) == []


def test_a_penalty_on_gate_activations_is_quiet():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 26))

    def losses():
        for xb, yb in batches(32, 200):
            out = model(xb)
            gates = torch.sigmoid(out[:, 10:])  # a sigmoid of one score each: pushed down, the task pushes up
            yield F.cross_entropy(out[:, :10] * gates[:, :10], yb) + 0.5 * gates.mean()

    assert _found(guarded_fit(model.parameters(), losses())) == []


def test_a_sigmoid_loss_with_no_pair_confidently_wrong_is_quiet():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 1))

    def losses():
        for xb, _ in batches(64, 200):
            margin = model(xb).squeeze(1) - model(xb.flip(1)).squeeze(1)  # always learnable, never far off
            yield -torch.sigmoid(0.1 * margin).mean()

    assert _found(guarded_fit(model.parameters(), losses(), lr=1e-4)) == []


def test_the_walk_reads_the_sign_and_the_scale_of_each_form():
    """The graph walk alone, on real graphs: which forms are a loss linear in a sigmoid of a margin, and the sign
    with which the sigmoid enters (-1: the loss falls as it grows)."""
    from overt.guards.satloss import _linear_sigmoids

    torch.manual_seed(0)
    model = nn.Linear(4, 3)
    x = torch.randn(16, 4)
    pick = torch.zeros(16, 1, dtype=torch.long)
    chosen = F.log_softmax(model(x), -1).gather(1, pick).squeeze(1)
    rejected = F.log_softmax(model(x + 1), -1).gather(1, pick).squeeze(1)
    ref = torch.randn(16)
    forms = {
        "dpo without its log": (-torch.sigmoid(0.1 * ((chosen - ref) - (rejected - ref))).mean(), [-1]),
        "a tensor beta": (-torch.sigmoid(torch.tensor(0.1) * (chosen - rejected)).mean(), [-1]),
        "a temperature divisor": (-torch.sigmoid((chosen - rejected) / 0.5).mean(), [-1]),
        "half of one minus": (0.5 * (1 - torch.sigmoid(chosen - rejected)).mean(), [-1]),
        "summed over a count": (torch.sigmoid(rejected - chosen).sum() / 16, [1]),
        "beside a penalty": ((1 - torch.sigmoid(chosen - rejected)).mean() + 1e-4 * chosen.pow(2).mean(), [-1]),
        "dpo": (-F.logsigmoid(0.1 * (chosen - rejected)).mean(), []),
        "one score": (torch.sigmoid(chosen).mean(), []),
        "weighted per element": ((torch.rand(16) * torch.sigmoid(chosen - rejected)).mean(), []),
        "squared": ((1 - torch.sigmoid(chosen - rejected)).pow(2).mean(), []),
    }
    for name, (loss, signs) in forms.items():
        assert [s for _, s, _ in _linear_sigmoids(loss.grad_fn)] == signs, name
