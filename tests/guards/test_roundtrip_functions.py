"""inverse-transform-not-inverse for the script's own encoding and decoding functions (overt/guards/roundfunc.py,
issue 33 w339): a target encoding whose paired decoder does not give the targets back -- a floor division where
the decoder multiplies, a variance on one side and a standard deviation on the other -- is named with its line;
the exact pair, an encoding quantised by design to a fine grid, a clamp of a few targets and a learned
encoder/decoder pair (an autoencoder's) stay quiet.  Digits scripts under ``overt run``: the network regresses
each digit's ink centroid, encoded against a per-sample reference box."""

from __future__ import annotations

from tests.guards.helpers import run_script_probe, slug_set

SLUG = "inverse-transform-not-inverse"

HEAD = '''
import torch
from sklearn.datasets import load_digits
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)
d = load_digits()
x = torch.tensor(d.data, dtype=torch.float32) / 16
ink = x.view(-1, 8, 8)
grid = torch.arange(8.0)
cy = (ink.sum(2) * grid).sum(1) / ink.sum((1, 2))
cx = (ink.sum(1) * grid).sum(1) / ink.sum((1, 2))
target = torch.stack([cx, cy], 1)                      # the ink centroid, in pixels
box = torch.cat([torch.full((len(x), 2), 3.5), 2 + 4 * torch.rand(len(x), 2)], 1)   # centre and size
VAR = 0.5

{define}

model = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 2))
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
for step in range(30):
    i = (step * 32) % 1400
    opt.zero_grad()
    F.smooth_l1_loss(model(x[i:i + 32]), {encode}(target[i:i + 32], box[i:i + 32])).backward()
    opt.step()
with torch.no_grad():
    err = ({decode}(model(x[1500:]), box[1500:]) - target[1500:]).abs().mean()
print("error", float(err))
'''

PAIR = '''
def encode_centre(points, boxes):
    offset = points - boxes[:, :2]
    {encoded}
    return offset


def decode_centre(pred, boxes):
    return boxes[:, :2] + pred * VAR * boxes[:, 2:]
'''


def _run(tmp_path, define: str, encode: str = "encode_centre", decode: str = "decode_centre"):
    return run_script_probe(tmp_path, "", head=HEAD.format(define=define, encode=encode, decode=decode))


def test_a_floor_division_without_parentheses_is_named_with_its_line(tmp_path):
    findings = _run(tmp_path, PAIR.format(encoded="offset = offset // VAR * boxes[:, 2:]"))
    assert slug_set(findings) == [SLUG]
    f = findings[0]
    assert "decode_centre() does not undo encode_centre()" in f["message"]
    assert f["where"].endswith("train.py:21")  # offset = offset // VAR * boxes[:, 2:]


def test_a_variance_where_the_decoder_takes_the_standard_deviation_is_named(tmp_path):
    define = '''
MEAN, STD = target.mean(0), target.std(0)


def to_units(points, boxes):
    return (points - MEAN) / STD ** 2


def from_units(pred, boxes):
    return pred * STD + MEAN
'''
    findings = _run(tmp_path, define, "to_units", "from_units")
    assert slug_set(findings) == [SLUG]
    assert "from_units() does not undo to_units()" in findings[0]["message"]


def test_the_exact_pair_is_quiet(tmp_path):
    assert _run(tmp_path, PAIR.format(encoded="offset = offset / (VAR * boxes[:, 2:])")) == []


def test_encodings_lossy_by_design_are_quiet(tmp_path):
    fine_grid = PAIR.format(encoded="offset = torch.floor(offset / (VAR * boxes[:, 2:]) * 16 + 0.5) / 16")
    assert _run(tmp_path, fine_grid) == []
    few_clamped = PAIR.format(encoded="offset = (offset / (VAR * boxes[:, 2:])).clamp(-1.2, 1.2)")
    assert _run(tmp_path, few_clamped) == []


def test_a_learned_encoder_and_decoder_are_quiet(tmp_path):
    define = '''
enc, dec = nn.Linear(2, 2), nn.Linear(2, 2)


def encode_centre(points, boxes):
    return enc(points - boxes[:, :2])


def decode_centre(pred, boxes):
    return boxes[:, :2] + dec(pred)
'''
    assert SLUG not in slug_set(_run(tmp_path, define))
