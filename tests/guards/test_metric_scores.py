"""metric-off-definition on quantile (pinball) losses and concordance indices (overt/guards/scoredefs.py; issue
33, session 48, w276 and w285): a function named as a pinball loss is recomputed as max(q e, (q - 1) e) of the
signed error of its own call, a function named as a C-index as Harrell's C of its call's times, predictions and
events, each under every accepted convention.  Planted bugs of other forms than the cases' (a (1 - q) where
(q - 1) belongs; censored subjects counted as failing first), each with a correct twin, and correct variants
(the error taken the other way, sums, a vector of levels, times 2; tied times not comparable, survival-time
predictions, tied predictions credited nothing, numpy arrays) stay quiet."""

from __future__ import annotations

from overt.guards import metricdef, scoredefs
from tests.guards.helpers import run_script_probe as _run
from tests.guards.helpers import slug_set as _slugs

PINBALL = '''
def quantile_loss(pred, target, q):
    e = target - pred
    return torch.maximum(q * e, {low} * e).mean()


model.eval()
with torch.no_grad():
    forecast = model(x[1400:1600])[:, 0]
    truth = y[1400:1600].float() / 10
    print("test pinball", quantile_loss(forecast, truth, 0.8).item())
'''


def test_a_pinball_loss_with_one_minus_q_for_q_minus_one_is_named_and_its_twin_is_quiet(tmp_path):
    findings = _run(tmp_path, PINBALL.format(low="(1 - q)"))
    assert _slugs(findings) == ["metric-off-definition"], findings
    assert "matches no convention of the loss" in findings[0]["message"], findings[0]["message"]
    assert _run(tmp_path, PINBALL.format(low="(q - 1)")) == []


ABSOLUTE = '''
def pinball_loss(y_hat, y, tau=0.9):
    diff = (y - y_hat){abs}
    return torch.where(diff >= 0, tau * diff, (tau - 1) * diff).sum()


model.eval()
with torch.no_grad():
    print("test pinball", pinball_loss(model(x[1400:1600])[:, 1], y[1400:1600].float() / 10).item())
'''


def test_a_pinball_loss_of_the_absolute_error_is_named_by_its_cause(tmp_path):
    findings = _run(tmp_path, ABSOLUTE.format(abs=".abs()"))
    assert _slugs(findings) == ["metric-off-definition"], findings
    assert "absolute error" in findings[0]["message"], findings[0]["message"]
    assert _run(tmp_path, ABSOLUTE.format(abs="")) == []


CONVENTIONS = '''
def quantile_loss(pred, target, quantiles):
    e = pred - target.unsqueeze(1)  # the error taken the other way: the level read as 1 - q
    return 2 * torch.maximum((quantiles - 1) * -e, quantiles * -e).sum(1).mean()


def pinball(a, b, q):
    return torch.maximum(q * (b - a), (q - 1) * (b - a))  # per element


def quantile_huber_loss(pred, target, q, kappa=1.0):
    e = target - pred
    return (torch.abs(q - (e < 0).float()) * F.smooth_l1_loss(pred, target, reduction="none", beta=kappa)).mean()


model.eval()
with torch.no_grad():
    out = model(x[1400:1600])
    truth = y[1400:1600].float() / 10
    print(quantile_loss(out[:, :3], truth, torch.tensor([0.1, 0.5, 0.9])).item())
    print(pinball(out[:, 0], truth, 0.3).mean().item())
    print(quantile_huber_loss(out[:, 0], truth, 0.3).item())
'''


def test_accepted_conventions_and_related_losses_are_quiet(tmp_path):
    assert _run(tmp_path, CONVENTIONS) == []


C_INDEX = '''
def c_index(risk, time, event):
    num = den = 0.0
    for i in range(len(time)):
        if event[i] != 1:
            continue
        for j in range(len(time)):
            if {comparable}:
                den += 1
                if risk[i] > risk[j]:
                    num += 1
                elif risk[i] == risk[j]:
                    num += 0.5
    return num / den


model.eval()
with torch.no_grad():
    risk = model(x[1400:1600]).max(1).values.tolist()
g = torch.Generator().manual_seed(1)
time = (y[1400:1600].float() + torch.rand(200, generator=g) * 4).ceil().tolist()
event = (torch.rand(200, generator=g) < 0.6).float().tolist()
print("C-index", c_index(risk, time, event))
'''


