"""box-format-mismatch (overt/guards/boxformat.py; issue 33, w132): a box function of the script that
reads corners (x1, y1, x2, y2), given data boxes in another format.  A real small run: an MLP regresses
the box around each digit's ink (scikit-learn's digits, each placed at random on a 16 x 16 canvas) under ``overt run``.  Planted bugs of
several forms (a GIoU loss given centre boxes, an IoU loss given corner-size boxes, a flip that leaves
the corners unswapped), each with its correct twin; programs that read another format on purpose (a loss
that converts centre boxes itself, a format flag) and a corner regressor whose first predictions are no
boxes stay quiet."""

from __future__ import annotations

import textwrap

import torch

from overt.guards import boxformat
from tests.guards.helpers import run_script_probe as _run
from tests.guards.helpers import slug_set as _slugs

SLUG = "box-format-mismatch"

HEAD = '''
import torch
from sklearn.datasets import load_digits
from torch import nn

torch.manual_seed(0)
d = load_digits()
g = torch.Generator().manual_seed(1)
digit = torch.tensor(d.data, dtype=torch.float32).view(-1, 8, 8) / 16
shift = torch.randint(0, 9, (len(digit), 2), generator=g)  # each digit placed at random on a 16 x 16 canvas
canvas = torch.zeros(len(digit), 16, 16)
for k, (dx, dy) in enumerate(shift.tolist()):
    canvas[k, dy:dy + 8, dx:dx + 8] = digit[k]
x = canvas.view(-1, 256)
ink = canvas > 0.25
cols, rows = ink.any(1), ink.any(2)
first = lambda m: m.float().argmax(1)
last = lambda m: 15 - m.flip(1).float().argmax(1)
corners = torch.stack([first(cols), first(rows), last(cols) + 1, last(rows) + 1], 1).float() / 16  # x1 y1 x2 y2
centres = torch.cat([(corners[:, :2] + corners[:, 2:]) / 2, corners[:, 2:] - corners[:, :2]], 1)
sizes = torch.cat([corners[:, :2], corners[:, 2:] - corners[:, :2]], 1)


def to_corners(b):
    return torch.cat([b[:, :2] - b[:, 2:] / 2, b[:, :2] + b[:, 2:] / 2], 1)


def from_sizes(b):
    return torch.cat([b[:, :2], b[:, :2] + b[:, 2:]], 1)


def iou_terms(b1, b2):
    area1 = (b1[:, 2] - b1[:, 0]) * (b1[:, 3] - b1[:, 1])
    area2 = (b2[:, 2] - b2[:, 0]) * (b2[:, 3] - b2[:, 1])
    wh = (torch.min(b1[:, 2:], b2[:, 2:]) - torch.max(b1[:, :2], b2[:, :2])).clamp(min=0)
    inter = wh[:, 0] * wh[:, 1]
    union = area1 + area2 - inter
    hull = (torch.max(b1[:, 2:], b2[:, 2:]) - torch.min(b1[:, :2], b2[:, :2])).clamp(min=0).prod(1)
    return inter / (union + 1e-7), union, hull


def giou_loss(pred, target):
    iou, union, hull = iou_terms(pred, target)
    return (1 - (iou - (hull - union) / (hull + 1e-7))).mean()


def iou_loss(boxes_a, boxes_b):
    return (1 - iou_terms(boxes_a, boxes_b)[0]).sum()


model = nn.Sequential(nn.Linear(256, 64), nn.ReLU(), nn.Linear(64, 4), nn.Sigmoid())
opt = torch.optim.Adam(model.parameters(), lr=3e-3)
'''

CENTRES = '''
for step in range(80):
    i = (step * 64) % 1400
    pred = model(x[i:i + 64])
    opt.zero_grad()
    {loss}.backward()
    opt.step()
with torch.no_grad():
    print("val IoU", iou_terms(to_corners(model(x[1400:])), corners[1400:])[0].mean().item())
'''


def test_a_giou_loss_given_centre_boxes_is_named_at_its_call_and_its_twin_is_quiet(tmp_path):
    findings = _run(tmp_path, CENTRES.format(loss="giou_loss(pred, centres[i:i + 64])"), head=HEAD)
    assert _slugs(findings) == [SLUG], findings
    f = findings[0]
    assert "giou_loss() defined at" in f["message"] and "'target'" in f["message"], f
    assert "x2 < x1" in f["message"] and f["where"].endswith("train.py:58"), f
    twin = _run(tmp_path, CENTRES.format(loss="giou_loss(to_corners(pred), to_corners(centres[i:i + 64]))"),
                head=HEAD)
    assert twin == []


SIZES = '''
for epoch in range(2):
    for i in range(0, 1400, 50):
        opt.zero_grad()
        iou_loss({pred}, {target}).backward()
        opt.step()
'''


