"""metric-off-definition on expected calibration errors (overt/guards/calibdef.py; issue 33, session 50, w319's
premise for functions): a function named as an ECE is recomputed on its own call's predictions under every
accepted convention (equal-width bins with either edge closed, equal-mass bins, 1-100 bins unless the call passes
the count, probabilities or logits with labels, confidences with 0/1 correctness, a fraction or percent).  A
planted bug of another form than w319's (the bins' gaps collected in a list and averaged), with its correct twin,
and correct variants stay quiet."""

from __future__ import annotations

from overt.guards import calibdef, metricdef
from tests.guards.helpers import run_script_probe as _run
from tests.guards.helpers import slug_set as _slugs

LISTED = '''
def expected_calibration_error(probs, labels, n_bins=10):
    conf, pred = probs.max(1)
    correct = (pred == labels).float()
    edges = torch.linspace(0, 1, n_bins + 1)
    gaps, weights = [], []
    for lo, hi in zip(edges[:-1], edges[1:]):
        inside = (conf > lo) & (conf <= hi)
        if inside.any():
            gaps.append((correct[inside].mean() - conf[inside].mean()).abs().item())
            weights.append(inside.float().mean().item())
    return {result}


model.eval()
with torch.no_grad():
    p = F.softmax(model(x[1400:]), 1)
    print("test ECE", expected_calibration_error(p, y[1400:]))
'''


def test_an_ece_averaging_its_bins_unweighted_is_named_and_its_twin_is_quiet(tmp_path):
    findings = _run(tmp_path, LISTED.format(result="sum(gaps) / len(gaps)"))
    assert _slugs(findings) == ["metric-off-definition"], findings
    assert "no expected calibration error of them is near it" in findings[0]["message"], findings[0]["message"]
    assert _run(tmp_path, LISTED.format(result="sum(g * w for g, w in zip(gaps, weights))")) == []


CONVENTIONS = '''
def ece_score(logits, targets, bins=15):
    conf = torch.softmax(logits, 1).max(1).values.numpy()
    hit = (logits.argmax(1) == targets).float().numpy()
    order = np.argsort(conf)
    total = 0.0
    for chunk in np.array_split(order, bins):
        total += abs(hit[chunk].sum() - conf[chunk].sum())
    return 100 * total / len(conf)


def calibration_error(confidences, accuracies):
    edges = np.linspace(0, 1, 21)
    ece = 0.0
    for lo, hi in zip(edges[:-1], edges[1:]):
        m = (confidences >= lo) & (confidences < hi)
        if m.any():
            ece += m.mean() * abs(accuracies[m].mean() - confidences[m].mean())
    return ece


def max_calibration_error(confidences, accuracies):
    return 0.5


model.eval()
with torch.no_grad():
    out = model(x[1400:])
    print(ece_score(out, y[1400:]))
    conf, pred = F.softmax(out, 1).max(1)
    print(calibration_error(conf.numpy(), (pred == y[1400:]).float().numpy()))
    print(max_calibration_error(conf.numpy(), (pred == y[1400:]).float().numpy()))
'''


def test_accepted_ece_conventions_are_quiet(tmp_path):
    assert _run(tmp_path, CONVENTIONS) == []


def test_the_names_claim_the_definition():
    for name in ("ece", "expected_calibration_error", "calibration_error", "compute_ece", "ece_score"):
        assert metricdef.definition_of(set(name.split("_"))) == "ece", name
    for name in ("max_calibration_error", "adaptive_ece", "classwise_ece", "plot_reliability_diagram", "ece_loss",
                 "mce"):
        assert calibdef.definition_of(set(name.split("_"))) is None, name
