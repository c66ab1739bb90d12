"""probability-target-not-distribution (overt/guards/probtargets.py, issue 33): a soft cross-entropy or divergence
whose probability target's rows do not sum to one. Named in the forms such a target is built and used: a categorical
(C51) projection that drops the atoms landing exactly on the support (all of them: no mass at all; some of them:
rows summing to less than one), one that moves both neighbours of such an atom (rows summing to up to two), a
hand-written cross-entropy ``-(t * log_softmax(z)).sum(1)``, ``F.cross_entropy`` with probability targets smoothed
by adding ``eps`` to every class, ``F.kl_div`` against a mixup that forgot ``1 - lam``. Their twins stay quiet: the
corrected projection, smoothing by ``eps / K``, a correct mixup, a policy-gradient term (a one-hot scaled by an
advantage), multi-hot labels, a weighted sum normalised by the weights' sum, rows masked to zero next to rows of
one, a placeholder term of zeros beside the objective, an entropy bonus. Small real runs on the digits and on a
synthetic chain, found as ``overt run`` finds models (global hooks)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from tests.guards.helpers import batches, guarded_fit

SLUG = "probability-target-not-distribution"


def _named(findings) -> list:
    return [f for f in findings if f.slug == SLUG]


# -- a categorical critic on a chain: its target is a projection of the next state's distribution -------------
N, ATOMS = 12, 13
SUPPORT = torch.linspace(0.0, 12.0, ATOMS)


def _project(next_probs: torch.Tensor, rewards: torch.Tensor, gamma: float, form: str) -> torch.Tensor:
    b = (rewards[:, None] + gamma * SUPPORT[None]).clamp(0.0, 12.0)  # delta_z 1, v_min 0
    low, up = b.floor().long(), b.ceil().long()
    if form == "fixed":  # the usual correction: low moves down where low == up, then up moves up against the moved low
        low = torch.where((up > 0) & (low == up), low - 1, low)
        up = torch.where((low < ATOMS - 1) & (low == up), up + 1, up)
    elif form == "both":  # the bug: both masks first, so both neighbours move and get weight 1
        lm, um = (up > 0) & (low == up), (low < ATOMS - 1) & (low == up)
        low, up = torch.where(lm, low - 1, low), torch.where(um, up + 1, up)
    proj = torch.zeros(len(rewards), ATOMS)
    proj.scatter_add_(1, low, next_probs * (up.float() - b))
    proj.scatter_add_(1, up, next_probs * (b - low.float()))
    return proj


def _critic(form: str, gamma: float = 1.0, steps: int = 45, minus_inside: bool = False) -> list:
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(N, 32), nn.ReLU(), nn.Linear(32, ATOMS))
    eye = torch.eye(N + 1)[:, :N]

    def losses():
        for _ in range(steps):
            s = torch.randint(0, N, (32,))
            with torch.no_grad():
                next_probs = F.softmax(net(eye[s + 1]), 1)
                target = _project(next_probs, torch.ones(32), gamma, form)
            logp = F.log_softmax(net(eye[s]), 1)
            yield (-target * logp).sum(1).mean() if minus_inside else -(target * logp).sum(1).mean()

    return guarded_fit(net.parameters(), losses())


def test_projection_that_drops_every_integer_atom_is_named_with_no_mass():
    found = _named(_critic("drop"))
    assert len(found) == 1, found
    msg = found[0].message
    assert "zero everywhere" in msg and "multiplies with log_softmax" in msg and "shape [32, 13]" in msg


def test_projection_that_drops_some_atoms_is_named_as_lost_mass():
    found = _named(_critic("drop", gamma=0.5))
    assert len(found) == 1 and "mass is lost" in found[0].message, found


def test_projection_that_moves_both_neighbours_is_named_as_created_mass():
    found = _named(_critic("both"))
    assert len(found) == 1 and "mass is created" in found[0].message and "not 1" in found[0].message, found


def test_minus_sign_on_the_target_is_read_through():
    found = _named(_critic("both", minus_inside=True))  # (-target * logp): the constant is the negated target
    assert len(found) == 1 and "mass is created" in found[0].message, found
    assert _named(_critic("fixed", minus_inside=True)) == []


def test_corrected_projection_is_quiet():
    assert _named(_critic("fixed")) == []
    assert _named(_critic("fixed", gamma=0.5)) == []


# -- classifiers on the digits -----------------------------------------------------------------------------------
def _digits(form: str, steps: int = 45) -> list:
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10))
    teacher = torch.nn.Linear(64, 10)

    def loss_of(x, y):
        z = net(x)
        onehot = F.one_hot(y, 10).float()
        if form == "smooth-every-class":  # the bug: eps added to every class, not eps / K
            return F.cross_entropy(z, onehot * 0.9 + 0.1)
        if form == "smooth":
            return F.cross_entropy(z, onehot * 0.9 + 0.1 / 10)
        if form in ("mixup-kl", "mixup-kl-fixed"):
            perm = torch.randperm(len(y))
            lam = 0.7
            mixed = lam * onehot + ((1 - lam) if form == "mixup-kl-fixed" else 1.0) * onehot[perm]
            return F.kl_div(F.log_softmax(z, 1), mixed, reduction="batchmean")
        logp = F.log_softmax(z, 1)
        if form == "policy-gradient":  # a one-hot scaled by an advantage: a weighted class index
            adv = torch.randn(len(y)).abs() + 0.5
            return -(onehot * adv[:, None] * logp).sum(1).mean()
        if form == "multi-hot":  # two labels each: 0/1 targets
            return -((onehot + F.one_hot((y + 1) % 10, 10).float()) * logp).sum(1).mean()
        if form == "normalised-after":  # unnormalised weights, divided by their sum after the row sum
            with torch.no_grad():
                w = torch.rand(len(y), 10) + onehot
            return (-(w * logp).sum(1) / w.sum(1)).mean()
        if form == "masked-rows":  # the teacher's distribution on half the rows, the others masked to zero
            with torch.no_grad():
                t = F.softmax(teacher(x), 1) * (torch.arange(len(y)) % 2 == 0).float()[:, None]
            return -(t * logp).sum(1).mean() + F.cross_entropy(z, y)
        if form == "lwf-padded":  # LwF: -softmax(old / T) * log_softmax(new / T), zeros for the classes added since
            with torch.no_grad():
                old = F.softmax(teacher(x)[:, :6] / 2.0, 1)
            t = torch.cat([old, torch.zeros(len(y), 4)], 1)
            return F.cross_entropy(z, y) + (-t * F.log_softmax(z / 2.0, 1)).sum(1).mean() * 4
        if form == "placeholder":  # a distillation term with no teacher yet: zeros, beside the objective
            return F.cross_entropy(z, y) - (torch.zeros_like(logp) * logp).sum(1).mean()
        if form == "entropy-bonus":  # an entropy term: its probabilities carry the gradient
            return F.cross_entropy(z, y) + 0.01 * (logp.exp() * logp).sum(1).mean()
        raise ValueError(form)

    return guarded_fit(net.parameters(), (loss_of(xb, yb) for xb, yb in batches(64, steps)))


def test_cross_entropy_smoothed_on_every_class_is_named():
    found = _named(_digits("smooth-every-class"))
    assert len(found) == 1, found
    assert "F.cross_entropy" in found[0].message and "sum to between 1.9 and 1.9" in found[0].message


def test_kl_div_against_a_mixup_without_one_minus_lambda_is_named():
    found = _named(_digits("mixup-kl"))
    assert len(found) == 1 and "F.kl_div" in found[0].message, found


def test_correct_soft_targets_are_quiet():
    for form in ("smooth", "mixup-kl-fixed", "policy-gradient", "multi-hot", "normalised-after", "masked-rows",
                 "lwf-padded", "placeholder", "entropy-bonus"):
        assert _named(_digits(form)) == [], form


# -- a C51 agent's form: (N, actions, atoms) log-probabilities, the action's row picked, the target built with
# index_add_ over flattened offsets -------------------------------------------------------------------------------
def _c51(form: str, steps: int = 45) -> list:
    torch.manual_seed(0)
    actions = 3
    net = nn.Sequential(nn.Linear(N, 32), nn.ReLU(), nn.Linear(32, actions * ATOMS))
    eye = torch.eye(N + 1)[:, :N]

    def dist(x, log):
        z = net(x).view(-1, actions, ATOMS)
        return F.log_softmax(z, 2) if log else F.softmax(z, 2)

    def losses():
        for _ in range(steps):
            s = torch.randint(0, N, (32,))
            a = torch.randint(0, actions, (32,))
            with torch.no_grad():
                p_next = dist(eye[s + 1], False)[torch.arange(32), a]
                b = (1.0 + 0.9 * SUPPORT[None]).clamp(0.0, 12.0).expand(32, ATOMS)
                low, up = b.floor().long(), b.ceil().long()
                if form == "fixed":
                    low[(up > 0) & (low == up)] -= 1
                    up[(low < ATOMS - 1) & (low == up)] += 1
                if form == "cleanrl":  # the lower weight raised by one where low == up, one index_add_ per row
                    lo, hi = (up.float() + (low == up).float() - b) * p_next, (b - low.float()) * p_next
                    m = torch.zeros_like(p_next)
                    for i in range(32):
                        m[i].index_add_(0, low[i], lo[i])
                        m[i].index_add_(0, up[i], hi[i])
                else:
                    m = torch.zeros(32 * ATOMS)
                    offset = (torch.arange(32) * ATOMS)[:, None]
                    m.index_add_(0, (low + offset).view(-1), (p_next * (up.float() - b)).view(-1))
                    m.index_add_(0, (up + offset).view(-1), (p_next * (b - low.float())).view(-1))
                    m = m.view(32, ATOMS)
            if form in ("log-of-softmax", "cleanrl"):  # log of the softmax's picked row, clamped
                log_p = dist(eye[s], False)[torch.arange(32), a].clamp(min=1e-5, max=1 - 1e-5).log()
            else:
                log_p = dist(eye[s], True)[torch.arange(32), a]
            yield -(m * log_p).sum(1).mean()

    return guarded_fit(net.parameters(), losses())


def test_c51_projection_over_flattened_offsets_with_the_action_picked_is_named():
    found = _named(_c51("drop"))
    assert len(found) == 1 and "mass is lost" in found[0].message, found
    found = _named(_c51("log-of-softmax"))
    assert len(found) == 1 and "mass is lost" in found[0].message, found


def test_corrected_c51_projection_with_the_action_picked_is_quiet():
    assert _named(_c51("fixed")) == []
    assert _named(_c51("cleanrl")) == []  # cleanrl's c51.py: up + (low == up) - b as the lower weight
