"""Training patterns that look like an evaluation loop to a naive check (forwards in training
mode whose outputs are not used by a backward right away) stay quiet under the new guards."""

from __future__ import annotations

import io

import pytest
import torch
from torch import nn
from torch.nn import functional as F

import overt
from tests.wild.cases.common import digits_sets


def _quiet(fn) -> list[str]:
    torch.manual_seed(0)
    g = fn()
    return [f.slug for f in g.report(quiet=True)]


def _policy():
    return nn.Sequential(nn.Linear(64, 32), nn.Dropout(0.1), nn.ReLU(), nn.Linear(32, 4))


def test_reinforce_many_forwards_one_backward_per_step():
    def run():
        policy = _policy()
        opt = torch.optim.Adam(policy.parameters(), lr=1e-2)
        g = overt.guard(policy, opt, stream=io.StringIO())
        for _ in range(8):  # episodes: 12 actions each, one update at the end
            log_probs = []
            for _ in range(12):
                dist = torch.distributions.Categorical(logits=policy(torch.rand(1, 64)))
                action = dist.sample()
                log_probs.append(dist.log_prob(action))
            loss = -torch.stack(log_probs).sum() * torch.rand(())
            opt.zero_grad()
            loss.backward()
            opt.step()
        return g

    assert _quiet(run) == []


def test_gan_generator_forward_then_discriminator_step():
    def run():
        gen = nn.Sequential(nn.Linear(8, 32), nn.BatchNorm1d(32), nn.ReLU(), nn.Linear(32, 64))
        disc = nn.Sequential(nn.Linear(64, 32), nn.LeakyReLU(0.2), nn.Dropout(0.2), nn.Linear(32, 1))
        og, od = torch.optim.Adam(gen.parameters(), 1e-3), torch.optim.Adam(disc.parameters(), 1e-3)
        g = overt.guard([gen, disc], [og, od], stream=io.StringIO())
        train, _ = digits_sets()
        for i in range(10):
            real = train.tensors[0][i * 32:(i + 1) * 32]
            fake = gen(torch.randn(32, 8))
            d_loss = F.binary_cross_entropy_with_logits(disc(real), torch.ones(32, 1)) + \
                F.binary_cross_entropy_with_logits(disc(fake.detach()), torch.zeros(32, 1))
            od.zero_grad()
            d_loss.backward()
            od.step()
            g_loss = F.binary_cross_entropy_with_logits(disc(fake), torch.ones(32, 1))
            og.zero_grad()
            g_loss.backward()
            og.step()
        return g

    assert _quiet(run) == []


def test_triplet_three_forwards_one_backward():
    def run():
        net = nn.Sequential(nn.Linear(64, 32), nn.Dropout(0.1), nn.ReLU(), nn.Linear(32, 16))
        opt = torch.optim.SGD(net.parameters(), lr=0.05)
        g = overt.guard(net, opt, stream=io.StringIO())
        train, _ = digits_sets()
        x = train.tensors[0]
        for i in range(10):
            a, p, n = net(x[i:i + 16]), net(x[i + 16:i + 32]), net(x[i + 32:i + 48])
            loss = F.triplet_margin_loss(a, p, n)
            opt.zero_grad()
            loss.backward()
            opt.step()
        return g

    assert _quiet(run) == []


def test_mc_dropout_with_a_flag_is_not_dropout_always_on():
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1, self.fc2 = nn.Linear(64, 32), nn.Linear(32, 10)
            self.mc = False

        def forward(self, x):
            return self.fc2(F.dropout(F.relu(self.fc1(x)), 0.2, training=self.training or self.mc))

    def run():
        net = Net()
        opt = torch.optim.SGD(net.parameters(), lr=0.1)
        g = overt.guard(net, opt, stream=io.StringIO())
        train, val = digits_sets()
        for i in range(6):
            loss = F.cross_entropy(net(train.tensors[0][i * 64:(i + 1) * 64]), train.tensors[1][i * 64:(i + 1) * 64])
            opt.zero_grad()
            loss.backward()
            opt.step()
        net.eval()
        with torch.no_grad():
            net(val.tensors[0])
        return g

    assert _quiet(run) == []


_RECOGNITION = """import torch
from torch import nn
import torch.nn.functional as F
torch.manual_seed(0)


class Recognition(nn.Module):
    def __init__(self):
        super().__init__()
        self.i2h, self.h2o = nn.Linear(8 + 16, 16), nn.Linear(16, 4)

    def forward(self, x, h):
        h = torch.tanh(self.i2h(torch.cat([x, h], 1)))
        return self.h2o(h), h


rec = Recognition()
opt = torch.optim.Adam(rec.parameters(), lr=1e-2)
x, y = torch.randn(32, 8, 8), torch.randint(0, 4, (32,))
for _ in range(60):
    h = torch.zeros(32, 16)
    for t in reversed(range(8)):
        out, h = rec.forward(x[:, t], h)
    loss = F.cross_entropy(out, y)
    opt.zero_grad()
    loss.backward()
    opt.step()
__EVAL__"""


@pytest.mark.parametrize("evaluation", [False, True])
def test_a_head_run_on_every_hidden_state_whose_outputs_but_the_last_are_dropped(tmp_path, evaluation):
    """A recurrent encoder run backwards over time by calling its ``forward`` directly (its own hooks never run,
    so its two layers are the outermost modules ``overt run`` sees): the head's forwards at the earlier time
    steps are reached by no backward, several in a row, with no step between them. They are not an evaluation,
    since each runs on a hidden state the step's own graph computed (a public latent-ODE example trains its
    recognition RNN this way; issue 33, fresh3 scripts). Its twin evaluates the encoder on three batches of data
    without no_grad after the first step: still named."""
    from tests.conftest import run_overt

    script = tmp_path / "recognition.py"
    evaluate = ("    if _ == 0:  # an evaluation on three batches of data, with gradients on\n"
                "        for i in range(3):\n"
                "            print(rec.forward(torch.randn(32, 8), torch.zeros(32, 16))[0].argmax(1)[:4])\n"
                if evaluation else "")
    script.write_text(_RECOGNITION.replace("__EVAL__", evaluate))
    proc = run_overt("run", str(script), cwd=tmp_path, timeout=300, OMP_NUM_THREADS="1")
    assert ("graph-in-eval" in proc.stderr) == evaluation, proc.stderr
