"""metric-off-definition and metric-rewards-disjoint-prediction at run time (overt/guards/metricdef.py,
overt/guards/metricprobe.py; issue 33, w156, w183, w187, w194): a script's own metric named after a
well-known metric (box IoU/GIoU, WER/CER, NDCG) is recomputed by its definition on its own call's inputs,
and an overlap metric is scored on a prediction that shares nothing with its target.  Planted bugs of
several forms (torch, numpy, pure Python; evaluated with and without ``model.eval()``), each with a
correct twin, and the accepted conventions (pixel ``+ 1`` on pixel boxes, percent, per-utterance means,
exponential gains) stay quiet."""

from __future__ import annotations

import pytest

from overt.guards import metricdef, metricrefs
from tests.guards.helpers import run_script_probe as _run
from tests.guards.helpers import slug_set as _slugs

# -- box IoU ---------------------------------------------------------------------------------------

TORCH_IOU = '''
def box_iou(pred_boxes, gt_boxes):
    pad = {pad}
    lt = torch.maximum(pred_boxes[:, :2], gt_boxes[:, :2])
    rb = torch.minimum(pred_boxes[:, 2:], gt_boxes[:, 2:])
    wh = (rb - lt + pad).clamp(min=0)
    inter = wh[:, 0] * wh[:, 1]
    area = lambda b: (b[:, 2] - b[:, 0] + pad) * (b[:, 3] - b[:, 1] + pad)
    return inter / (area(pred_boxes) + area(gt_boxes) - inter)


g = torch.Generator().manual_seed(0)
corner = torch.rand(300, 2, generator=g) * 0.6
gt = torch.cat([corner, corner + 0.1 + torch.rand(300, 2, generator=g) * 0.3], 1)   # normalised to [0, 1]
model.eval()
with torch.no_grad():
    jitter = model(x[:300])[:, :4].tanh() * 0.05
print("hit rate", (box_iou(gt + jitter, gt) > 0.5).float().mean().item())
'''


def test_a_pixel_plus_one_on_normalised_torch_boxes_is_named_and_its_twin_is_quiet(tmp_path):
    findings = _run(tmp_path, TORCH_IOU.format(pad="1.0"))
    assert _slugs(findings) == ["metric-off-definition"], findings
    f = findings[0]
    assert f["where"].startswith("box_iou() at ") and "integer pixel convention" in f["message"]
    assert _run(tmp_path, TORCH_IOU.format(pad="0.0")) == []


NUMPY_IOU = '''
def iou(a, b):
    """a, b: (N, 4) boxes (x1, y1, x2, y2) in pixels."""
    iw = np.clip(np.minimum(a[:, 2], b[:, 2]) - np.maximum(a[:, 0], b[:, 0]) + 1, 0, None)
    ih = np.clip(np.minimum(a[:, 3], b[:, 3]) - np.maximum(a[:, 1], b[:, 1]) + 1, 0, None)
    inter = iw * ih
    area_a = (a[:, 2] - a[:, 0] + 1) * (a[:, 3] - a[:, 1] + 1)
    area_b = (b[:, 2] - b[:, 0] + 1) * (b[:, 3] - b[:, 1] + 1)
    return {ratio}


rng = np.random.default_rng(0)
tl = rng.integers(0, 200, (400, 2))
gt = np.concatenate([tl, tl + rng.integers(10, 60, (400, 2))], 1).astype(float)
model.eval()
with torch.no_grad():
    shift = model(x[:400])[:, :4].numpy()
pred = gt + np.round(np.tanh(shift) * 4)
print("mean IoU", iou(pred, gt).mean())
'''


def test_a_numpy_iou_without_the_intersection_taken_out_of_the_union_is_named(tmp_path):
    findings = _run(tmp_path, NUMPY_IOU.format(ratio="inter / (area_a + area_b)"))
    assert _slugs(findings) == ["metric-off-definition"], findings
    assert "matches no convention" in findings[0]["message"]


def test_the_pixel_plus_one_on_pixel_boxes_is_a_convention_and_stays_quiet(tmp_path):
    assert _run(tmp_path, NUMPY_IOU.format(ratio="inter / (area_a + area_b - inter)")) == []


