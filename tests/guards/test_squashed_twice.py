"""squashed-twice (overt/guards/squashtwice.py; issue 33, session 56, w341): a tanh or a sigmoid applied to the
output of the same function, directly or plus a term that carries no gradient.  Planted bugs of other forms than
the case's (a deterministic actor whose network ends in nn.Tanh squashed again, a binary classifier on digits
whose nn.Sigmoid output goes through torch.sigmoid before the loss), each with its correct twin; correct programs
near the premise (a hand-written LSTM cell, a scaled inner tanh, a squashed Gaussian with its log-prob
correction) stay quiet, and unchecked steps run torch's own functions."""

from __future__ import annotations

import torch

from overt.guards.axes import _WRAPPERS
from tests.guards.helpers import run_script_probe as _run
from tests.guards.helpers import slug_set as _slugs

HEAD = '''
import torch
from sklearn.datasets import load_digits
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)
d = load_digits()
x = torch.tensor(d.data, dtype=torch.float32) / 16
y = torch.tensor(d.target)
'''

ACTOR = '''
actor = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 1), nn.Tanh())
opt = torch.optim.Adam(actor.parameters(), lr=1e-2)
target = (y.float() / 4.5 - 1).clamp(-1, 1)  # the best action in [-1, 1], a function of the digit
for step in range(30):
    i = (step * 64) % 1700
    action = {action}
    loss = ((action.squeeze(1) - target[i:i + 64]) ** 2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
'''

BINARY = '''
model = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 1){last})
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
for step in range(30):
    i = (step * 64) % 1700
    p = {prob}
    loss = F.binary_cross_entropy(p.squeeze(1), (y[i:i + 64] % 2).float())
    opt.zero_grad()
    loss.backward()
    opt.step()
'''

QUIET = '''
W = nn.Linear(64 + 16, 4 * 16)
head = nn.Linear(16, 2)
opt = torch.optim.Adam(list(W.parameters()) + list(head.parameters()), lr=1e-2)
for step in range(20):
    i = (step * 64) % 1700
    h = c = torch.zeros(64, 16)
    for t in range(2):  # a hand-written LSTM cell over two looks at the digit
        g = W(torch.cat([x[i:i + 64], h], 1))
        gi, gf, gg, go = g.chunk(4, 1)
        c = torch.sigmoid(gf) * c + torch.sigmoid(gi) * torch.tanh(gg)
        h = torch.sigmoid(go) * torch.tanh(c)
    out = head(h)
    mu, log_std = out[:, 0], out[:, 1].clamp(-5, 1)
    u = 2 * torch.tanh(mu) + log_std.exp() * torch.randn_like(mu)  # a scaled inner tanh: reaches 0.96
    a = torch.tanh(u)
    logp = -0.5 * ((u - mu) / log_std.exp()) ** 2 - log_std - torch.log(1 - a.pow(2) + 1e-6)
    loss = ((a - (y[i:i + 64].float() / 4.5 - 1)) ** 2).mean() + 1e-3 * logp.mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
'''


def test_an_actor_ending_in_tanh_squashed_again_is_named_and_its_twin_is_quiet(tmp_path):
    findings = _run(tmp_path, ACTOR.format(action="torch.tanh(actor(x[i:i + 64]))"), head=HEAD)
    assert _slugs(findings) == ["squashed-twice"], findings
    message = findings[0]["message"]
    assert "train.py:" in message and "(-0.762, 0.762)" in message and "that output itself" in message, message
    assert _run(tmp_path, ACTOR.format(action="actor(x[i:i + 64])"), head=HEAD) == []


def test_a_sigmoid_of_a_sigmoid_output_is_named_and_its_twin_is_quiet(tmp_path):
    findings = _run(tmp_path, BINARY.format(last=", nn.Sigmoid()", prob="torch.sigmoid(model(x[i:i + 64]))"),
                    head=HEAD)
    assert _slugs(findings) == ["squashed-twice"], findings
    assert "(0.5, 0.731)" in findings[0]["message"], findings[0]["message"]
    assert _run(tmp_path, BINARY.format(last="", prob="torch.sigmoid(model(x[i:i + 64]))"), head=HEAD) == []


def test_an_lstm_cell_a_scaled_tanh_and_a_squashed_gaussian_stay_quiet(tmp_path):
    assert _run(tmp_path, QUIET, head=HEAD) == []


def test_unchecked_steps_keep_torch_functions():
    assert not _WRAPPERS.listening
    assert torch.tanh is torch._C._VariableFunctions.tanh or torch.tanh.__module__ in (None, "torch")
