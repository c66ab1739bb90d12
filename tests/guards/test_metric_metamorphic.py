"""Metamorphic probes of ranking metrics and span extraction (overt/guards/rankorder.py, overt/guards/spantext.py,
overt/guards/latecalls.py; issue 33, session 47, w260, w261, w274): a ranking metric's value does not move when
its items are listed in reverse (``ranking-metric-on-labels``) or when each row's candidates are renamed
(``metric-off-definition``); a span extracted from token offsets with a word's first and last token is that word
(``metric-imperfect-on-truth``).  Planted bugs of other forms than the cases' (an AUC ranked by the hard
prediction, a mAP@k over a top-k re-sorted by class index, an end offset read as inclusive over sub-word tokens),
each with a correct twin, and correct variants that stay quiet (scikit-learn's tie-aware average precision, an
answer normaliser that drops articles and case)."""

from __future__ import annotations

from tests.guards.helpers import run_script_probe as _run
from tests.guards.helpers import slug_set as _slugs

RECORDS = '''
model.eval()
with torch.no_grad():
    prob = F.softmax(model(x[1400:1700]), -1)[:, 3]
rows = [(float(y[1400 + k] == 3), float(p > 0.5), float(p)) for k, p in enumerate(prob.tolist())]


def roc_auc(rows):
    ranked = sorted(rows, key=lambda r: r[{key}], reverse=True)
    pos = sum(r[0] for r in ranked)
    neg = len(ranked) - pos
    seen_neg, area = 0, 0.0
    for r in ranked:
        if r[0] == 1:
            area += neg - seen_neg
        else:
            seen_neg += 1
    return area / (pos * neg)


print("auc", roc_auc(rows))
'''


def test_an_auc_ranked_by_the_hard_prediction_field_is_named_after_the_last_forward_and_its_twin_is_quiet(tmp_path):
    findings = _run(tmp_path, RECORDS.format(key=1))
    assert _slugs(findings) == ["ranking-metric-on-labels"], findings
    assert "listed in reverse" in findings[0]["message"], findings[0]["message"]
    assert "train.py:" in findings[0]["message"]
    assert _run(tmp_path, RECORDS.format(key=2)) == []


ALIGNED = '''
def average_precision(scores, labels):
    order = torch.argsort({key}, descending=True, stable=True)
    hits = labels[order].float()
    precision = hits.cumsum(0) / torch.arange(1, len(hits) + 1)
    return (precision * hits).sum().item() / hits.sum().item()


def sklearn_ap(scores, labels):
    from sklearn.metrics import average_precision_score
    return average_precision_score(labels.numpy(), scores.numpy())


model.eval()
with torch.no_grad():
    s = F.softmax(model(x[1400:1700]), -1)[:, 3]
t = (y[1400:1700] == 3).long()
print("ap", average_precision(s, t), sklearn_ap((s > 0.5).float(), t))
'''


def test_an_average_precision_ranked_by_thresholded_scores_is_named_and_its_twin_is_quiet(tmp_path):
    findings = _run(tmp_path, ALIGNED.format(key="(scores > 0.5).float()"))
    assert _slugs(findings) == ["ranking-metric-on-labels"], findings
    assert "average_precision()" in findings[0]["message"], findings[0]["message"]
    # the twin ranks by the scores; scikit-learn's tie-aware AP of hard predictions is the lint's, not this probe's
    assert _run(tmp_path, ALIGNED.format(key="scores")) == []


MAP_AT_K = '''
def map_at_k(logits, targets, k=5):
    top = torch.topk(logits, k, dim=1).indices{resort}
    hit = top == targets[:, None]
    ranks = torch.arange(1, k + 1).float()
    return (hit.float() / ranks).sum(1).mean().item()


def top_k_accuracy(logits, labels, k=3):
    return (logits.topk(k, dim=1).indices == labels[:, None]).any(1).float().mean().item()


model.eval()
with torch.no_grad():
    out = model(x[1400:1700])
print("map@5", map_at_k(out, y[1400:1700]), "top3", top_k_accuracy(out, y[1400:1700]))
'''


