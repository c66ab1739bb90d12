"""The padding masked out of the loss by its id when the pad id is the EOS id (OVT336
``eos-masked-as-padding``, issue 33: collators and tokenization).

A causal language model learns to stop by being trained to predict the end-of-sequence token after
the last real token.  Tokenizers without a pad token are commonly given the EOS token as one
(``tokenizer.pad_token = tokenizer.eos_token``); a collator that then masks the padding by its id
(``labels[labels == pad_id] = -100``, ``DataCollatorForLanguageModeling(mlm=False)``, which does
exactly that) masks every real EOS too: the model is never trained to emit EOS and, at inference,
does not stop (huggingface/transformers#23530 and the comment in #22794, huggingface/trl#976,
huggingface/blog#1302, wenet-e2e/wesr#5; w98).

Reported at the masking when the file (1) binds the pad token or id to the EOS one, (2) masks labels
equal to that pad id to a negative index (a subscript assignment, ``torch.where``, ``masked_fill``,
a comprehension; or hands the tokenizer to ``DataCollatorForLanguageModeling`` /
``DataCollatorForCompletionOnlyLM``) and (3) puts EOS into the training sequences (``+ [eos_id]``,
``text + tokenizer.eos_token``, an f-string with it, ``.append(eos_id)``, ``add_eos_token=True``): a
tokenizer that adds no EOS leaves nothing to mask, and a pad id set for generation only masks nothing.
Quiet when the padding is masked by position (``attention_mask == 0``, a length), whatever the pad id.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from overt.lint.index import FileIndex, dotted, kwarg, tokens
from overt.lint.rules.base import Hit, rule

_COLLATORS = frozenset({"DataCollatorForLanguageModeling", "DataCollatorForCompletionOnlyLM"})


def _is_pad(name: str | None) -> bool:
    return bool(name) and "pad" in tokens(name)


def _is_eos(name: str | None) -> bool:
    return bool(name) and any(t in ("eos", "eot", "endoftext") for t in tokens(name))


def _base(name: str) -> str:
    """``tokenizer`` of ``tokenizer.pad_token_id``; ``""`` for a plain name."""
    return name.rsplit(".", 1)[0] if "." in name else ""


def _pad_is_eos(ix: FileIndex) -> dict[str, ast.AST]:
    """Pad names bound to the EOS one -> the binding: ``PAD = EOS``, ``tokenizer.pad_token =
    tokenizer.eos_token`` (which makes ``tokenizer.pad_token_id`` the EOS id too), ``pad_id =
    tokenizer.eos_token_id``."""
    out: dict[str, ast.AST] = {}
    for node in ast.walk(ix.tree):
        if not isinstance(node, ast.Assign):
            continue
        for target in node.targets:
            pairs = [(target, node.value)]
            if isinstance(target, ast.Tuple) and isinstance(node.value, ast.Tuple) \
                    and len(target.elts) == len(node.value.elts):
                pairs = list(zip(target.elts, node.value.elts))
            for t, v in pairs:
                name, value = dotted(t), dotted(v)
                if _is_pad(name) and _is_eos(value) and not _is_pad(value):
                    out[name] = node
    return out


def _names_pad(ix: FileIndex, node: ast.AST, pads: dict[str, ast.AST]) -> ast.AST | None:
    """The binding that makes ``node`` (a name or attribute) the EOS id, or None."""
    name = dotted(node)
    if not name or not _is_pad(name):
        return None
    if name in pads:
        return pads[name]
    for bound, where in pads.items():
        if _base(bound) and _base(bound) == _base(name):
            return where  # tokenizer.pad_token = tokenizer.eos_token -> tokenizer.pad_token_id
    return None


def _pad_test(ix: FileIndex, node: ast.AST, pads: dict[str, ast.AST]) -> ast.AST | None:
    """``x == PAD`` (either side), ``x.eq(PAD)``: the binding of the pad id it tests, or None."""
    if isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.ops[0], ast.Eq):
        for side in (node.left, node.comparators[0]):
            found = _names_pad(ix, side, pads)
            if found is not None:
                return found
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "eq" and node.args:
        return _names_pad(ix, node.args[0], pads)
    return None


def _negative(node: ast.AST | None) -> bool:
    """-100, a negative literal, or a name that says it is ignored (``IGNORE_INDEX``)."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) and isinstance(node.operand, ast.Constant):
        return True
    name = dotted(node) if node is not None else None
    return bool(name) and "ignore" in tokens(name)


