"""metric-off-definition on rank correlations (overt/guards/rankcorr.py; issue 33, session 52, w344 and w353): a
function named for Spearman's rho is recomputed as Pearson's correlation of its call's average ranks (or the
1 - 6 sum d^2 shortcut), one named for Kendall's tau as tau-a, tau-b or tau-c.  Planted bugs of other forms than
the cases' (ranks taken of one series only; ties ranked by a double argsort; a tau that counts tied pairs as
concordant), each with a correct twin, and correct variants (SciPy, percent, the shortcut formula, numpy, torch)
stay quiet; names of other measures and matrices of series are not judged."""

from __future__ import annotations

import torch

from overt.guards import metricdef, rankcorr
from tests.guards.helpers import run_script_probe as _run
from tests.guards.helpers import slug_set as _slugs

SERIES = '''
model.eval()
with torch.no_grad():
    expected_digit = model(x[1400:1700]).softmax(1) @ torch.arange(10.0)
truth = y[1400:1700].float() ** 3  # skewed grades: their ranks are no linear function of them
'''

ONE_SIDED = '''

def rank(v):
    r = torch.empty_like(v)
    values, inverse = torch.unique(v, return_inverse=True)
    starts = torch.cat([torch.zeros(1), torch.bincount(inverse).cumsum(0)[:-1].float()])
    counts = torch.bincount(inverse).float()
    return (starts + (counts + 1) / 2)[inverse]


def spearman_corr(pred, target):
    a, b = rank(pred), {target}
    a, b = a - a.mean(), b - b.mean()
    return ((a * b).sum() / (a.norm() * b.norm())).item()

''' + SERIES + '''
print("val spearman", spearman_corr(expected_digit, truth))
'''


def test_a_spearman_that_ranks_one_series_only_is_named_and_its_twin_is_quiet(tmp_path):
    findings = [f for f in _run(tmp_path, ONE_SIDED.format(target="target"))
                if f["slug"] != "metric-imperfect-on-truth"]  # the target against itself is not 1 either
    assert _slugs(findings) == ["metric-off-definition"], findings
    assert "matches no convention of the definition" in findings[0]["message"], findings[0]["message"]
    assert _run(tmp_path, ONE_SIDED.format(target="rank(target)")) == []


DOUBLE_ARGSORT = '''

def spearmans_rho(y_true, y_pred):
    rt = {rank}(y_true)
    rp = {rank}(y_pred)
    return float(np.corrcoef(rt, rp)[0, 1])


def ordinal(v):
    return np.argsort(np.argsort(v, kind="stable"), kind="stable").astype(float)


import scipy.stats
''' + SERIES + '''
print("val rho", spearmans_rho(truth.numpy(), expected_digit.numpy()))
'''


def test_ties_ranked_by_a_double_argsort_are_named_by_their_cause(tmp_path):
    findings = _run(tmp_path, DOUBLE_ARGSORT.format(rank="ordinal"))
    assert _slugs(findings) == ["metric-off-definition"], findings
    assert "in the order they are listed" in findings[0]["message"], findings[0]["message"]
    assert _run(tmp_path, DOUBLE_ARGSORT.format(rank="scipy.stats.rankdata")) == []


KENDALL = '''

def kendall_tau(pred, target):
    n = len(pred)
    s = 0.0
    for i in range(n):
        for j in range(i + 1, n):
            a, b = float(pred[i] - pred[j]), float(target[i] - target[j])
            s += {pair}
    return s / (n * (n - 1) / 2)

''' + SERIES + '''
print("val tau", kendall_tau(expected_digit[:80], truth[:80]))
'''


def test_a_kendall_tau_counting_tied_pairs_as_concordant_is_named_and_tau_a_is_quiet(tmp_path):
    findings = _run(tmp_path, KENDALL.format(pair="1.0 if a * b >= 0 else -1.0"))
    assert _slugs(findings) == ["metric-off-definition"], findings
    assert "Kendall's tau" in findings[0]["message"], findings[0]["message"]
    assert _run(tmp_path, KENDALL.format(pair="float(np.sign(a) * np.sign(b))")) == []


CONVENTIONS = '''
import scipy.stats


def spearman(preds, target):  # SciPy, in percent
    return 100 * scipy.stats.spearmanr(preds.numpy(), target.numpy()).correlation


def srcc(pred, gt):  # the textbook shortcut on average ranks
    a = torch.tensor(scipy.stats.rankdata(pred.numpy()))
    b = torch.tensor(scipy.stats.rankdata(gt.numpy()))
    n = len(a)
    return 1 - 6 * ((a - b) ** 2).sum() / (n * (n ** 2 - 1))


def kendalls_tau(a, b):
    return scipy.stats.kendalltau(a, b)[0]


def spearman_footrule(pred, target):  # another measure: not judged
    return (pred.argsort().argsort() - target.argsort().argsort()).abs().float().mean()


def batch_spearman(pred, target):  # a matrix of series, one correlation per row: not judged
    return float(np.mean([scipy.stats.spearmanr(p, t).correlation for p, t in zip(pred, target)]))

''' + SERIES + '''
print(spearman(expected_digit, truth), srcc(expected_digit, truth).item(),
      kendalls_tau(expected_digit.numpy(), truth.numpy()), spearman_footrule(expected_digit, truth).item(),
      batch_spearman(expected_digit.reshape(30, 10), truth.reshape(30, 10)))
'''


def test_accepted_conventions_and_other_measures_are_quiet(tmp_path):
    assert _run(tmp_path, CONVENTIONS) == []


def test_names_are_claimed_by_the_rank_correlations_only():
    claim = lambda *w: metricdef.definition_of(set(w))  # noqa: E731
    assert claim("spearman") == claim("spearmans", "rho") == claim("srcc") == "spearman"
    assert claim("kendall", "tau") == claim("kendalltau") == "kendall"
    for other in (("spearman", "footrule"), ("weighted", "kendall", "tau"), ("soft", "spearman", "loss"),
                  ("pearson",), ("rank", "corr"), ("batch", "spearman")):
        assert claim(*other) is None, other


def test_the_references_agree_with_known_values():
    a = torch.tensor([1.0, 2.0, 2.0, 3.0, 4.0, 4.0, 4.0, 5.0, 6.0, 7.0], dtype=torch.float64)
    b = torch.tensor([2.0, 1.0, 3.0, 3.0, 5.0, 4.0, 6.0, 8.0, 7.0, 9.0], dtype=torch.float64)
    assert rankcorr.average_ranks(a).tolist() == [1, 2.5, 2.5, 4, 6, 6, 6, 8, 9, 10]
    import scipy.stats

    assert abs(rankcorr.spearman_values(a, b)[0] - scipy.stats.spearmanr(a, b).correlation) < 1e-12
    assert abs(rankcorr.kendall_values(a, b)[0] - scipy.stats.kendalltau(a, b).correlation) < 1e-12
    assert rankcorr.check("spearman", "f", {"p": a, "t": b}, {"p": a, "t": b}, 0.0) is not None
    assert rankcorr.check("spearman", "f", {"p": a, "t": b}, {"p": a, "t": b},
                          scipy.stats.spearmanr(a, b).correlation) is None
