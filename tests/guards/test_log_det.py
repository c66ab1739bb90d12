"""log-det-sign-flipped at run time (issue 33, round thirteen's w301): a function that returns its output with a
log-determinant returns log |det| of its own Jacobian.  Planted bugs on digits (four PCA-like coordinates of the
images): a RealNVP-style flow trained by maximum likelihood through ``forward`` whose log-determinant is
subtracted, and one trained through a method of another name (never called as a module) with the sign flipped;
their twins; an autoencoder that returns its reconstruction with a per-sample KL term of the same shapes (no
log-determinant: silent); a flow whose ``inverse`` returns the forward direction's log-determinant (a
convention: silent)."""

from __future__ import annotations

import io
import math

import torch
from torch import nn

from tests.guards.helpers import digits, guarded_run, slugs

SLUG = "log-det-sign-flipped"


def _data() -> torch.Tensor:
    x, _ = digits()
    x = x[:1024] - x[:1024].mean(0)
    _, _, v = torch.pca_lowrank(x, q=4, center=False)
    z = x @ v
    return z / z.std(0)


class Coupling(nn.Module):
    def __init__(self, flip: bool):
        super().__init__()
        self.flip = flip
        self.net = nn.Sequential(nn.Linear(2, 32), nn.Tanh(), nn.Linear(32, 4))

    def forward(self, x):
        a, b = (x[:, 2:], x[:, :2]) if self.flip else (x[:, :2], x[:, 2:])
        s, t = self.net(a).chunk(2, 1)
        s = torch.tanh(s)
        b = b * s.exp() + t
        out = torch.cat([b, a], 1) if self.flip else torch.cat([a, b], 1)
        return out, s.sum(1)

    def inverse(self, y):
        a, b = (y[:, 2:], y[:, :2]) if self.flip else (y[:, :2], y[:, 2:])
        s, t = self.net(a).chunk(2, 1)
        s = torch.tanh(s)
        b = (b - t) * (-s).exp()
        out = torch.cat([b, a], 1) if self.flip else torch.cat([a, b], 1)
        return out, s.sum(1)  # the forward direction's log-det, by this class's convention


class Flow(nn.Module):
    def __init__(self, bug: bool):
        super().__init__()
        self.bug = bug
        self.layers = nn.ModuleList(Coupling(i % 2 == 1) for i in range(4))

    def forward(self, x):
        log_det = torch.zeros(len(x), device=x.device)
        for layer in self.layers:
            x, ld = layer(x)
            log_det = log_det - ld if self.bug else log_det + ld
        return x, log_det

    def data_to_noise(self, x):  # the same map under another name: never called as a module
        return self.forward(x)

    def inverse(self, z):
        log_det = torch.zeros(len(z), device=z.device)
        for layer in reversed(self.layers):
            z, ld = layer.inverse(z)
            log_det = log_det + ld
        return z, log_det


def _flow(bug: bool, method: str = "forward", steps: int = 30):
    data = _data()

    def train():
        torch.manual_seed(0)
        flow = Flow(bug)
        opt = torch.optim.Adam(flow.parameters(), lr=1e-3)
        for step in range(steps):
            x = data[(step * 64) % 960:(step * 64) % 960 + 64]
            z, log_det = flow(x) if method == "forward" else flow.data_to_noise(x)
            log_p = -0.5 * (z ** 2).sum(1) - 2 * math.log(2 * math.pi) + log_det
            loss = -log_p.mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            if method == "inverse" and step % 10 == 0:
                flow.inverse(torch.randn(8, 4))

    return guarded_run(train)


class KlAutoencoder(nn.Module):
    """Returns a reconstruction of its input's shape and a per-sample KL: the shapes of (output, log-det)."""

    def __init__(self):
        super().__init__()
        self.enc = nn.Linear(4, 4)
        self.dec = nn.Linear(2, 4)

    def forward(self, x):
        mean, log_var = self.enc(x).chunk(2, 1)
        z = mean + torch.randn_like(mean) * (0.5 * log_var).exp()
        kl = -0.5 * (1 + log_var - mean ** 2 - log_var.exp()).sum(1)
        return self.dec(z), kl


