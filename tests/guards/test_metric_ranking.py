"""metric-off-definition on ranking and reconstruction metrics (overt/guards/metricrank.py; issue 33, w209,
w211): a script's recall@k / precision@k / hit@k / MRR is recomputed on its own call's ranked list (and on
the same list with its relevant items ranked first), a PSNR's value is read as the peak it implies and
compared with the range its images span, and an MAE/MSE/RMSE of integer arrays is recomputed in floating
point.  Planted bugs of several forms (pure Python ids, numpy 0/1 relevances, torch tensors; functions
called inside and outside an evaluation), each with a correct twin, and the accepted conventions (ids as a
set, percent, k implied by the list, a list shorter than k, peaks of 1, 255, max - min and per-image means)
stay quiet."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from overt.guards import metricdef
from tests.guards.helpers import METRIC_HEAD as HEAD
from tests.guards.helpers import run_script_probe as _run
from tests.guards.helpers import slug_set as _slugs

# -- ranking ---------------------------------------------------------------------------------------

IDS = '''
def recall_at_k(retrieved, relevant, k=5):
    hits = len(set(retrieved[:k]) & set(relevant))
    return {ratio}


emb = model[0](x).detach()
model.eval()
with torch.no_grad():
    sims = F.normalize(emb[:50], dim=1) @ F.normalize(emb, dim=1).T
    order = sims.argsort(1, descending=True)[:, 1:21].tolist()
scores = [recall_at_k(row, {{j for j in range(len(y)) if y[j] == y[i] and j != i}}) for i, row in enumerate(order)]
print("recall@5", sum(scores) / len(scores))
'''


def test_a_pure_python_recall_at_k_divided_by_k_is_named_and_its_twin_is_quiet(tmp_path):
    findings = _run(tmp_path, IDS.format(ratio="hits / k"))
    assert _slugs(findings) == ["metric-off-definition"], findings
    f = findings[0]
    assert f["where"].startswith("recall_at_k() at ") and "it is precision@5" in f["message"], f["message"]
    assert _run(tmp_path, IDS.format(ratio="hits / len(relevant)")) == []
    assert _run(tmp_path, IDS.format(ratio="100.0 * hits / len(set(relevant))")) == []  # percent


NUMPY_PRECISION = '''
def precision_at_k(r, k):
    """r: 0/1 relevances of one query's ranked list."""
    top = np.asarray(r)[:k]
    return top.sum() / {denom}


model.eval()
with torch.no_grad():
    scores = model(x[1400:1600]).softmax(1)[:, 3].numpy()
ranked = (y[1400:1600].numpy() == 3)[np.argsort(-scores)].astype(int)
print("P@10", precision_at_k(ranked, 10))
'''


def test_a_numpy_precision_at_k_over_the_relevant_count_is_named_and_its_twin_is_quiet(tmp_path):
    findings = _run(tmp_path, NUMPY_PRECISION.format(denom="np.asarray(r).sum()"))
    assert _slugs(findings) == ["metric-off-definition"], findings
    assert "precision@10" in findings[0]["message"]
    assert _run(tmp_path, NUMPY_PRECISION.format(denom="k")) == []


TORCH_MRR = '''
def mean_reciprocal_rank(ranked_ids, relevant_ids):
    hit = torch.isin(ranked_ids, relevant_ids).nonzero().flatten()
    if hit.numel() == 0:
        return 0.0
    return {value}


model.eval()
with torch.no_grad():
    ranked = model(x[:1]).argsort(1, descending=True)[0]
print("MRR", mean_reciprocal_rank(ranked, torch.tensor([int(y[0]), (int(y[0]) + 1) % 10, (int(y[0]) + 2) % 10])))
'''


def test_a_torch_mrr_averaging_every_relevant_rank_is_named_and_its_twin_is_quiet(tmp_path):
    findings = _run(tmp_path, TORCH_MRR.format(value="(1.0 / (hit + 1).float()).mean().item()"))
    assert _slugs(findings) == ["metric-off-definition"], findings
    assert "MRR" in findings[0]["message"]
    assert _run(tmp_path, TORCH_MRR.format(value="1.0 / (hit[0].item() + 1)")) == []


HITS = '''
def hit_at_k(preds, targets):
    """preds: the top-k ids recommended (k implied by the list); targets: the held-out items."""
    return {value}


