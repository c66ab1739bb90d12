"""normaliser-not-scale-invariant for the script's own normalising functions (overt/guards/normfunc.py, issue 33
w270): a per-sample mean-variance normalisation whose square root is taken twice, or that divides by the
variance, is named; the correct one, a fixed-statistics standardisation, an L2 normalisation and a power
normalisation (its power is its own) stay quiet.  Digits scripts under ``overt run``."""

from __future__ import annotations

from tests.guards.helpers import run_script_probe, slug_set

HEAD = '''
import math
import torch
from sklearn.datasets import load_digits
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)
d = load_digits()
x = torch.tensor(d.data, dtype=torch.float32) / 16
x = x * 10 ** (4 * torch.rand(len(x), 1) - 2)       # each sample recorded at its own level
y = torch.tensor(d.target)
MEAN, STD = x.mean(0), x.std(0) + 1e-3

{define}

model = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10))
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
for step in range(30):
    i = (step * 32) % 1400
    opt.zero_grad()
    F.cross_entropy(model({call}(x[i:i + 32])), y[i:i + 32]).backward()
    opt.step()
'''

MVN = '''
def sample_mvn(feats, eps=1e-8):
    centred = feats - feats.mean(1, keepdim=True)
    std = centred.pow(2).mean(1, keepdim=True).sqrt().clamp(min=eps)
    return centred / {divisor}
'''


def _run(tmp_path, define: str, call: str):
    return run_script_probe(tmp_path, "", head=HEAD.format(define=define, call=call))


def test_a_mean_variance_normalisation_taking_the_root_twice_is_named_with_its_line(tmp_path):
    findings = _run(tmp_path, MVN.format(divisor="std.sqrt()"), "sample_mvn")
    assert slug_set(findings) == ["normaliser-not-scale-invariant"]
    f = findings[0]
    assert "sample_mvn()" in f["message"] and "power +0.50" in f["message"]
    assert f["where"].endswith("train.py:19")  # return centred / std.sqrt()


def test_a_mean_variance_normalisation_dividing_by_the_variance_is_named(tmp_path):
    findings = _run(tmp_path, MVN.format(divisor="std ** 2"), "sample_mvn")
    assert slug_set(findings) == ["normaliser-not-scale-invariant"]
    assert "power -1.00" in findings[0]["message"]


def test_correct_fixed_l2_and_power_normalisations_are_quiet(tmp_path):
    assert _run(tmp_path, MVN.format(divisor="std"), "sample_mvn") == []
    fixed = "def standardize(v):\n    return (v - MEAN) / STD\n"
    assert _run(tmp_path, fixed, "standardize") == []
    l2 = "def l2_normalize(v):\n    return v / v.norm(dim=1, keepdim=True).clamp(min=1e-12)\n"
    assert _run(tmp_path, l2, "l2_normalize") == []
    power = "def power_normalize(v):\n    return v.sign() * v.abs().sqrt()\n"
    assert _run(tmp_path, power, "power_normalize") == []
