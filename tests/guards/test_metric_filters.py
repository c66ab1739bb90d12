"""metric-off-definition on decoding filters and k-NN evaluators (overt/guards/topkfilter.py,
overt/guards/knnprobe.py; issue 33, session 46, w240 and w245): a function named as a top-k filter is called
again on a copy of its first call's scores and must keep exactly the k largest of each row; a function named as
a k-NN classifier is called again with every training label one class and the test labels another, and every
accuracy it returns must be 0.  Planted bugs of other forms than the cases' (a sort threshold one place too
far, a filter working in place, probabilities zeroed; neighbour labels read from the test labels, a numpy vote
cut wider than its voters), each with a correct twin, and correct variants (scikit-learn's classifier, a
temperature inside the filter, k = 0 meaning no filtering) stay quiet."""

from __future__ import annotations

from overt.guards import metricdef
from tests.guards.helpers import run_script_probe as _run
from tests.guards.helpers import slug_set as _slugs

SORT_FILTER = '''
def top_k_filter(logits, top_k):
    kth = logits.sort(-1, descending=True).values[..., {at}, None]
    return torch.where(logits < kth, torch.full_like(logits, float("-inf")), logits)


model.eval()
with torch.no_grad():
    logits = model(x[1400:1500])
    probs = F.softmax(top_k_filter(logits, top_k=3), -1)
    picked = torch.multinomial(probs, 1).squeeze(1)
print("sampled accuracy", (picked == y[1400:1500]).float().mean().item())
'''


def test_a_top_k_filter_whose_threshold_is_one_place_too_far_is_named_and_its_twin_is_quiet(tmp_path):
    findings = _run(tmp_path, SORT_FILTER.format(at="top_k"))
    assert _slugs(findings) == ["metric-off-definition"], findings
    assert "keeps 4 entries of 10" in findings[0]["message"], findings[0]["message"]
    assert _run(tmp_path, SORT_FILTER.format(at="top_k - 1")) == []


IN_PLACE = '''
def top_k_logits(logits, k):
    v, _ = torch.topk(logits, {kept})
    logits[logits < v[:, [-1]]] = -float("Inf")
    return logits


model.eval()
with torch.no_grad():
    out = top_k_logits(model(x[1400:1500]), 3)
print("kept", torch.isfinite(out).sum(1).float().mean().item())
'''


def test_a_filter_working_in_place_is_judged_on_its_own_input(tmp_path):
    findings = _run(tmp_path, IN_PLACE.format(kept="k - 1"))
    assert _slugs(findings) == ["metric-off-definition"], findings
    assert "keeps 2 entries of 10" in findings[0]["message"], findings[0]["message"]
    assert _run(tmp_path, IN_PLACE.format(kept="k")) == []


PROBS = '''
def filter_top_k(probs, k):
    ranks = probs.argsort(-1, descending=True).argsort(-1)
    return probs * (ranks {cmp} k).float()


model.eval()
with torch.no_grad():
    kept = filter_top_k(F.softmax(model(x[1400:1500]), -1), k=2)
print("mass kept", kept.sum(1).mean().item())
'''


def test_probabilities_zeroed_past_rank_k_plus_one_are_named_and_the_twin_is_quiet(tmp_path):
    findings = _run(tmp_path, PROBS.format(cmp="<="))
    assert _slugs(findings) == ["metric-off-definition"], findings
    assert _run(tmp_path, PROBS.format(cmp="<")) == []


QUIET_FILTERS = '''
def top_k_filter(logits, top_k, temperature=0.7):
    logits = logits / temperature
    kth = torch.topk(logits, top_k).values[..., -1:]
    return logits.masked_fill(logits < kth, float("-inf"))


def top_k_filtering(logits, top_k=0):
    if top_k == 0:
        return logits
    kth = torch.topk(logits, top_k).values[..., -1:]
    return logits.masked_fill(logits < kth + 1.0, float("-inf"))


model.eval()
with torch.no_grad():
    logits = model(x[1400:1500])
    a = top_k_filter(logits, 3)
    b = top_k_filtering(logits)
print(torch.isfinite(a).sum().item(), torch.isfinite(b).sum().item())
'''


def test_a_filter_with_a_temperature_and_k_zero_as_no_filtering_are_quiet(tmp_path):
    assert _run(tmp_path, QUIET_FILTERS) == []


KNN = '''
def knn_accuracy(train_feats, train_labels, test_feats, test_labels, k=5):
    sims = F.normalize(test_feats, dim=1) @ F.normalize(train_feats, dim=1).T
    idx = sims.topk(k, dim=1).indices
    votes = {source}[idx]
    pred = torch.mode(votes, dim=1).values
    return (pred == test_labels).float().mean().item()


model.eval()
with torch.no_grad():
    emb = model[:2](x)
print("knn", knn_accuracy(emb[:300], y[:300], emb[300:600], y[300:600]))
'''


def test_neighbour_labels_read_from_the_test_labels_are_named_and_the_twin_is_quiet(tmp_path):
    findings = _run(tmp_path, KNN.format(source="test_labels"))
    assert _slugs(findings) == ["metric-off-definition"], findings
    assert "knn_accuracy() scores test items of class" in findings[0]["message"], findings[0]["message"]
    assert _run(tmp_path, KNN.format(source="train_labels")) == []


