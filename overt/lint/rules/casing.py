"""A tokenizer told to case text against its vocabulary's casing (OVT534 ``tokenizer-casing-mismatch``,
issue 33).

An uncased checkpoint (``bert-base-uncased``) has a lower-case vocabulary and was trained on
lower-cased text; its tokenizer lower-cases by default.  Loaded with ``do_lower_case=False``, every
capitalised word (names, titles, sentence starts) is missing from the vocabulary and becomes
``[UNK]`` or is split into pieces the model never saw together (huggingface/transformers#4000: "using
the uncased BERT model, --do_lower_case option must be used for initialization of a tokenizer.
Omitting this optional argument, the performance in development set would be lower around 8-9pt").
The other way round, a cased checkpoint told to lower-case (``do_lower_case=True``) feeds a model
trained on cased text only lower-case words: names and sentence starts lose what told them apart.

The rule: ``from_pretrained`` of a tokenizer (a class or ``AutoTokenizer`` whose name says Tokenizer)
with a literal checkpoint name that says ``uncased`` and ``do_lower_case=False`` (or ``lowercase``
for the fast tokenizers), or one that says ``cased`` (not ``uncased``) and ``do_lower_case=True``.
Quiet on a checkpoint held in a variable (its casing is not known here), on the tokenizer's default.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator

from overt.lint.index import FileIndex, dotted, is_const, kwarg
from overt.lint.rules.base import Hit, rule

_UNCASED = re.compile(r"uncased", re.I)
_CASED = re.compile(r"(^|[-_/])cased($|[-_/])", re.I)


@rule("tokenizer-casing-mismatch")
def tokenizer_casing_mismatch(ix: FileIndex) -> Iterator[Hit]:
    for call in ix.calls:
        func = call.func
        if not (isinstance(func, ast.Attribute) and func.attr == "from_pretrained"):
            continue
        owner = (dotted(func.value) or "").rsplit(".", 1)[-1]
        if "Tokenizer" not in owner:
            continue
        name = call.args[0] if call.args else kwarg(call, "pretrained_model_name_or_path")
        if not (isinstance(name, ast.Constant) and isinstance(name.value, str)):
            continue
        lower = kwarg(call, "do_lower_case")
        if lower is None:
            lower = kwarg(call, "lowercase")
        if lower is None:
            continue
        checkpoint = name.value
        if _UNCASED.search(checkpoint) and is_const(lower, False):
            yield Hit("tokenizer-casing-mismatch", lower,
                      f"`{ix.segment(call)}` loads the lower-case vocabulary of the uncased checkpoint "
                      f"'{checkpoint}' and tells its tokenizer not to lower-case: every capitalised word (names, "
                      "titles, sentence starts) is missing from the vocabulary and becomes [UNK] or pieces the model "
                      "never saw together, so the model reads a fraction of the text and its scores drop",
                      fix="drop do_lower_case=False (the uncased tokenizer lower-cases by default), or use the cased "
                      "checkpoint if the casing matters")
        elif _CASED.search(checkpoint) and not _UNCASED.search(checkpoint) and is_const(lower, True):
            yield Hit("tokenizer-casing-mismatch", lower,
                      f"`{ix.segment(call)}` lower-cases the text for the cased checkpoint '{checkpoint}', which was "
                      "trained on text as written: every name and sentence start reaches the model in a form it "
                      "learned as another word",
                      fix="drop do_lower_case=True (the cased tokenizer keeps the text as written), or use the uncased "
                      "checkpoint")
