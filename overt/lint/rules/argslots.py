"""An argument passed positionally into another parameter's slot (OVT420 ``argument-in-wrong-slot``, issue 33).

Every argument should land in the parameter it was meant for.  The rule proves the opposite only
where both sides are certain: the callee's signature is known (a torch / scikit-learn / torchmetrics
callable the imports resolve, or a function, class or method defined in the file:
:mod:`overt.lint.analysis.slots`), and the argument's name is *exactly* the name of another parameter
``P`` of that callee (``torch.optim.SGD(params, lr, weight_decay)``: ``weight_decay`` fills
``momentum``), or -- for a (prediction, target) pair of parameters -- the two arguments' names say
prediction and label and each sits in the other's slot (``roc_auc_score(scores, labels)`` is fine,
``F.binary_cross_entropy(labels, outputs)`` is not).

Silent: an unknown callee, arguments past a ``*args`` or a starred argument, keyword arguments (a
name written out is the author's decision), a name that is no parameter of the callee, a name that
also fills its own slot (``nn.Conv2d(out_ch, out_ch, 3)``), names too generic to mean a parameter
(``x``, ``input``, ``data``), a swap of prediction and target where the callee is symmetric in them
(``mse_loss``, ``accuracy_score``; ``kl_div``, where the reverse KL is deliberate), the
scikit-learn metrics whose swap ``metric-arguments-swapped`` (OVT806) reports, a width in a width's
slot, two names of one kind (``in_channels``/``out_channels``) or the two ends of a pair
(``old``/``new``), and a function of the file with fewer than two named arguments out of place (its
parameter names are its own: one name proves nothing there, a swap or a shift does).

Measured on the lint corpus (``benchmarks/lint_corpus/run.py``, all four groups, 1.4M lines): 3
findings, all true (docs/wild.md, branch argname).
"""

from __future__ import annotations

import ast
from collections import Counter
from collections.abc import Iterator

from overt.lint.analysis.slots import (PRED_NAMES, PRED_SLOTS, SKLEARN_ASYMMETRIC, SYMMETRIC, TARGET_NAMES,
                                       TARGET_SLOTS, Signature, signature_of)
from overt.lint.index import FileIndex, tokens
from overt.lint.rules.base import Hit, rule

#: argument names too generic to say which parameter they were meant for
_GENERIC = frozenset({"input", "inputs", "x", "y", "z", "data", "other", "self", "cls", "args", "kwargs",
                      "value", "out", "output", "tensor", "obj", "weight", "bias", "name", "key"})
#: words of a parameter that counts units (channels, features, a width): the caller's name for a width
#: describes the caller's layer, which may well be the callee's other width; and a width in the wrong
#: slot fails loudly at the first forward (or changes nothing when the two are equal)
_WIDTH_WORDS = frozenset({"channels", "channel", "chans", "features", "feature", "dim", "dims", "planes",
                          "hidden", "embed", "embedding", "embeddings", "units", "width", "d", "model", "ch",
                          "filters", "neurons", "heads"})
_WIDTH_SLOTS = frozenset({"input_size", "hidden_size", "output_size", "proj_size", "num_embeddings",
                          "normalized_shape", "num_classes", "num_labels", "vocab_size", "groups"})
#: words that name one of a pair (the other is its partner): a caller may pass its `new` as a callee's
#: `old` on purpose (an inverse transform, a downgrade, a test of both orders)
_PARTNERS = {"old": "new", "src": "dst", "source": "target", "in": "out", "input": "output", "first": "second",
             "left": "right", "before": "after", "prev": "next", "start": "end", "begin": "end", "min": "max",
             "low": "high", "lo": "hi", "from": "to", "tgt": "src"}
_PARTNERS.update({v: k for k, v in list(_PARTNERS.items())})
#: first words that only say which split, batch or copy a value is: ``val_loader`` is a loader
_QUALIFIERS = frozenset({"train", "training", "val", "valid", "validation", "test", "eval", "dev", "all", "batch",
                         "base", "init", "initial", "default", "my", "the"})
