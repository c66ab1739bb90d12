"""Preprocessing fitted again on the evaluation data (OVT521 ``preprocessing-refit-on-eval``,
issue 33 family 4: training and evaluation see the same kind of data).

An invariant of every correct pipeline: evaluation data goes through the preprocessing that was
fitted on the training data.  A vocabulary, tokenizer, label encoder or scaler fitted a second
time on the test set breaks it: the same word gets another index, the same class another id,
the same value another scale, and the model is evaluated on inputs that mean something else
(a classic: ``build_vocab(test_text)`` beside ``build_vocab(train_text)``).

The rule: in one file, the same fitting call -- a method ``.fit``, ``.fit_transform``,
``.fit_on_texts``, ``.adapt``, ``.build_vocab`` (same receiver), or a function whose name builds a
vocabulary/tokenizer/encoder/index (``build_vocab``, ``make_word_index``...) -- applied once to
data whose name says training and once to data whose name says test/validation.  The hit is on
the second.  A fit on names that say neither (``texts``, ``X``), or both (``trainval``), is left
alone: the premise is not visible.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator

from overt.lint.index import FileIndex, tokens
from overt.lint.rules.base import Hit, rule

_FIT_METHODS = frozenset({"fit", "fit_transform", "fit_on_texts", "fit_on_sequences", "adapt", "build_vocab",
                          "build_vocab_from_iterator", "train_new_from_iterator"})
_BUILDS = re.compile(r"^(build|make|create|fit|learn|get|gen|generate|construct)_?(the_)?"
                     r"(vocab|vocabulary|vocabs|tokenizer|word_?index|word_?to_?(idx|id|index)|word2(idx|id|index)|"
                     r"token_?to_?(idx|id)|token2(idx|id)|char_?to_?(idx|id)|char2(idx|id)|stoi|dictionary|lexicon|"
                     r"label_?encoder|label_?map|label_?to_?(idx|id)|label2(idx|id)|class_?to_?(idx|id)|"
                     r"class2(idx|id))(_from_.*)?$", re.I)
_EVAL = frozenset({"test", "tests", "val", "valid", "validation", "dev", "eval", "evaluation", "holdout", "heldout"})
_TRAIN = frozenset({"train", "training", "trn"})


def _callee(call: ast.Call) -> str | None:
    """A key for 'the same fitting call': ``receiver.method`` or the function's name."""
    func = call.func
    if isinstance(func, ast.Attribute) and func.attr in _FIT_METHODS:
        recv = func.value
        if isinstance(recv, ast.Call):  # StandardScaler().fit_transform(x): the class fitted
            recv = recv.func
        return f"{ast.unparse(recv)}.{func.attr}"
    name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None
    if name and _BUILDS.match(name):
        return name
    return None


def _split(node: ast.AST) -> str | None:
    """'train' or 'eval' when the words naming the data say so (and not both), else None."""
    words: set[str] = set()
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name):
            words.update(tokens(sub.id))
        elif isinstance(sub, ast.Attribute):
            words.update(tokens(sub.attr))
        elif isinstance(sub, ast.Constant) and isinstance(sub.value, str) and len(sub.value) < 80:
            words.update(w.lower() for w in re.findall(r"[A-Za-z]+", sub.value))
    train, evaluation = bool(words & _TRAIN), bool(words & _EVAL)
    if train == evaluation:
        return None
    return "train" if train else "eval"


@rule("preprocessing-refit-on-eval")
def preprocessing_refit_on_eval(ix: FileIndex) -> Iterator[Hit]:
    seen: dict[str, dict[str, list[ast.Call]]] = {}
    for call in ix.calls:
        key = _callee(call)
        if key is None or not call.args:
            continue
        split = _split(call.args[0])
        if split is not None:
            seen.setdefault(key, {}).setdefault(split, []).append(call)
    for key, splits in seen.items():
        if "train" not in splits or "eval" not in splits:
            continue
        first = splits["train"][0]
        for call in splits["eval"]:
            data = ast.unparse(call.args[0])
            yield Hit(
                "preprocessing-refit-on-eval", call,
                f"{key}({data}) fits the preprocessing again on evaluation data, after {key}("
                f"{ast.unparse(first.args[0])}) at line {first.lineno} fitted it on the training data: the "
                "evaluation inputs are then encoded differently (another index per word or class, another scale) "
                "and every evaluation metric measures inputs that mean something else to the model",
                fix="fit once, on the training data, and reuse that fitted object (vocabulary, tokenizer, encoder, "
                "scaler) to transform the evaluation data (e.g. encode(test_text, train_vocab), "
                "scaler.transform(x_test))",
            )
