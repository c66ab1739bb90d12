"""stop-gradient-missing at run time (issue 33, round three's w85): a positive-pair loss with no
negatives (SimSiam, BYOL) whose target side also trains, so the representation collapses.
Planted bugs in two forms (``nn.CosineSimilarity`` in a SimSiam loop; BYOL's ``mse_loss`` of
normalised vectors), their clean twins (a detached target; an EMA target network under
``no_grad``), and a correct consistency term trained through both sides next to a supervised loss."""

from __future__ import annotations

import copy

import torch
import torch.nn.functional as F
from torch import nn

from tests.guards.helpers import guarded_run, batches, slugs


def _view(x: torch.Tensor) -> torch.Tensor:
    img = torch.roll(x.view(-1, 1, 8, 8), shifts=tuple(torch.randint(-1, 2, (2,)).tolist()), dims=(2, 3))
    return (img + 0.1 * torch.randn_like(img)).view(-1, 64)


def _mlp(inp: int, hidden: int, out: int) -> nn.Sequential:
    return nn.Sequential(nn.Linear(inp, hidden), nn.BatchNorm1d(hidden), nn.ReLU(), nn.Linear(hidden, out))


class SimSiam(nn.Module):
    def __init__(self):
        super().__init__()
        self.backbone = nn.Sequential(_mlp(64, 128, 64), _mlp(64, 64, 64))
        self.predictor = _mlp(64, 32, 64)

    def forward(self, x):
        z = self.backbone(x)
        return self.predictor(z), z


def _simsiam(bug: bool, steps: int = 80):
    torch.manual_seed(0)

    def train():
        model = SimSiam()
        opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
        cos = nn.CosineSimilarity(dim=1)
        for xb, _ in batches(128, steps):
            (p1, z1), (p2, z2) = model(_view(xb)), model(_view(xb))
            if not bug:
                z1, z2 = z1.detach(), z2.detach()
            loss = -(cos(p1, z2).mean() + cos(p2, z1).mean()) / 2
            opt.zero_grad()
            loss.backward()
            opt.step()
    return guarded_run(train)


def _byol(bug: bool, steps: int = 80):
    torch.manual_seed(0)

    def train():
        online = _mlp(64, 128, 32)
        predictor = _mlp(32, 64, 32)
        target = copy.deepcopy(online).requires_grad_(False)
        opt = torch.optim.Adam(list(online.parameters()) + list(predictor.parameters()), lr=1e-2)
        for xb, _ in batches(128, steps):
            x1, x2 = _view(xb), _view(xb)
            p = F.normalize(predictor(online(x1)), dim=-1)
            if bug:
                z = online(x2)  # the target taken from the online network, gradients and all
            else:
                with torch.no_grad():
                    z = target(x2)
            loss = F.mse_loss(p, F.normalize(z, dim=-1), reduction="sum") / len(xb)
            opt.zero_grad()
            loss.backward()
            opt.step()
            with torch.no_grad():
                for pt, po in zip(target.parameters(), online.parameters()):
                    pt.mul_(0.99).add_(po, alpha=0.01)
    return guarded_run(train)


def test_simsiam_without_stop_gradient_is_named_and_its_twin_is_silent():
    findings, text = _simsiam(bug=True)
    assert slugs(findings) == ["stop-gradient-missing"], text
    assert "F.cosine_similarity" in text and "test_stop_gradient.py:" in text and "collapsed" in text
    findings, text = _simsiam(bug=False)
    assert findings == [], text


def test_byol_target_from_the_online_network_is_named_and_the_ema_twin_is_silent():
    findings, text = _byol(bug=True)
    assert slugs(findings) == ["stop-gradient-missing"], text
    assert "F.mse_loss" in text
    findings, text = _byol(bug=False)
    assert findings == [], text


def test_a_consistency_term_beside_a_supervised_loss_is_silent():
    """Both sides of the cosine train the same network, but the labels keep the outputs apart."""
    torch.manual_seed(0)

    def train():
        model = nn.Sequential(_mlp(64, 64, 32), nn.ReLU(), nn.Linear(32, 10))
        opt = torch.optim.Adam(model.parameters(), lr=1e-2)
        for xb, yb in batches(64, 80):
            a, b = model(_view(xb)), model(_view(xb))
            loss = F.cross_entropy(a, yb) + (1 - F.cosine_similarity(a, b, dim=-1)).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
    findings, text = guarded_run(train)
    assert findings == [], text


def test_torch_cosine_similarity_without_stop_gradient_is_named():
    """torch.cosine_similarity is the same function under another name."""
    torch.manual_seed(0)

    def train():
        model = SimSiam()
        opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
        for xb, _ in batches(128, 80):
            (p1, z1), (p2, z2) = model(_view(xb)), model(_view(xb))
            loss = -(torch.cosine_similarity(p1, z2, dim=-1).mean() + torch.cosine_similarity(p2, z1, dim=-1).mean())
            opt.zero_grad()
            loss.backward()
            opt.step()
    findings, text = guarded_run(train)
    assert slugs(findings) == ["stop-gradient-missing"], text