_WEAK_WORDS = frozenset({"num", "n", "of", "is", "use", "max", "min", "the", "to"})


def _arg_name(node: ast.AST) -> str | None:
    """The name an argument carries: ``lr``, ``args.lr``/``self.lr`` -> ``lr``, ``cfg["lr"]`` -> ``lr``."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    if (isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant)
            and isinstance(node.slice.value, str) and node.slice.value.isidentifier()):
        return node.slice.value
    return None


def _relative(name: str, slot: str) -> bool:
    """Two names of one kind of thing (``in_channels``/``out_channels``, ``config0``/``config1``,
    ``new_h``/``h``, ``momentum``/``momentum_buffer``) or the two ends of a pair (``old``/``new``): the
    caller's one may be the callee's other on purpose."""
    a, b = set(tokens(name)), set(tokens(slot))
    if (a & b) - _WEAK_WORDS:
        return True
    if any(_PARTNERS.get(w) in b and (a - {w}) == (b - {_PARTNERS[w]}) for w in a):
        return True
    # a partner written into one word: chin/chout, w_in/w_out, src_len/tgt_len
    for w, partner in _PARTNERS.items():
        if len(w) > 1 and (name.endswith(w) and name[:-len(w)] + partner == slot
                           or name.startswith(w) and partner + name[len(w):] == slot):
            return True
    return False


def _is_width(slot: str) -> bool:
    return slot in _WIDTH_SLOTS or bool(set(tokens(slot)) & _WIDTH_WORDS)


def _role_of_name(name: str | None) -> str | None:
    """'pred' / 'target' when the name (or its last word: ``val_labels``, ``all_preds``) says so."""
    if name is None:
        return None
    for cand in (name, _unqualified(name)):
        if cand in PRED_NAMES:
            return "pred"
        if cand in TARGET_NAMES:
            return "target"
    return None


def _stem(raw: str | None, sig: Signature) -> str | None:
    """The parameter a name is named for: itself, or itself less a qualifier (``val_loader`` ->
    ``loader``, ``base_lr`` -> ``lr``); else the name as it is."""
    if raw is None or raw in sig.params:
        return raw
    bare = _unqualified(raw)
    return bare if bare in sig.params else raw


def _unqualified(name: str) -> str:
    """``val_loader`` -> ``loader``, ``base_lr`` -> ``lr``, ``all_preds`` -> ``preds``: a name less the word
    that only says which split or which copy (any other first word, ``last_dim``, ``x_pad``,
    ``num_labels``, names a different thing)."""
    head, _, rest = name.partition("_")
    return rest if rest and head.lower() in _QUALIFIERS else name


def _role_of_slot(slot: str) -> str | None:
    if slot in PRED_SLOTS:
        return "pred"
    if slot in TARGET_SLOTS:
        return "target"
    return None


def _ordinal(i: int) -> str:
    return f"{i}{'tsnrhtdd'[(i // 10 % 10 != 1) * (i % 10 < 4) * i % 10::4]}"


def _meant(sig: Signature, name: str) -> str:
    """The parameter an argument named ``name`` was meant for: its namesake, or the slot of its role."""
    if name in sig.params:
        return name
    return next((s for s in sig.positional if _role_of_slot(s) == _role_of_name(name)), name)


def _shown_signature(sig: Signature, upto: int) -> str:
    names = [p for p in sig.positional if p != "<self>"]
    shown = ", ".join(names[:upto])
    return f"{sig.name}({shown}{', ...' if len(names) > upto else ''})"


@rule("argument-in-wrong-slot")
def argument_in_wrong_slot(ix: FileIndex) -> Iterator[Hit]:
    """``super().__init__(params, lr, weight_decay)`` of a ``torch.optim.SGD`` subclass: the weight
    decay becomes the momentum (issue 33, YudeWang/SEAM#21)."""
    for call in ix.calls:
        if not call.args:
            continue
        sig = signature_of(ix, call)
        if sig is None:
            continue
        hit = _check(call, sig)
        if hit is not None:
            yield hit


def _check(call: ast.Call, sig: Signature) -> Hit | None:
    positional: list[tuple[int, ast.expr, str | None, str]] = []
    for i, arg in enumerate(call.args):
        if isinstance(arg, ast.Starred) or i >= len(sig.positional):
            break
        positional.append((i, arg, _stem(_arg_name(arg), sig), sig.positional[i]))
    filled = {slot: name for _, _, name, slot in positional}
    keywords = {k.arg for k in call.keywords if k.arg}
    counts = Counter(name for _, _, name, _ in positional if name)
    key = sig.key or ""
    roles_swappable = key not in SYMMETRIC and not (
        key.startswith("sklearn.metrics.") and key.rsplit(".", 1)[-1] in SKLEARN_ASYMMETRIC)
    misplaced: list[tuple[int, ast.expr, str, str]] = []
    for i, arg, name, slot in positional:
        if name is None or name == slot or slot == "<self>":
            continue
        name_role, slot_role = _role_of_name(name), _role_of_slot(slot)
        role_swap = name_role is not None and slot_role is not None and name_role != slot_role
        if role_swap and not roles_swappable:
            continue
        if name in sig.params and name not in _GENERIC and len(name) > 1:
            if filled.get(name) == name or name in keywords or counts[name] > 1:
                continue  # the same name fills its own slot too (nn.Conv2d(out_ch, out_ch, 3)), or another slot
                # as well (split_exists(split, tgt, src, src)), or is passed by name: reused on purpose
            if _relative(name, slot) or _is_width(slot):
                continue
            if name == "stride" and slot == "kernel_size" and "stride" not in filled:
                continue  # nn.MaxPool2d(stride): a window as wide as its stride (stride defaults to the window)
            if name_role is not None and name_role == slot_role:
                continue  # `labels` into y_true: the name's role is the slot's (sklearn's `labels` is another thing)
            misplaced.append((i, arg, name, slot))
        elif role_swap:
            # a (prediction, target) pair: only a complete swap of two role-named arguments is proven
            other = [s for s in sig.positional if _role_of_slot(s) == name_role]
            if len(other) == 1 and _role_of_name(filled.get(other[0])) == slot_role:
                misplaced.append((i, arg, name, slot))
    off = sum(1 for _, _, name, slot in positional
              if name and name != slot and name in sig.params and name not in _GENERIC and slot != "<self>")
    if not misplaced or (sig.key is None and off < 2):
        # a library's parameter names are the concepts users name their variables after (a `weight_decay`
        # is a weight decay); a function of the file names its parameters for itself (`_inside(node,
        # region)` called with the caller's `region` as the node): there two arguments out of place, a swap
        # or a shift, are the proof
        return None
    i, arg, name, slot = misplaced[0]
    upto = max(j for j, *_ in misplaced) + 1 - (1 if sig.positional[:1] == ("<self>",) else 0)
    shown = _shown_signature(sig, max(upto, 2))
    pos_no = i + 1 - (1 if sig.positional[:1] == ("<self>",) else 0)
    others = [f"`{n}` fills `{s}`" for _, _, n, s in misplaced[1:]]
    also = f" (and {', '.join(others)})" if others else ""
    meant = _meant(sig, name)
    message = (f"`{ast.unparse(arg)}` is passed as the {_ordinal(pos_no)} positional argument of {shown}, "
               f"which is its `{slot}` parameter, not `{meant}`{also}: the value meant for `{meant}` sets "
               f"`{slot}`, and Python raises nothing where the two take the same kind of value")
    fixes = ", ".join(f"{_meant(sig, n)}={ast.unparse(a)}" for _, a, n, _ in misplaced)
    return Hit("argument-in-wrong-slot", arg, message,
               fix=f"pass it by keyword ({fixes}) or put it in its own position")
