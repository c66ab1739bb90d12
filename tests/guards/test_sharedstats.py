"""transform-statistics-shared (overt/guards/sharedstats.py, issue 33 w382): fitted transforms that share one
statistics object through a default argument of ``__init__`` -- a dict default filled by ``fit``, a statistics
object default -- are named at the ``__init__`` line; statistics built per object, one object passed to both on
purpose (pooled statistics by design), a default that holds no fitted values (a configuration) and a single
transform stay quiet.  Digits scripts under ``overt run``: the 64 pixel features are standardised by one scaler
fitted on the training rows and the same digits seen by a second camera (another gain and offset) by another."""

from __future__ import annotations

from tests.guards.helpers import run_script_probe, slug_set

SLUG = "transform-statistics-shared"

HEAD = '''
import torch
from sklearn.datasets import load_digits
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)
d = load_digits()
x = torch.tensor(d.data, dtype=torch.float32)
y = torch.tensor(d.target)

{define}

{build}
x2 = x * 4 + 10 + torch.randn_like(x)   # the same digits from a second camera, at another gain and offset
xs = torch.cat([pixels.fit_transform(x[:1400]), camera.fit_transform(x2[:1400])], 1)
model = nn.Sequential(nn.Linear(128, 32), nn.ReLU(), nn.Linear(32, 10))
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
for step in range(30):
    i = (step * 32) % 1350
    opt.zero_grad()
    F.cross_entropy(model(xs[i:i + 32]), y[i:i + 32]).backward()
    opt.step()
with torch.no_grad():
    pred = model(torch.cat([pixels.transform(x[1400:]), camera.transform(x2[1400:])], 1)).argmax(1)
print("accuracy", float((pred == y[1400:]).float().mean()))
'''

DICT_SCALER = '''
class Standardiser:
    def __init__(self, eps=1e-6, stats={default}):
        self.eps = eps
        self.stats = {init}

    def fit(self, v):
        self.stats["mean"] = v.mean(0)
        self.stats["std"] = v.std(0) + self.eps
        return self

    def fit_transform(self, v):
        return self.fit(v).transform(v)

    def transform(self, v):
        return (v - self.stats["mean"]) / self.stats["std"]

    def inverse_transform(self, v):
        return v * self.stats["std"] + self.stats["mean"]
'''

OBJECT_SCALER = '''
class MinMax:
    def fit(self, v):
        self.low, self.high = v.min(0).values, v.max(0).values + 1e-6


class Scaler:
    def __init__(self, stats={default}):
        self.stats = {init}

    def fit_transform(self, v):
        self.stats.fit(v)
        return self.transform(v)

    def transform(self, v):
        return (v - self.stats.low) / (self.stats.high - self.stats.low)

    def inverse_transform(self, v):
        return v * (self.stats.high - self.stats.low) + self.stats.low
'''


def _run(tmp_path, define: str, build: str):
    return run_script_probe(tmp_path, "", head=HEAD.format(define=define, build=build))


def test_a_dict_default_filled_by_fit_is_named(tmp_path):
    define = DICT_SCALER.format(default="{}", init="stats")
    findings = _run(tmp_path, define, "pixels, camera = Standardiser(), Standardiser()")
    assert SLUG in slug_set(findings), findings
    f = next(f for f in findings if f["slug"] == SLUG)
    assert f["where"].startswith("Standardiser.__init__ at ") and "train.py:" in f["where"] and "`stats`" in f["message"], f
    assert "pixels, camera" in f["message"] and "(mean, std)" in f["message"], f


def test_a_statistics_object_default_is_named(tmp_path):
    define = OBJECT_SCALER.format(default="MinMax()", init="stats")
    findings = _run(tmp_path, define, "pixels = Scaler()\ncamera = Scaler()")
    assert SLUG in slug_set(findings), findings


def test_statistics_built_per_object_are_silent(tmp_path):
    define = OBJECT_SCALER.format(default="None", init="stats if stats is not None else MinMax()")
    findings = _run(tmp_path, define, "pixels, camera = Scaler(), Scaler()")
    assert SLUG not in slug_set(findings), findings


def test_one_statistics_object_passed_on_purpose_is_silent(tmp_path):
    """Pooled statistics by design: the program hands one object to both; no default is shared."""
    define = OBJECT_SCALER.format(default="None", init="stats if stats is not None else MinMax()")
    findings = _run(tmp_path, define, "pooled = MinMax()\npixels, camera = Scaler(pooled), Scaler(pooled)")
    assert SLUG not in slug_set(findings), findings


def test_a_shared_configuration_default_and_a_single_transform_are_silent(tmp_path):
    define = DICT_SCALER.format(default="{}", init="dict(stats)") + '''

class Config:
    pass


class Clipper:
    def __init__(self, config=Config()):
        self.config = config

    def fit(self, v):
        return self


clip_a, clip_b = Clipper(), Clipper()
'''
    findings = _run(tmp_path, define, "pixels, camera = Standardiser(), Standardiser()")
    assert SLUG not in slug_set(findings), findings