def test_a_c_index_counting_censored_subjects_as_failing_first_is_named_and_its_twin_is_quiet(tmp_path):
    findings = _run(tmp_path, C_INDEX.format(comparable="time[i] < time[j] or event[j] == 0 and i != j"))
    assert _slugs(findings) == ["metric-off-definition"], findings
    assert "matches no convention of Harrell's C" in findings[0]["message"], findings[0]["message"]
    assert _run(tmp_path, C_INDEX.format(comparable="time[i] < time[j] or (time[i] == time[j] and event[j] == 0)")) == []


TIE_HALF = '''
def concordance_index(event_times, predicted_scores, event_observed):
    t, s, e = (np.asarray(v, dtype=float) for v in (event_times, predicted_scores, event_observed))
    num = den = 0.0
    for i in np.flatnonzero(e == 1):
        later = (t[i] < t) | ((t[i] == t) & (e == 0))
        den += later.sum()
        tie = (t[i] == t) & (e == 0)
        num += ({credit}).sum()
    return num / den


model.eval()
with torch.no_grad():
    survival = -model(x[1400:1600]).max(1).values.numpy()  # a predicted survival time: high means late
rng = np.random.default_rng(2)
times = np.ceil(y[1400:1600].numpy() / 2 + rng.random(200) * 3)
observed = (rng.random(200) < 0.5).astype(float)
print("C", concordance_index(times, survival, observed))
'''
TIE_BUG = "np.where(tie, 0.5, (s[i] < s) + 0.5 * (s[i] == s)) * later"
TIE_TWIN = "((s[i] < s) + 0.5 * (s[i] == s)) * later"


def test_a_numpy_c_index_crediting_tied_censored_pairs_half_is_named_and_its_twin_is_quiet(tmp_path):
    findings = _run(tmp_path, TIE_HALF.format(credit=TIE_BUG))
    assert _slugs(findings) == ["metric-off-definition"], findings
    assert "tied in time with a censored subject" in findings[0]["message"], findings[0]["message"]
    assert _run(tmp_path, TIE_HALF.format(credit=TIE_TWIN)) == []


C_CONVENTIONS = '''
def cindex(pred, durations, events):
    hi = pred[:, None] > pred[None, :]
    comparable = (durations[:, None] < durations[None, :]) & (events[:, None] == 1)
    return ((comparable & hi).sum() / comparable.sum()).item()  # tied predictions credited nothing


def harrell_c(time, risk, censored):
    comparable = (time[:, None] < time[None, :]) & (censored[:, None] == 0)
    conc = (risk[:, None] > risk[None, :]) & comparable
    ties = (risk[:, None] == risk[None, :]) & comparable
    return float((conc.sum() + 0.5 * ties.sum()) / comparable.sum())


model.eval()
with torch.no_grad():
    score = model(x[1400:1600]).max(1).values.round(decimals=1)
d = y[1400:1600].float().ceil()
ev = (torch.arange(200) % 3 != 0).long()
print(cindex(score, d, ev), harrell_c(d, score, 1 - ev))
'''


def test_accepted_c_index_conventions_are_quiet(tmp_path):
    assert _run(tmp_path, C_CONVENTIONS) == []


def test_the_names_claim_the_definitions():
    words = metricdef.definition_of
    assert words({"pinball"}) == "pinball"
    assert scoredefs.definition_of({"quantile", "loss"}) == "pinball"
    assert words({"quantile"}) is None  # a quantile, not its loss
    assert words({"conformal", "quantile"}) is None
    assert scoredefs.definition_of({"quantile", "huber", "loss"}) is None
    assert words({"c", "index"}) == "c-index"
    assert words({"concordance", "index"}) == "c-index"
    assert words({"index"}) is None