GIOU = '''
def giou(b1, b2):  # centre-format boxes (cx, cy, w, h)
    def corners(b):
        return torch.cat([b[:, :2] - b[:, 2:] / 2, b[:, :2] + b[:, 2:] / 2], 1)
    a, b = corners(b1), corners(b2)
    wh = (torch.min(a[:, 2:], b[:, 2:]) - torch.max(a[:, :2], b[:, :2])).clamp(min=0)
    inter = wh[:, 0] * wh[:, 1]
    union = b1[:, 2] * b1[:, 3] + b2[:, 2] * b2[:, 3] - inter
    hull = (torch.max(a[:, 2:], b[:, 2:]) - torch.min(a[:, :2], b[:, :2])).prod(1)
    return (inter / union - (hull - union) / hull).mean()


g = torch.Generator().manual_seed(0)
t = torch.cat([torch.rand(200, 2, generator=g) * 0.6 + 0.2, torch.rand(200, 2, generator=g) * 0.2 + 0.05], 1)
with torch.no_grad():
    p = t + model(x[:200])[:, :4].tanh() * 0.03
print("giou", giou(p, t).item())
'''


def test_a_correct_centre_format_giou_evaluated_without_eval_is_quiet(tmp_path):
    assert _run(tmp_path, GIOU) == []


# -- error rates -------------------------------------------------------------------------------------

WER = '''
WORDS = ["left", "right", "up", "down", "stop", "go", "yes", "no", "on", "off"]


def levenshtein(a, b):
    d = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        prev, d[0] = d[0], i
        for j, cb in enumerate(b, 1):
            prev, d[j] = d[j], min(d[j] + 1, d[j - 1] + 1, prev + (ca != cb))
    return d[-1]


def wer(references, hypotheses):
    {body}


model.eval()
with torch.no_grad():
    guess = model(x[1400:1700]).argmax(1).tolist()
truth = y[1400:1700].tolist()
refs = [" ".join(WORDS[c] for c in truth[i:i + 6]) for i in range(0, 300, 6)]
hyps = [" ".join(WORDS[c] for c in guess[i:i + 6]) for i in range(0, 300, 6)]
print("WER", wer(refs, hyps))
'''

_CHARS = "return sum(levenshtein(r, h) for r, h in zip(references, hypotheses)) / sum(len(r) for r in references)"
_CORPUS = ("return sum(levenshtein(r.split(), h.split()) for r, h in zip(references, hypotheses)) "
           "/ sum(len(r.split()) for r in references)")
_PERCENT = ("return 100 * sum(levenshtein(r.split(), h.split()) / len(r.split()) "
            "for r, h in zip(references, hypotheses)) / len(references)")


def test_a_word_error_rate_counting_characters_is_named(tmp_path):
    findings = _run(tmp_path, WER.format(body=_CHARS))
    assert _slugs(findings) == ["metric-off-definition"], findings
    assert "counts edits of characters, not words" in findings[0]["message"]


@pytest.mark.parametrize("body", [_CORPUS, _PERCENT], ids=["corpus", "per-utterance-percent"])
def test_word_error_rates_under_accepted_conventions_are_quiet(tmp_path, body):
    assert _run(tmp_path, WER.format(body=body)) == []


def test_the_error_rate_references_read_transcripts_only_when_plain():
    assert metricrefs.transcripts(["go left", "stop"]) == ["go left", "stop"]
    assert metricrefs.transcripts(["Go left.", "stop"]) is None  # a normalisation could change it
    assert metricrefs.transcripts([1, 2]) is None
    rates = metricrefs.error_rates(["a b c d"], ["a x c"], "words")
    assert rates == [0.5, 0.5, 50.0, 50.0]


# -- NDCG --------------------------------------------------------------------------------------------

NDCG = '''
import math


def ndcg_at_k(r, k=10):
    def dcg(values):
        return sum(v / {discount} for i, v in enumerate(values[:k]))
    ideal = dcg(sorted(r, reverse=True))
    return dcg(r) / ideal if ideal else 0.0


model.eval()
with torch.no_grad():
    scores = model(x[1400:1600]).softmax(1)
totals = []
for row, label in zip(scores, y[1400:1600]):
    order = row.argsort(descending=True).tolist()
    totals.append(ndcg_at_k([1 if c == int(label) else 0 for c in order], 5))
print("NDCG@5", sum(totals) / len(totals))
'''


