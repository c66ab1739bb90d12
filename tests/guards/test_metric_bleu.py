"""metric-off-definition on BLEU (overt/guards/bleudef.py; issue 33, session 55, w416): a function named for BLEU is
recomputed on its own call's candidates and references under the definition's conventions (corpus or mean
sentence BLEU, the closest reference length, no or add-one smoothing, fraction or percent).  Planted bugs of other
forms than the case's (the mean reference length; the brevity ratio inverted), on a function defined after the
last evaluation (found through its module-level call) and on one defined before it (wrapped), each with a correct
twin; correct variants (torchmetrics' BLEU, percent, a mean of sentence BLEUs) stay quiet, and so does a call the
check cannot judge (a sentence with no matching bigram, where smoothing decides)."""

from __future__ import annotations

import pytest

from overt.guards import bleudef, metricdef
from tests.guards.helpers import run_script_probe as _run
from tests.guards.helpers import slug_set as _slugs

SENTENCES = '''
model.eval()
with torch.no_grad():
    pred = model(x[1400:1640]).argmax(1)
truth = y[1400:1640]
# each "sentence": the predicted digits of 7 test items against two references, the 8 true digits and every other one
candidates = [" ".join(str(int(v)) for v in pred[i:i + 7]) for i in range(0, 240, 8)]
references = [[" ".join(str(int(v)) for v in truth[i:i + 8]), " ".join(str(int(v)) for v in truth[i:i + 8:2])]
              for i in range(0, 240, 8)]
'''

BLEU = '''
import math
from collections import Counter


def ngram_counts(tokens, n):
    return Counter(tuple(tokens[i:i + n]) for i in range(len(tokens) - n + 1))


def corpus_bleu(hypotheses, refs, max_n=2):
    hyp_len = ref_len = 0
    hits, total = [0] * max_n, [0] * max_n
    for hyp, group in zip(hypotheses, refs):
        h, rs = hyp.split(), [r.split() for r in group]
        hyp_len += len(h)
        ref_len += {reflen}
        for n in range(1, max_n + 1):
            counts, best = ngram_counts(h, n), Counter()
            for r in rs:
                best |= ngram_counts(r, n)
            hits[n - 1] += sum((counts & best).values())
            total[n - 1] += max(len(h) - n + 1, 0)
    log_p = sum(math.log(a / b) for a, b in zip(hits, total)) / max_n
    return math.exp(min(0.0, {ratio})) * math.exp(log_p)
'''
CLOSEST = "min((abs(len(r) - len(h)), len(r)) for r in rs)[1]"
MEAN = "sum(len(r) for r in rs) / len(rs)"
RATIO = "1 - ref_len / hyp_len"
INVERTED = "1 - hyp_len / ref_len"


def _bleu(reflen: str = CLOSEST, ratio: str = RATIO) -> str:
    return BLEU.replace("{reflen}", reflen).replace("{ratio}", ratio)


def test_a_brevity_penalty_on_the_mean_reference_length_is_named_and_the_closest_is_quiet(tmp_path):
    # defined after the evaluation's last forward: found through its module-level call
    script = SENTENCES + _bleu(reflen="{reflen}") + '''
print(f"test BLEU {corpus_bleu(candidates, references):.4f}")
'''
    findings = _run(tmp_path, script.replace("{reflen}", MEAN))
    assert _slugs(findings) == ["metric-off-definition"], findings
    message = findings[0]["message"]
    assert "corpus_bleu()" in message and "no BLEU of them is near it" in message, message
    assert _run(tmp_path, script.replace("{reflen}", CLOSEST)) == []


def test_an_inverted_brevity_ratio_is_named_in_a_function_defined_before_the_evaluation(tmp_path):
    script = _bleu(ratio="{ratio}") + SENTENCES + '''
print(f"test BLEU {corpus_bleu(candidates, references, max_n=2):.4f}")
'''
    findings = _run(tmp_path, script.replace("{ratio}", INVERTED))
    assert _slugs(findings) == ["metric-off-definition"], findings
    assert _run(tmp_path, script.replace("{ratio}", RATIO)) == []


CORRECT = {
    "torchmetrics": '''
from torchmetrics.functional.text import bleu_score as tm_bleu


def compute_bleu(candidates, references):
    return float(tm_bleu(candidates, references, n_gram=2))
''',
    "percent": _bleu().replace("return math.exp", "return 100 * math.exp").replace("def corpus_bleu(",
                                                                                   "def compute_bleu("),
    "sentence mean": _bleu().replace("math.log(a / b)", "math.log(max(a, 0.1) / b)") + '''

def compute_bleu(candidates, references):  # a zero count smoothed to 0.1 (NLTK's method1)
    return sum(corpus_bleu([c], [r]) for c, r in zip(candidates, references)) / len(candidates)
''',
}


@pytest.mark.parametrize("variant", sorted(CORRECT))
def test_correct_bleu_variants_are_quiet(tmp_path, variant):
    script = CORRECT[variant] + SENTENCES + '''
print(f"test BLEU {compute_bleu(candidates, references):.4f}")
'''
    assert _run(tmp_path, script) == []


def test_the_definition_is_claimed_by_bleu_names_only():
    assert metricdef.definition_of({"corpus", "bleu"}) == "bleu"
    assert metricdef.definition_of({"bleu4"}) == "bleu"
    assert metricdef.definition_of({"self", "bleu"}) is None
    assert metricdef.definition_of({"bleu", "loss"}) is None


def _tokens(hyps, refs):
    return [tuple(h.split()) for h in hyps], [[tuple(r.split()) for r in g] for g in refs]


def test_where_smoothing_decides_the_check_is_silent_or_allows_the_range():
    hyps, refs = ["1 2 3 4", "5 6 7 8"], [["4 3 2 1"], ["8 7 6 5"]]  # no bigram matches anywhere
    args = {"candidates": hyps, "references": refs}
    assert bleudef.check("bleu", args, dict(args, max_n=2), 0.123) is None
    hyps, refs = ["1 2 3 4", "5 6 7 8"], [["1 2 3 4 5"], ["8 7 6 5"]]  # the second sentence has none
    args = {"candidates": hyps, "references": refs}
    ranges = [v for v in bleudef.references_values(*_tokens(hyps, refs), [2]) if v[0] < v[1]]
    assert ranges  # a mean of sentence BLEUs smoothed on zero counts: a range, each value of it accepted
    low, high, _ = ranges[0]
    assert bleudef.check("bleu", args, dict(args, max_n=2), (low + high) / 2) is None


def test_the_shortest_reference_is_no_convention():
    hyps, refs = ["1 2 3 4", "5 6 7 8"], [["1 2 3 4 5", "1 2"], ["5 6 7 8 9"]]
    args = {"candidates": hyps, "references": refs}
    closest = bleudef.references_values(*_tokens(hyps, refs), [2])
    assert closest is not None
    assert bleudef.check("bleu", args, dict(args, max_n=2), closest[0][0]) is None
    assert bleudef.check("bleu", args, dict(args, max_n=2), 1.0) is not None  # the shortest reference's BP: 1
