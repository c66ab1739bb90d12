"""metric-imperfect-on-truth at run time (overt/guards/metricprobe.py; issue 33, w113): a script's own
metric function that scores the ground truth itself below its best value is named at its ``def``, whatever
the metric and its bug (per-class recall counting absent classes as 0, an MAE that broadcasts a column
against a row, a Dice written with the union, numpy or torch).  Correct metrics, metrics given logits
against class indices, losses, functions that write globals and single-valued targets stay quiet."""

from __future__ import annotations

from types import SimpleNamespace

from overt.guards.metricprobe import metric_kind
from tests.guards.helpers import run_script_probe as _run
from tests.guards.helpers import slug_set as _slugs

RECALL = '''
def per_class_recall(preds, labels, num_classes=12):
    """Mean recall over the classes; the label space has 12 entries, the data 10."""
    scores = []
    for c in range(num_classes):
        n = (labels == c).sum().item()
        if n == 0:
            {absent}
        else:
            scores.append(((preds == c) & (labels == c)).sum().item() / n)
    return sum(scores) / len(scores)


model.eval()
with torch.no_grad():
    pred = model(x[1400:]).argmax(1)
print("recall", per_class_recall(pred, y[1400:]))
'''


def test_a_recall_that_scores_absent_classes_zero_is_named_at_its_def(tmp_path):
    findings = _run(tmp_path, RECALL.replace("{absent}", "scores.append(0.0)"))
    assert _slugs(findings) == ["metric-imperfect-on-truth"], findings
    f = findings[0]
    assert f["where"].startswith("per_class_recall() at ") and "train.py:" in f["where"]
    assert "scores a perfect prediction 0.8333" in f["message"] and "'preds'" in f["message"]


def test_the_same_recall_leaving_absent_classes_out_is_quiet(tmp_path):
    assert _run(tmp_path, RECALL.replace("{absent}", "continue")) == []


MAE = '''
model.eval()
def mean_absolute_error(y_pred, y_true):
    return (y_pred - y_true{view}).abs().mean().item()


with torch.no_grad():
    score = model(x[1400:]).softmax(1).max(1).values
print("mae", mean_absolute_error(score, y[1400:].float() / 10))
'''


def test_an_error_metric_that_broadcasts_is_named_and_its_twin_is_quiet(tmp_path):
    findings = _run(tmp_path, MAE.replace("{view}", ".view(-1, 1)"))
    assert _slugs(findings) == ["metric-imperfect-on-truth"], findings
    assert "not 0" in findings[0]["message"]
    assert _run(tmp_path, MAE.replace("{view}", "")) == []


DICE = '''
def dice_coefficient(pred_mask, gt_mask):
    inter = np.logical_and(pred_mask, gt_mask).sum()
    return (2.0 * inter + 1.0) / ({denominator} + 1.0)


model.eval()
with torch.no_grad():
    pred = (model(x[1400:]).argmax(1) >= 5).numpy()
print("dice", dice_coefficient(pred, (y[1400:] >= 5).numpy()))
'''


def test_a_numpy_dice_written_with_the_union_is_named_and_the_right_one_is_quiet(tmp_path):
    findings = _run(tmp_path, DICE.replace("{denominator}", "np.logical_or(pred_mask, gt_mask).sum()"))
    # its value is no Dice of the call's masks either (overlapdef.py)
    assert _slugs(findings) == ["metric-imperfect-on-truth", "metric-off-definition"], findings
    assert _run(tmp_path, DICE.replace("{denominator}", "pred_mask.sum() + gt_mask.sum()")) == []


RMSE = '''
def rmse(outputs, targets):
    return ((outputs{squeeze} - targets) ** 2).mean().sqrt().item()


model.eval()
with torch.no_grad():
    col = model(x[1400:]).softmax(1)[:, :1]                # (N, 1) scores of class 0
print("rmse", rmse(col, (y[1400:] == 0).float()))          # (N,) targets
'''


def test_a_column_of_predictions_broadcast_against_a_row_of_targets_is_named(tmp_path):
    # the perfect prediction is given in the prediction's own shape (N, 1): the broadcast shows
    findings = _run(tmp_path, RMSE.replace("{squeeze}", ""))
    assert _slugs(findings) == ["metric-imperfect-on-truth"], findings
    assert _run(tmp_path, RMSE.replace("{squeeze}", ".squeeze(1)")) == []


def test_metrics_without_their_premise_are_quiet(tmp_path):
    body = '''
    COUNT = 0


    def accuracy(logits, labels):       # logits against class indices: the target is no prediction here
        return (logits.argmax(1) == labels).float().mean().item() * 0.5


    def dice_loss(pred, target):        # a loss, not a metric
        return 1.0 + (pred - target).abs().float().mean().item()


    def counted_f1(pred, target):       # writes a module global: calling it again has effects
        global COUNT
        COUNT += 1
        return 0.5


    def recall(preds, labels):          # one class only in the target: recall of the rest is undefined
        return ((preds == 1) & (labels == 1)).sum().item() / max(1, (labels == 1).sum().item()) * 0.5


    model.eval()
    with torch.no_grad():
        out = model(x[1400:])
    print(accuracy(out, y[1400:]), dice_loss(out.argmax(1), y[1400:]), counted_f1(out.argmax(1), y[1400:]))
    print(recall(out.argmax(1), torch.ones(len(out), dtype=torch.long)))
    '''
    assert _run(tmp_path, body) == []


def test_metric_names_are_read_as_words():
    assert metric_kind(SimpleNamespace(__name__="mean_iou")) == "higher"
    assert metric_kind(SimpleNamespace(__name__="computeMeanIoU")) == "higher"
    assert metric_kind(SimpleNamespace(__name__="rmse")) == "lower"
    assert metric_kind(SimpleNamespace(__name__="dice_loss")) is None
    assert metric_kind(SimpleNamespace(__name__="plot_accuracy")) is None
    assert metric_kind(SimpleNamespace(__name__="forward")) is None


def test_only_functions_named_as_metrics_have_their_bytecode_read(tmp_path):
    """The script's functions are looked at again at every evaluation pass: a function whose name and parameters
    make it no metric is left out without its bytecode being read (the disassembly cost ~40k Python calls per
    pass on a script of a dozen functions); a metric that writes module globals is still left out."""
    from overt.guards import metricprobe

    source = tmp_path / "train.py"
    source.write_text("COUNT = 0\n"
                      "def helper(pred, target):\n    global COUNT\n    COUNT += 1\n    return pred\n"
                      "def accuracy(pred, target):\n    return (pred == target).float().mean()\n"
                      "def counted_accuracy(pred, target):\n    global COUNT\n    COUNT += 1\n"
                      "    return (pred == target).float().mean()\n")
    namespace: dict = {"__name__": "__main__"}
    exec(compile(source.read_text(), str(source), "exec"), namespace)
    read = []
    real = metricprobe._writes_globals
    metricprobe._writes_globals = lambda code: read.append(code.co_name) or real(code)
    try:
        found = metricprobe.candidates(namespace, str(source))
    finally:
        metricprobe._writes_globals = real
    assert sorted(found) == ["accuracy"]
    assert found["accuracy"][1:4] == ("higher", "pred", "target")
    assert sorted(read) == ["accuracy", "counted_accuracy"]