def test_an_ndcg_whose_discount_is_off_by_one_is_named_and_its_twin_is_quiet(tmp_path):
    findings = _run(tmp_path, NDCG.format(discount="(1.0 if i == 0 else math.log2(i + 1))"))
    assert _slugs(findings) == ["metric-off-definition"], findings
    assert "with the two swapped" in findings[0]["message"]
    assert _run(tmp_path, NDCG.format(discount="math.log2(i + 2)")) == []


TORCH_NDCG = '''
def ndcg(relevance, k=5):
    """relevance: graded relevances in ranked order (a tensor), exponential gains."""
    pos = torch.arange(2, k + 2, dtype=torch.float32).log2()
    gain = lambda r: ((2 ** r[:k]) - 1) / pos[:len(r[:k])]
    ideal = gain(relevance.sort(descending=True).values).sum()
    return (gain(relevance).sum() / ideal).item()


with torch.no_grad():
    scores = model(x[1400:1401]).softmax(1)[0]
grades = (y[1400:1410] % 4).float()
print("NDCG", ndcg(grades[scores.argsort(descending=True)]))
'''


def test_a_torch_ndcg_with_exponential_gains_is_quiet(tmp_path):
    assert _run(tmp_path, TORCH_NDCG) == []


# -- a prediction disjoint from its target -------------------------------------------------------------

BOOL_ACCURACY = '''
def accuracy(preds, labels):
    return (preds{cast} == labels{cast}).float().mean().item()


model.eval()
with torch.no_grad():
    pred = model(x[1400:]).argmax(1)
print("accuracy", accuracy(pred, y[1400:]))
'''


def test_an_accuracy_comparing_class_ids_as_booleans_is_named_and_its_twin_is_quiet(tmp_path):
    findings = _run(tmp_path, BOOL_ACCURACY.format(cast=".bool()"))
    assert _slugs(findings) == ["metric-rewards-disjoint-prediction"], findings
    assert "shifted past their range" in findings[0]["message"]
    assert _run(tmp_path, BOOL_ACCURACY.format(cast="")) == []


UNION_DICE = '''
def dice_score(pred_mask, true_mask):
    both = np.{op}(pred_mask, true_mask).sum()
    return 2.0 * both / (pred_mask.sum() + true_mask.sum())


with torch.no_grad():
    pred = (model(x[1400:]).argmax(1) >= 5).numpy()
print("dice", dice_score(pred, (y[1400:] >= 5).numpy()))
'''


def test_a_numpy_dice_that_counts_the_union_as_overlap_is_named_and_its_twin_is_quiet(tmp_path):
    # logical_or scores the truth 1 (both sides alike) but a complement 2: a disjoint prediction is rewarded
    findings = _run(tmp_path, UNION_DICE.format(op="logical_or"))
    # and its value on its own call is no Dice of the masks (overlapdef.py)
    assert _slugs(findings) == ["metric-off-definition", "metric-rewards-disjoint-prediction"], findings
    assert any("complement" in f["message"] for f in findings)
    assert _run(tmp_path, UNION_DICE.format(op="logical_and")) == []


COSINE_BLEU = '''
def bleu(hyp, ref):
    """Unigram precision of each row, items matched by {how}."""
    h, r = hyp.float().unsqueeze(-1), ref.float().unsqueeze(-1)
    same = {match}
    return same.any(-1).float().mean().item()


with torch.no_grad():
    out = model(x[1400:1600]).argmax(1).reshape(20, 10) + 1
print("bleu-1", bleu(out, (y[1400:1600].reshape(20, 10) + 1)))
'''