def _maskings(ix: FileIndex, pads: dict[str, ast.AST]) -> Iterator[tuple[ast.AST, ast.AST]]:
    """``(the masking, the pad binding)`` for labels equal to the pad id set to an ignored index."""
    for node in ast.walk(ix.tree):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Subscript) \
                and _negative(node.value):
            found = _pad_test(ix, node.targets[0].slice, pads)
            if found is not None:
                yield node, found
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.args:
            if node.func.attr == "where" and len(node.args) == 3 and _negative(node.args[1]):
                found = _pad_test(ix, node.args[0], pads)
            elif node.func.attr in ("masked_fill", "masked_fill_") and len(node.args) == 2 and _negative(node.args[1]):
                found = _pad_test(ix, node.args[0], pads)
            else:
                found = None
            if found is not None:
                yield node, found
        elif isinstance(node, ast.IfExp) and _negative(node.body):
            found = _pad_test(ix, node.test, pads)
            if found is not None:
                yield node, found
        elif isinstance(node, ast.Call) and (dotted(node.func) or "").rsplit(".", 1)[-1] in _COLLATORS:
            mlm = kwarg(node, "mlm")
            if (dotted(node.func) or "").endswith("LanguageModeling") and not (
                    isinstance(mlm, ast.Constant) and mlm.value is False):
                continue  # a masked LM's collator: it masks by the special-tokens mask, not the pad id
            tok = kwarg(node, "tokenizer") or (node.args[0] if node.args else None)
            name = dotted(tok) or ""
            for bound, where in pads.items():
                if name and _base(bound) == name:
                    yield node, where
                    break


def _eos_appended(ix: FileIndex) -> ast.AST | None:
    """Where EOS is put into the training sequences: ``seq + [EOS]``, ``text + tokenizer.eos_token``,
    ``f"...{tokenizer.eos_token}"``, ``ids.append(eos_id)``, ``add_eos_token=True``."""
    for node in ast.walk(ix.tree):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            right = node.right
            items = right.elts if isinstance(right, (ast.List, ast.Tuple)) else [right]
            if any(_is_eos(dotted(i)) and not _is_pad(dotted(i)) for i in items):
                return node
        elif isinstance(node, ast.JoinedStr):
            if any(isinstance(v, ast.FormattedValue) and _is_eos(dotted(v.value)) for v in node.values):
                return node
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "append" \
                and len(node.args) == 1 and _is_eos(dotted(node.args[0])):
            return node
        elif isinstance(node, ast.keyword) and node.arg == "add_eos_token" and isinstance(node.value, ast.Constant) \
                and node.value.value is True:
            return node.value
    return None


@rule("eos-masked-as-padding")
def eos_masked_as_padding(ix: FileIndex) -> Iterator[Hit]:
    pads = _pad_is_eos(ix)
    if not pads:
        return
    appended = _eos_appended(ix)
    if appended is None:
        return  # no EOS in the sequences: masking the pad id takes nothing away
    for masking, binding in _maskings(ix, pads):
        how = ("hands the tokenizer to a collator that sets every label equal to the pad id to -100"
               if isinstance(masking, ast.Call) and (dotted(masking.func) or "").rsplit(".", 1)[-1] in _COLLATORS
               else "sets every label equal to the pad id to the ignored index")
        yield Hit("eos-masked-as-padding", masking,
                  f"this {how}, but the pad id is the EOS id (line {binding.lineno}) and the sequences end with EOS "
                  f"(line {getattr(appended, 'lineno', '?')}): every real EOS is masked with the padding, so the model "
                  f"is never trained to emit EOS and does not stop when it generates",
                  fix="pad with a token that is not EOS (add a pad token, or reuse unk), or mask the padding by "
                      "position (labels[attention_mask == 0] = -100, or beyond each sequence's length), not by id")