def _autoencoder(steps: int = 30):
    data = _data()

    def train():
        torch.manual_seed(0)
        model = KlAutoencoder()
        opt = torch.optim.Adam(model.parameters(), lr=1e-2)
        for step in range(steps):
            x = data[(step * 64) % 960:(step * 64) % 960 + 64]
            recon, kl = model(x)
            loss = ((recon - x) ** 2).sum(1).mean() + kl.mean()
            opt.zero_grad()
            loss.backward()
            opt.step()

    return guarded_run(train)


def test_flow_whose_forward_subtracts_the_log_det_is_named():
    found = [f for f in _flow(True)[0] if f.slug == SLUG]
    assert len(found) == 1
    assert "Flow.forward" in found[0].message and "opposite sign" in found[0].message


def test_flow_trained_through_another_method_is_named():
    found = [f for f in _flow(True, method="other")[0] if f.slug == SLUG]
    assert len(found) == 1 and "Flow." in found[0].message


def test_correct_flows_are_silent():
    assert SLUG not in slugs(_flow(False)[0])
    assert SLUG not in slugs(_flow(False, method="other")[0])


def test_inverse_with_the_forward_log_det_is_silent():
    assert SLUG not in slugs(_flow(False, method="inverse")[0])


def test_output_with_a_per_sample_kl_is_silent():
    assert SLUG not in slugs(_autoencoder()[0])


def test_the_probe_leaves_training_unchanged():
    """The probe's calls put back the random generators: the same weights with and without the guard."""
    data = _data()

    def run(guard: bool):
        out = {}

        def train():
            torch.manual_seed(0)
            flow = Flow(True)
            opt = torch.optim.Adam(flow.parameters(), lr=1e-3)
            for step in range(12):
                z, log_det = flow(data[step * 64:step * 64 + 64] + 0.01 * torch.randn(64, 4))
                loss = -(-0.5 * (z ** 2).sum(1) + log_det).mean()
                opt.zero_grad()
                loss.backward()
                opt.step()
            out["w"] = torch.cat([p.detach().flatten() for p in flow.parameters()])

        if guard:
            guarded_run(train)
        else:
            train()
        return out["w"]

    assert torch.equal(run(True), run(False))


class Wrapper(nn.Module):
    """Holds the flow as DistributedDataParallel does (``.module``): found in the training function's frame."""

    def __init__(self, module: nn.Module):
        super().__init__()
        self.module = module

    def forward(self, x):
        return self.module(x)


def _holds_a_module(value, depth: int = 0) -> bool:
    if isinstance(value, nn.Module):
        return True
    if depth < 3 and isinstance(value, (list, tuple, set)):
        return any(_holds_a_module(v, depth + 1) for v in value)
    if depth < 3 and isinstance(value, dict):
        return any(_holds_a_module(v, depth + 1) for v in list(value.keys()) + list(value.values()))
    return False


def test_the_check_keeps_no_module_it_found_past_its_step():
    """Session 49's hang: the check kept the modules it found in the user's frames, a DDP wrapper among them, and
    with it the wrapper's reducer and process group; freed late, gloo's process group deadlocks in its destructor.
    After a guarded run through a wrapper, no module is held by the check (the session still open)."""
    from overt.guards.logdet import LogDetChecks
    from overt.guards.options import GuardOptions
    from overt.guards.session import GuardSession
    from tests.conftest import TIMING

    data = _data()
    session = GuardSession(GuardOptions(stream=io.StringIO(), ignore=TIMING, check_every=10), auto=True)
    try:
        torch.manual_seed(0)
        flow = Flow(True)
        wrapper = Wrapper(flow)
        opt = torch.optim.Adam(flow.parameters(), lr=1e-3)
        for step in range(30):
            z, log_det = wrapper(data[step * 32:step * 32 + 32])
            loss = -(-0.5 * (z ** 2).sum(1) + log_det).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
        check = next(c for c in session.checks if isinstance(c, LogDetChecks))
        assert check.done  # it probed
        assert not any(_holds_a_module(v) for v in vars(check).values() if v is not session)
    finally:
        session.close()