model.eval()
with torch.no_grad():
    top = model(x[:1]).topk(4).indices[0].tolist()
print("hit", hit_at_k(top, [int(y[0]), (int(y[0]) + 5) % 10]))
'''


def test_a_hit_rate_that_counts_hits_is_named_and_its_twin_with_k_implied_is_quiet(tmp_path):
    findings = _run(tmp_path, HITS.format(value="sum(p in targets for p in preds)"))
    assert _slugs(findings) == ["metric-off-definition"], findings
    assert "the number of hits in the top 4" in findings[0]["message"]
    assert _run(tmp_path, HITS.format(value="float(any(p in targets for p in preds))")) == []


def test_ranking_conventions_and_unfamiliar_calls():
    rel = {"retrieved": [3, 1, 7], "relevant": [1, 2], "k": 10}
    # a list shorter than k: precision over the list's length is a convention
    assert metricdef.check(None, "precision@k", "precision_at_k", rel, rel, 1 / 3) is None
    assert metricdef.check(None, "precision@k", "precision_at_k", rel, rel, 1 / 10) is None
    assert metricdef.check(None, "recall@k", "recall_at_k", rel, rel, 0.5) is None
    assert metricdef.check(None, "recall@k", "recall_at_k", rel, rel, 0.1) is not None
    # roles that the parameter names do not tell: silent
    anon = {"a": [3, 1, 7], "b": [1, 2], "k": 2}
    assert metricdef.check(None, "recall@k", "recall_at_k", anon, anon, 0.1) is None
    # duplicated ids in the ranked list, a batch of lists, a further switch: silent
    dup = {"retrieved": [1, 1, 7], "relevant": [1, 2], "k": 3}
    assert metricdef.check(None, "recall@k", "recall_at_k", dup, dup, 1.0) is None
    # one held-out item as the relevant set: an MRR with the rank counted from 0 is named, from 1 quiet
    one = {"ranked_items": [4, 9, 2, 7], "target_item": 2}
    found = metricdef.check(None, "mrr", "mrr", one, one, 1 / 2)
    assert found is not None and "counted from 0" in found[0], found
    assert metricdef.check(None, "mrr", "mrr", one, one, 1 / 3) is None
    # a 0/1 relevance per document beside ranked ids: no list of relevant ids
    per_doc = {"retrieved": [3, 1, 0, 2], "relevant": [0, 1, 1, 0], "k": 2}
    assert metricdef.check(None, "recall@k", "recall_at_k", per_doc, per_doc, 0.1) is None
    flag = {"retrieved": [3, 1, 7], "relevant": [1, 2], "k": 3}
    assert metricdef.check(None, "recall@k", "recall_at_k", flag, {**flag, "capped": True}, 1.0) is None


def test_names_of_ranking_and_reconstruction_metrics():
    assert metricdef.definition_of({"recall", "at", "k"}) == "recall@k"
    assert metricdef.definition_of({"recall", "10"}) == "recall@k"
    assert metricdef.definition_of({"precision", "at", "k"}) == "precision@k"
    assert metricdef.definition_of({"mean", "reciprocal", "rank"}) == "mrr"
    assert metricdef.definition_of({"hit", "rate", "at", "10"}) == "hit@k"
    assert metricdef.definition_of({"psnr", "mean"}) == "psnr"
    assert metricdef.definition_of({"compute", "rmse"}) == "rmse"
    for other in ({"recall"}, {"precision"}, {"hit", "rate"}, {"average", "precision", "at", "k"}, {"map", "at", "k"},
                  {"psnr", "loss"}, {"mse", "loss"}):
        assert metricdef.definition_of(other) is None, other


# -- reconstruction ---------------------------------------------------------------------------------

TORCH_PSNR = '''
def psnr(pred, target{peak_param}):
    mse = F.mse_loss(pred, target)
    return (10 * torch.log10({peak} ** 2 / mse)).item()