def test_a_bleu_matching_ids_by_cosine_is_named_and_the_equality_twin_is_quiet(tmp_path):
    bug = COSINE_BLEU.format(how="cosine", match="F.cosine_similarity(h.unsqueeze(2), r.unsqueeze(1), dim=-1) >= 1.0")
    findings = _run(tmp_path, bug)
    assert _slugs(findings) == ["metric-rewards-disjoint-prediction"], findings
    twin = COSINE_BLEU.format(how="equality", match="(h.unsqueeze(2) - r.unsqueeze(1)).norm(dim=-1) == 0")
    assert _run(tmp_path, twin) == []


# -- premises ------------------------------------------------------------------------------------------

def test_names_are_read_as_the_metric_they_claim():
    assert metricdef.definition_of({"box", "iou"}) == "iou"
    assert metricdef.definition_of({"bbox", "iou"}) == "iou"
    assert metricdef.definition_of({"generalized", "box", "iou"}) == "giou"
    assert metricdef.definition_of({"word", "error", "rate"}) == "wer"
    assert metricdef.definition_of({"cer"}) == "cer"
    assert metricdef.definition_of({"ndcg", "at", "k"}) == "ndcg"
    for other in ({"diou"}, {"iou", "loss"}):
        assert metricdef.definition_of(other) is None, other
    for masks in ({"miou"}, {"mask", "iou"}, {"mean", "iou"}):  # overlaps of masks (overlapdef.py)
        assert metricdef.definition_of(masks) == "mask-iou", masks


def test_unfamiliar_calls_stay_quiet():
    a = metricrefs.as_boxes(__import__("torch").tensor([[0.1, 0.1, 0.4, 0.5], [0.2, 0.3, 0.6, 0.9]]))
    # a flag passed beside the boxes (an IoU variant switched on): three arguments, no premise
    assert metricdef.check(None, "iou", "bbox_iou", {"box1": a, "box2": a, "GIoU": True}, {}, 0.3) is None
    # a result that is not numbers
    assert metricdef.check(None, "iou", "iou", {"a": a, "b": a}, {}, ("iou", 1.0)) is None
    # transcripts with punctuation: the metric may normalise them
    assert metricdef.check(None, "wer", "wer", {"r": ["Hello, world."], "h": ["hello world"]}, {}, 0.0) is None


# -- CTC greedy decoding ---------------------------------------------------------------------------------

CTC_LIST = """
BLANK = 0


def ctc_decode(ids):
    tokens = []
    for i in range(len(ids) - 1):
        if ids[i] != ids[i + 1] and ids[i] != BLANK:
            tokens.append(ids[i])
    if ids[-1] != {last}:
        tokens.append(ids[-1])
    return tokens


model.eval()
with torch.no_grad():
    frames = model(x[1400:1440]).argmax(1) % 3   # a path over 3 classes, blank 0
path = [int(v) for v in frames] + [2, 2, 0]
print("decoded", ctc_decode(path))
"""


def test_a_ctc_decoder_that_checks_its_last_frame_against_the_wrong_id_is_named_and_its_twin_is_quiet(tmp_path):
    # the last frame is compared with the frame before it, not with the blank: a path that ends in one
    # blank decodes with the blank as its last token
    findings = _run(tmp_path, CTC_LIST.format(last="ids[-2]"))
    assert _slugs(findings) == ["metric-off-definition"], findings
    assert "every frame repeated" in findings[0]["message"] and "ctc_decode() at" in findings[0]["where"]
    assert _run(tmp_path, CTC_LIST.format(last="BLANK")) == []


CTC_TENSOR = '''
def greedy_ctc_decode(frame_ids, blank=0):
    """frame_ids: (T,) tensor of the argmax class per frame."""
    keep = frame_ids[{start}:] != frame_ids[{prev}]
    runs = frame_ids[{start}:][keep] if {start} else torch.unique_consecutive(frame_ids)
    return runs[runs != blank]


with torch.no_grad():
    path = model(x[1400:1460]).argmax(1) % 4
print("tokens", greedy_ctc_decode(path).tolist())
'''


def test_a_tensor_ctc_decoder_that_drops_the_first_frame_is_named_and_unique_consecutive_is_quiet(tmp_path):
    findings = _run(tmp_path, CTC_TENSOR.format(start=1, prev=":-1"))
    assert _slugs(findings) == ["metric-off-definition"], findings
    assert "the same path reversed" in findings[0]["message"]
    assert _run(tmp_path, CTC_TENSOR.format(start=0, prev=":")) == []