def test_a_map_at_k_over_a_top_k_resorted_by_class_index_is_named_and_its_twin_is_quiet(tmp_path):
    findings = _run(tmp_path, MAP_AT_K.format(resort=".sort(dim=1).values"))
    assert _slugs(findings) == ["metric-off-definition"], findings
    assert "renamed" in findings[0]["message"] and "map_at_k()" in findings[0]["message"], findings[0]["message"]
    assert _run(tmp_path, MAP_AT_K.format(resort="")) == []


SPANS = '''
import re
import string

rng = np.random.default_rng(0)
vocab = ["".join(rng.choice(list("abcdefghij"), size=rng.integers(3, 8))) for _ in range(40)]


def tokenize(text):
    """Pieces of at most three characters, with their character offsets."""
    offsets = []
    for m in re.finditer(r"\\S+", text):
        for a in range(m.start(), m.end(), 3):
            offsets.append((a, min(a + 3, m.end())))
    return offsets


def extract_answer(context, offsets, start, end):
    return context[offsets[start][0]:offsets[end][1]{cut}]


def normalised_answer(context, offsets, start, end):
    text = context[offsets[start][0]:offsets[end][1]].lower()
    text = "".join(ch for ch in text if ch not in string.punctuation)
    return " ".join(w for w in text.split() if w not in ("a", "an", "the"))


model.eval()
exact = []
with torch.no_grad():
    pred = model(x[1400:1420]).argmax(1)
for k, p in enumerate(pred.tolist()):
    words = [vocab[(k * 7 + j) % 40] for j in range(8)]
    context = " ".join(words[:4] + ["The"] + words[4:])
    offsets = tokenize(context)
    first = sum(len(range(0, len(w), 3)) for w in words[:2])
    last = first + len(range(0, len(words[2]), 3)) - 1
    exact.append(extract_answer(context, offsets, first, last) == words[2])
    normalised_answer(context, offsets, first, last)
print("exact match", sum(exact) / len(exact))
'''


def test_an_answer_whose_end_offset_is_read_as_inclusive_is_named_and_its_twin_is_quiet(tmp_path):
    findings = _run(tmp_path, SPANS.format(cut=" - 1"))
    assert _slugs(findings) == ["metric-imperfect-on-truth"], findings
    assert "extract_answer()" in findings[0]["message"], findings[0]["message"]
    # the twin, and a function that normalises the answer (case, punctuation, articles), stay quiet
    assert _run(tmp_path, SPANS.format(cut="")) == []


QUIET_RANKINGS = '''
def top_k_accuracy(net, features, labels, k=3):
    return (net(features).topk(k, dim=1).indices == labels[:, None]).any(1).float().mean().item()


def average_precision(ranked):
    """Takes the detections already in score order, as its callers pass them."""
    hits, total = 0, 0.0
    for rank, (score, label) in enumerate(ranked, 1):
        if label == 1:
            hits += 1
            total += hits / rank
    return total / max(hits, 1)


def mrr(scores, labels):
    order = np.argsort(-scores, axis=1)
    ranks = np.nonzero(order == labels[:, None])[1] + 1
    return float(np.mean(1.0 / ranks))


model.eval()
with torch.no_grad():
    out = model(x[1400:1700])
    acc = top_k_accuracy(model, x[1400:1700], y[1400:1700])
p = F.softmax(out, -1)[:, 3].tolist()
ranked = sorted(((s, int(y[1400 + k] == 3)) for k, s in enumerate(p)), reverse=True)
print(acc, average_precision(ranked), mrr(out.numpy(), y[1400:1700].numpy()))
'''


def test_a_metric_that_runs_the_model_a_list_given_in_score_order_and_a_correct_mrr_are_quiet(tmp_path):
    # the features of a function that runs the model are no scores to rename; a list passed already sorted by
    # its scores may be the ranking the function takes as given
    assert _run(tmp_path, QUIET_RANKINGS) == []