decoder = nn.Linear(10, 64)
images = x[:200] * {scale} + {shift}              # the images in the range the autoencoder sees
dec_opt = torch.optim.Adam(decoder.parameters(), lr=1e-2)
for step in range(30):
    dec_opt.zero_grad()
    F.mse_loss(decoder(model(x[:200]).detach()), images).backward()
    dec_opt.step()
model.eval()
with torch.no_grad():
    recon = decoder(model(x[:200]))
print("PSNR", psnr(recon, images{peak_arg}))
'''


def _psnr(peak_param: str = "", peak: str = "1.0", scale: str = "2", shift: str = "- 1", peak_arg: str = "") -> str:
    return TORCH_PSNR.format(peak_param=peak_param, peak=peak, scale=scale, shift=shift, peak_arg=peak_arg)


def test_a_torch_psnr_with_peak_1_on_images_in_minus_1_1_is_named_and_its_twins_are_quiet(tmp_path):
    findings = _run(tmp_path, _psnr())
    assert _slugs(findings) == ["metric-off-definition"], findings
    f = findings[0]
    assert f["where"].startswith("psnr() at ") and "implies a peak value of 1" in f["message"], f["message"]
    assert _run(tmp_path, _psnr(peak="2.0")) == []                                 # the range of [-1, 1]
    assert _run(tmp_path, _psnr(shift="+ 0", scale="1")) == []                      # peak 1 on [0, 1]
    assert _run(tmp_path, _psnr(peak="255.0", shift="+ 0", scale="255")) == []      # peak 255 on [0, 255]
    assert _run(tmp_path, _psnr(peak_param=", data_range=None", peak="(target.max() - target.min())",
                                peak_arg=", data_range=None")) == []                 # max - min of the target


NUMPY_PER_IMAGE = '''
def batch_psnr(img, imclean, data_range):
    """The mean of the images' PSNRs (a convention of its own: not the PSNR of the pooled MSE)."""
    out = []
    for a, b in zip(img, imclean):
        out.append(10 * np.log10(data_range ** 2 / np.mean((a - b) ** 2)))
    return float(np.mean(out))


model.eval()
with torch.no_grad():
    noisy = (x[:100] + 0.1 * torch.randn(100, 64)).numpy().reshape(100, 8, 8)
clean = x[:100].numpy().reshape(100, 8, 8)
print("PSNR", batch_psnr(noisy, clean, {peak}))
'''


def test_a_per_image_numpy_psnr_is_quiet_at_the_data_range_and_named_below_it(tmp_path):
    assert _run(tmp_path, NUMPY_PER_IMAGE.format(peak="1.0")) == []
    findings = _run(tmp_path, NUMPY_PER_IMAGE.format(peak="0.5"))
    assert _slugs(findings) == ["metric-off-definition"], findings


UINT8_MAE = '''
def mae(pred, target):
    {cast}
    return float(np.mean(np.abs(pred - target)))


model.eval()
with torch.no_grad():
    recon = torch.sigmoid(model(x[:100]) @ torch.ones(10, 64) * 0.1).numpy()