NUMPY_TOP3 = '''
def nearest_neighbor_eval(train_x, train_y, test_x, test_y, k=1, n_classes=10):
    d = ((test_x[:, None, :] - train_x[None, :, :]) ** 2).sum(-1)
    idx = np.argsort(d, axis=1)[:, :k]
    votes = np.zeros((len(test_x), n_classes))
    for j in range(k):
        votes[np.arange(len(test_x)), train_y[idx[:, j]]] += 1
    order = np.argsort(-votes, axis=1, kind="stable")
    top1 = (order[:, 0] == test_y).mean()
    top3 = (order[:, :{cut}] == test_y[:, None]).any(1).mean()
    return top1, top3


model.eval()
with torch.no_grad():
    emb = model[:2](x).numpy()
labels = y.numpy()
print(nearest_neighbor_eval(emb[:500], labels[:500], emb[500:700], labels[500:700]))
'''


def test_a_numpy_top3_over_one_neighbour_is_named_and_its_twin_is_quiet(tmp_path):
    findings = _run(tmp_path, NUMPY_TOP3.format(cut="3"))
    assert _slugs(findings) == ["metric-off-definition"], findings
    assert _run(tmp_path, NUMPY_TOP3.format(cut="min(3, k)")) == []


SKLEARN_KNN = '''
from sklearn.neighbors import KNeighborsClassifier


@torch.no_grad()
def knn_classifier(train_features, train_labels, test_features, test_labels, k=3):
    clf = KNeighborsClassifier(n_neighbors=k).fit(train_features.numpy(), train_labels.numpy())
    return float((clf.predict(test_features.numpy()) == test_labels.numpy()).mean())


model.eval()
with torch.no_grad():
    emb = model[:2](x)
print(knn_classifier(emb[:500], y[:500], emb[500:700], y[500:700]))
'''


def test_scikit_learns_classifier_under_a_no_grad_decorator_is_quiet(tmp_path):
    assert _run(tmp_path, SKLEARN_KNN) == []


def test_the_names_claim_the_definitions():
    words = metricdef.definition_of
    assert words({"top", "k", "filter"}) == "topk-filter"
    assert words({"top", "k", "logits"}) == "topk-filter"
    assert words({"top", "k", "top", "p", "filtering"}) is None  # nucleus too: another rule
    assert words({"top", "k", "accuracy"}) is None
    assert words({"knn", "classifier"}) == "knn"
    assert words({"nearest", "neighbor", "eval"}) == "knn"
    assert words({"knn", "graph"}) is None
    assert words({"top", "p", "filter"}) == "topp-filter"
    assert words({"nucleus", "filtering"}) == "topp-filter"


NUCLEUS = '''
def top_p_filter(logits, top_p=0.9):
    sorted_logits, sorted_idx = torch.sort(logits, descending=True, dim=-1)
    cum = sorted_logits.softmax(-1).cumsum(-1)
    remove = cum > top_p
    remove[..., 1:] = remove[..., :-1].clone()
    remove[..., 0] = False
    {apply}


model.eval()
with torch.no_grad():
    out = top_p_filter(model(x[1400:1500]) / 4, top_p=0.8)
print("kept", torch.isfinite(out).sum(1).float().mean().item())
'''
UNSORTED = 'return logits.masked_fill(remove, float("-inf"))'
SCATTERED = 'return logits.masked_fill(remove.scatter(-1, sorted_idx, remove), float("-inf"))'


def test_a_nucleus_mask_applied_in_sorted_order_is_named_and_the_scattered_twin_is_quiet(tmp_path):
    findings = _run(tmp_path, NUCLEUS.format(apply=UNSORTED))
    assert _slugs(findings) == ["metric-off-definition"], findings
    assert "nucleus filter" in findings[0]["message"], findings[0]["message"]
    assert _run(tmp_path, NUCLEUS.format(apply=SCATTERED)) == []


NUCLEUS_UNSHIFTED = '''
def nucleus_filter(probs, p):
    sorted_probs, idx = probs.sort(-1, descending=True)
    keep = sorted_probs.cumsum(-1) <= p
    keep[..., 0] = True
    mask = torch.zeros_like(keep).scatter(-1, idx, keep)
    return torch.where(mask, probs, torch.zeros_like(probs))


model.eval()
with torch.no_grad():
    kept = nucleus_filter(F.softmax(model(x[1400:1500]) / 4, -1), 0.8)
print("mass", kept.sum(1).mean().item())
'''


def test_a_nucleus_filter_without_the_crossing_token_on_probabilities_is_a_convention(tmp_path):
    assert _run(tmp_path, NUCLEUS_UNSHIFTED) == []


KNN_WITH_COUNT = '''
def knn_eval(train_feats, train_labels, test_feats, test_labels, k=5):
    idx = torch.cdist(test_feats, train_feats).topk(k, largest=False).indices
    pred = torch.mode(train_labels[idx], dim=1).values
    return (pred == test_labels).float().mean().item(), len(test_labels) // 10


model.eval()
with torch.no_grad():
    emb = model[:2](x)
print(knn_eval(emb[:300], y[:300], emb[300:600], y[300:600]))
'''


def test_a_count_returned_beside_the_accuracy_is_not_read_as_one(tmp_path):
    assert _run(tmp_path, KNN_WITH_COUNT) == []