def test_four_labels_of_a_multilabel_iou_are_no_boxes():
    torch = __import__("torch")
    probs = torch.tensor([[0.9, 0.2, 0.1, 0.7], [0.3, 0.8, 0.6, 0.1]])
    labels = torch.tensor([[1.0, 0.0, 0.0, 1.0], [0.0, 1.0, 1.0, 0.0]])
    jaccard = ((probs > 0.5) & (labels > 0.5)).sum(1) / ((probs > 0.5) | (labels > 0.5)).sum(1)
    assert metricdef.check(None, "iou", "iou", {"pred": probs, "target": labels}, {}, jaccard.mean()) is None


GLOBAL_IDEAL_NDCG = '''
import math

HELD_OUT = 3  # every query has three relevant items, some of them outside the retrieved list


def ndcg_at_k(r, k=10):
    dcg = sum(v / math.log2(i + 2) for i, v in enumerate(r[:k]))
    return dcg / sum(1 / math.log2(i + 2) for i in range(min(HELD_OUT, k)))


with torch.no_grad():
    order = model(x[1400:1401]).softmax(1)[0].argsort(descending=True).tolist()
print("NDCG", ndcg_at_k([1 if c in (1, 4, 7) else 0 for c in order], 5))
'''


def test_an_ndcg_whose_ideal_comes_from_all_relevant_items_is_quiet(tmp_path):
    # the ideal of the user's whole relevant set, not the list's own: the same for every order of the list
    assert _run(tmp_path, GLOBAL_IDEAL_NDCG) == []


def test_a_correct_iou_given_some_boxes_with_their_corners_crossed_is_quiet():
    # predictions of a regressor may cross their corners (x2 < x1); implementations differ on those rows,
    # so one value per row is judged on the rows that are boxes, and a mean is not judged at all (w108)
    torch = __import__("torch")
    gen = torch.Generator().manual_seed(0)
    tl = torch.rand(50, 2, generator=gen) * 8
    truth = torch.cat([tl, tl + 2 + torch.rand(50, 2, generator=gen) * 4], 1)
    pred = truth + torch.randn(50, 4, generator=gen)
    pred[:10, 2] = pred[:10, 0] - 1.0  # crossed corners

    def iou(a, b):
        ix = (torch.minimum(a[:, 2], b[:, 2]) - torch.maximum(a[:, 0], b[:, 0])).clamp(min=0)
        iy = (torch.minimum(a[:, 3], b[:, 3]) - torch.maximum(a[:, 1], b[:, 1])).clamp(min=0)
        area = lambda r: (r[:, 2] - r[:, 0]).clamp(min=0) * (r[:, 3] - r[:, 1]).clamp(min=0)  # noqa: E731
        return ix * iy / (area(a) + area(b) - ix * iy)

    rows = iou(pred, truth)
    assert metricdef.check(iou, "iou", "iou", {"a": pred, "b": truth}, {}, rows) is None
    assert metricdef.check(iou, "iou", "iou", {"a": pred, "b": truth}, {}, rows.mean()) is None
    wrong = rows * 0.5 + 0.5  # not an IoU on the rows that are boxes
    assert metricdef.check(iou, "iou", "iou", {"a": pred, "b": truth}, {}, wrong) is not None


LOGIT_ACCURACY = '''
def binary_accuracy(logits, labels):
    return ((logits >= 0).long() == labels).float().mean().item()


with torch.no_grad():
    margin = model(x[1400:])[:, 1] - model(x[1400:])[:, 0]
print("accuracy", binary_accuracy(margin, (y[1400:] == 1).long()))
'''


def test_logits_of_integer_labels_thresholded_at_zero_are_no_imperfect_or_disjoint_metric(tmp_path):
    # shifted label ids passed as logits would be read as scores (2.0 >= 0): no disjoint premise; the labels
    # themselves as logits put class 0 on the boundary (0.0 >= 0): -1/+1 is the perfect prediction there
    assert _run(tmp_path, LOGIT_ACCURACY) == []