pred8 = (recon * 255).astype(np.uint8)
true8 = (x[:100].numpy() * 255).astype(np.uint8)
print("MAE (8-bit levels)", mae(pred8, true8))
'''


def test_an_mae_computed_in_uint8_is_named_and_its_float_twin_is_quiet(tmp_path):
    findings = _run(tmp_path, UINT8_MAE.format(cast="pass"))
    assert _slugs(findings) == ["metric-off-definition"], findings
    assert "uint8 arithmetic" in findings[0]["message"]
    twin = "pred, target = pred.astype(np.float64), target.astype(np.float64)"
    assert _run(tmp_path, UINT8_MAE.format(cast=twin)) == []


def test_a_torch_rmse_of_uint8_tensors_is_named_and_float_inputs_are_left_alone():
    import torch

    a = torch.tensor([[10, 200, 3], [0, 5, 250]], dtype=torch.uint8)  # differences of tens: the squares overflow
    b = torch.tensor([[60, 150, 3], [40, 5, 205]], dtype=torch.uint8)
    wrapped = float(((a - b) ** 2).float().mean().sqrt())
    given = {"output": a, "target": b}
    found = metricdef.check(None, "rmse", "rmse", given, given, wrapped)
    assert found is not None and "uint8" in found[0]
    right = float(((a.float() - b.float()) ** 2).mean().sqrt())
    assert metricdef.check(None, "rmse", "rmse", given, given, right) is None
    floats = {"output": a.float(), "target": b.float()}
    assert metricdef.check(None, "rmse", "rmse", floats, floats, wrapped) is None  # no integer arithmetic


GUARD_PSNR = HEAD + '''
import overt
def psnr(a, b, factor=1.0):
    return 10 * np.log10(factor ** 2 / float(((a - b) ** 2).mean()))


mean, std = x.mean().item(), x.std().item()
xs = (x - mean) / std
g = overt.guard(model, opt, report_path=REPORT)
for step in range(20):
    opt.zero_grad()
    out = model(xs[:64])
    F.cross_entropy(out, y[:64]).backward()
    opt.step()
    if step == 10:
        noisy = xs[:64] + 0.05 * torch.randn(64, 64)
        print("PSNR", psnr(noisy, xs[:64], factor={factor}))
g.report()
'''


@pytest.mark.slow
def test_a_psnr_called_inside_the_training_loop_under_overt_guard_is_named(tmp_path):
    import json

    for factor, expected in (("1.0", ["metric-off-definition"]), ("1 / std", [])):
        report = tmp_path / "report.json"
        path = tmp_path / "train.py"
        path.write_text(GUARD_PSNR.replace("REPORT", repr(str(report))).format(factor=factor))
        subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=240, cwd=tmp_path)
        findings = json.loads(report.read_text())["findings"]
        assert _slugs(findings) == expected, (factor, findings)


def test_psnr_premises():
    a = np.linspace(0, 1, 64).reshape(8, 8)
    b = a + 0.01
    given = {"img1": a, "img2": b}
    assert metricdef.check(None, "psnr", "psnr", given, given, 40.0) is None            # peak 1 on [0, 1]
    assert metricdef.check(None, "psnr", "psnr", given, given, 30.0) is not None
    # a further argument that is no peak (a border to crop): silent
    cropped = {**given, "crop_border": 2}
    assert metricdef.check(None, "psnr", "psnr", cropped, cropped, 30.0) is None
    # identical images: no finite PSNR to judge
    same = {"img1": a, "img2": a}
    assert metricdef.check(None, "psnr", "psnr", same, same, 100.0) is None
    assert np.isfinite(a).all()


TRAIN_AND_EVAL = '''
def mae(pred, target):
    return (pred - target.unsqueeze(1)).abs().mean().item()   # broadcasts a column against a row


head = nn.Linear(10, 1)
head_opt = torch.optim.SGD(head.parameters(), lr=1e-3)
for step in range(200):
    out = head(model(x[:64]).detach())[:, 0]
    head_opt.zero_grad()
    F.mse_loss(out, y[:64].float()).backward()
    head_opt.step()
    if step % 50 == 0:
        print("train MAE", mae(out.detach(), y[:64].float()))
model.eval()
with torch.no_grad():
    print("MAE", mae(head(model(x[1400:]))[:, 0], y[1400:].float()))
'''


def test_a_metric_first_called_during_training_is_still_probed_at_its_evaluation(tmp_path):
    # wrapped at a checked training step for its definition, re-recorded at the first evaluation call
    findings = _run(tmp_path, TRAIN_AND_EVAL)
    assert "metric-imperfect-on-truth" in _slugs(findings), findings
