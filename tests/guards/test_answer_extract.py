"""metric-imperfect-on-truth for answer extractors (overt/guards/answerextract.py; issue 33, w458): a function of
the script that reads a number out of a text must read a unary minus -- a reference ``#### -3`` left unreadable by
``#### (\\d+)``, or a completion ``-3`` read as ``3`` by ``\\d+``, scores every negative answer wrong.  The signed
twins, a minus between operands, dates and exponents, and functions that never read a number stay quiet."""

from __future__ import annotations

from overt.guards.answerextract import UNARY, _fragment, extractor
from tests.guards.helpers import run_script_probe as _run
from tests.guards.helpers import slug_set as _slugs

#: a classifier of the digits whose answer is ``digit - 5`` (-5 to 4), written as a completion and a reference
ANSWERS = '''
import re


def reference_answer(text):
    found = re.search(r"#### {reference}", text)
    return int(found.group(1)) if found else None


def predicted_answer(completion):
    numbers = re.findall(r"{prediction}", completion)
    return numbers[-1] if numbers else ""


model.eval()
with torch.no_grad():
    guesses = model(x[1400:1500]).argmax(1)
completions = [f"Answer: {{int(g) - 5}}" for g in guesses]
references = [f"{{int(t)}} - 5 = {{int(t) - 5}}\\n#### {{int(t) - 5}}" for t in y[1400:1500]]
hits = sum(predicted_answer(c) == str(reference_answer(r)) for c, r in zip(completions, references))
print("exact match", hits / len(references))
'''


def test_a_reference_pattern_without_a_sign_is_named_at_its_def(tmp_path):
    findings = _run(tmp_path, ANSWERS.format(reference="(\\d+)", prediction="-?\\d+"))
    assert _slugs(findings) == ["metric-imperfect-on-truth"], findings
    f = findings[0]
    assert f["where"].startswith("reference_answer() at ") and "train.py:" in f["where"]
    assert "returns None" in f["message"] and "minus" in f["message"] and f["fix"]


def test_a_prediction_pattern_that_reads_the_digits_without_their_sign_is_named(tmp_path):
    findings = _run(tmp_path, ANSWERS.format(reference="(-?\\d+)", prediction="\\d+"))
    assert _slugs(findings) == ["metric-imperfect-on-truth"], findings
    f = findings[0]
    assert f["where"].startswith("predicted_answer() at ")
    assert "read as positive" in f["message"]


def test_signed_patterns_are_quiet(tmp_path):
    assert _run(tmp_path, ANSWERS.format(reference="([+-]?\\d+)", prediction="-?\\d+")) == []


#: half of each digit (0.0 to 4.5) as the answer: a pattern without decimals reads 3.5 as 3
HALVES = (ANSWERS.replace("int(g) - 5", "int(g) / 2").replace("{{int(t)}} - 5 = {{int(t) - 5}}", "{{int(t)}} / 2")
          .replace("int(t) - 5", "int(t) / 2").replace("str(reference_answer(r))", "reference_answer(r)")
          .replace("int(found.group(1))", "found.group(1)"))


def test_a_pattern_that_stops_at_the_decimal_point_is_named_and_its_twin_is_quiet(tmp_path):
    findings = _run(tmp_path, HALVES.format(reference="(-?\\d+(?:\\.\\d+)?)", prediction="\\d+"))
    assert _slugs(findings) == ["metric-imperfect-on-truth"], findings
    assert findings[0]["where"].startswith("predicted_answer() at ") and "decimal" in findings[0]["message"]
    assert _run(tmp_path, HALVES.format(reference="(-?\\d+(?:\\.\\d+)?)", prediction="\\d+(?:\\.\\d+)?")) == []


QUIET = '''
import re


def last_number(text):
    numbers = re.findall(r"-?\\d+", text)
    return int(numbers[-1]) if numbers else None


def first_count(text):
    found = re.search(r"(\\d+) items", text)
    return int(found.group(1)) if found else None


def log_epoch(line):
    found = re.search(r"epoch (\\d+)", line)
    return int(found.group(1)) if found else None


model.eval()
with torch.no_grad():
    guesses = model(x[1400:1500]).argmax(1)
for g in guesses[:20]:
    last_number(f"{int(g) + 5} - {int(g)} = 5")  # a minus between two operands
    first_count(f"on 2020-11-{int(g) + 1:02d}: {int(g) + 3} items, lr 1e-3, delta -{int(g) + 3}")  # also unsigned
    log_epoch(f"loss -0.{int(g)}5")  # never reads a number
'''


def test_extractors_whose_texts_have_no_lost_sign_are_quiet(tmp_path):
    assert _run(tmp_path, QUIET) == []


def test_unary_minus_is_told_from_operators_dates_and_exponents():
    assert [m.start() for m in UNARY.finditer("#### -3, (-4) x=-5")] == [5, 10, 16]
    assert UNARY.search("7 - 9 = 2, 2020-11-03, 1e-5, a-3, [1]-2") is None
    assert _fragment("7 - 9 = -2\n#### -2", 2.0) == "sign" and _fragment("#### 2.5", 2.0) == "decimals"
    assert _fragment("2 then -2", 2.0) is None and _fragment("-2.5 and 2", 2.0) is None
    assert _fragment("#### 2.0", 2.0) is None and _fragment("v1.2.3", 1.0) is None
    assert _fragment("2020-11", 11.0) is None


def test_only_script_functions_with_a_digit_pattern_are_extractors():
    def reads(text):
        import re
        return re.search(r"(\d+)", text)

    def plain(text):
        return text.strip()

    here = reads.__code__.co_filename
    assert extractor(reads, here) and not extractor(plain, here) and not extractor(reads, "other.py")