def test_an_iou_loss_given_corner_size_boxes_is_named_and_its_twin_is_quiet(tmp_path):
    bug = SIZES.format(pred="from_sizes(model(x[i:i + 50]) * 0.5)", target="sizes[i:i + 50]")
    findings = _run(tmp_path, bug, head=HEAD)
    assert _slugs(findings) == [SLUG], findings
    assert "'boxes_b'" in findings[0]["message"]
    twin = SIZES.format(pred="from_sizes(model(x[i:i + 50]) * 0.5)", target="from_sizes(sizes[i:i + 50])")
    assert _run(tmp_path, twin, head=HEAD) == []


FLIP = '''
def flipped(b):  # mirror the image's boxes left to right
    return {flip}


for step in range(80):
    i = (step * 64) % 1400
    inputs, target = x[i:i + 64], corners[i:i + 64]
    if step % 2:
        inputs, target = inputs.view(-1, 16, 16).flip(-1).reshape(-1, 256), flipped(target)
    pred = model(inputs)
    opt.zero_grad()
    giou_loss(torch.cat([pred[:, :2], pred[:, :2] + pred[:, 2:]], 1), target).backward()
    opt.step()
'''


def test_a_flip_that_leaves_the_corners_unswapped_is_named_and_its_twin_is_quiet(tmp_path):
    bug = FLIP.format(flip="torch.stack([1 - b[:, 0], b[:, 1], 1 - b[:, 2], b[:, 3]], 1)")
    assert _slugs(_run(tmp_path, bug, head=HEAD)) == [SLUG]
    twin = FLIP.format(flip="torch.stack([1 - b[:, 2], b[:, 1], 1 - b[:, 0], b[:, 3]], 1)")
    assert _run(tmp_path, twin, head=HEAD) == []


def test_a_loss_that_converts_centre_boxes_itself_stays_quiet(tmp_path):
    body = textwrap.dedent('''
    def giou_box_loss(pred, target):  # DETR-style: centre boxes in, converted here
        return giou_loss(to_corners(pred), to_corners(target))


    ''') + CENTRES.format(loss="giou_box_loss(pred, centres[i:i + 64])")
    assert _run(tmp_path, body, head=HEAD) == []


def test_a_format_flag_and_a_corner_regressor_whose_first_outputs_are_no_boxes_stay_quiet(tmp_path):
    body = '''
    def bbox_iou(box1, box2, x1y1x2y2=True):
        if not x1y1x2y2:
            box1, box2 = to_corners(box1), to_corners(box2)
        return iou_terms(box1, box2)[0]


    raw = nn.Linear(256, 4)  # corners regressed without constraint: the first outputs are no boxes
    opt2 = torch.optim.Adam(raw.parameters(), lr=1e-2)
    for step in range(60):
        i = (step * 64) % 1400
        opt2.zero_grad()
        (iou_loss(raw(x[i:i + 64]), corners[i:i + 64]) + (1 - bbox_iou(raw(x[i:i + 64]), centres[i:i + 64],
                                                                      x1y1x2y2=False)).sum()).backward()
        opt2.step()
    '''
    assert _run(tmp_path, body, head=HEAD) == []


def test_which_functions_are_box_operations():
    def giou_loss(pred, target):
        return pred

    def box_cxcywh_to_xyxy(b):
        return b

    def bbox_iou(box1, box2, x1y1x2y2=True):
        return box1

    def accuracy(pred, target):
        return pred

    assert boxformat.box_function(giou_loss)
    assert not boxformat.box_function(box_cxcywh_to_xyxy)
    assert not boxformat.box_function(bbox_iou)
    assert not boxformat.box_function(accuracy)


def test_the_probe_tells_a_corner_function_from_one_that_converts():
    def corner_iou(a, b):
        lt, rb = torch.max(a[:, :2], b[:, :2]), torch.min(a[:, 2:], b[:, 2:])
        inter = (rb - lt).clamp(min=0).prod(1)
        area = lambda z: (z[:, 2:] - z[:, :2]).prod(1)
        return inter / (area(a) + area(b) - inter)

    def centre_iou(a, b):
        return corner_iou(torch.cat([a[:, :2] - a[:, 2:] / 2, a[:, :2] + a[:, 2:] / 2], 1),
                          torch.cat([b[:, :2] - b[:, 2:] / 2, b[:, :2] + b[:, 2:] / 2], 1))

    assert boxformat.reads_corners(corner_iou, 1.0, torch.float32) is True
    assert boxformat.reads_corners(lambda a, b: 1 - corner_iou(a, b).mean(), 640.0, torch.float32) is True
    assert boxformat.reads_corners(centre_iou, 1.0, torch.float32) is False
    assert boxformat.reads_corners(lambda a, b: (a - b).abs().sum(), 1.0, torch.float32) is None
