"""Confusion-count metrics written inline whose formula is not the metric they are labelled (part of OVT824
``metric-off-definition``).

Precision, recall, specificity, F1, Dice, IoU, accuracy, ... are each one rational function of the four
confusion counts.  Written inline in an evaluation loop (no function named after the metric), a formula
that divides by the wrong set (``precision = tp / (tp + fn)``: the recall), drops a term
(``accuracy = tp / (tp + fp + fn)``) or loses its parentheses (``2 * p * r / p + r``) reports another
number under the metric's name.

The rule proves each part from the code: the metric is named by the value's assignment target, an
f-string or ``%`` label right before it, a string argument right before it (``print("precision", x)``,
``self.log("val/recall", x)``, ``writer.add_scalar("f1", x, step)``), a dict key or a keyword; every name
of the formula is a confusion count (``tp``, ``fp``, ``fn``, ``tn``, ``true_positives``, ``n_fp`` ...), a
number, or a name bound once in the same scope to such a formula (``f1 = 2 * p * r / (p + r)`` with ``p``
and ``r`` bound above).  The formula is then evaluated on three sets of counts and compared with the
definition (as a fraction or in percent; smoothing constants are negligible at those counts).  Anything
else -- a name the rule cannot resolve, a call it does not know, a label naming two metrics -- leaves it
silent.
"""

from __future__ import annotations

import ast
import math
import re
from collections.abc import Callable, Iterator

from overt.lint.index import FileIndex, dotted, tokens
from overt.lint.rules.base import Hit

Counts = dict[str, float]

#: the definitions, as functions of the four counts
DEFINITIONS: dict[str, tuple[str, Callable[[Counts], float]]] = {
    "precision": ("tp / (tp + fp)", lambda c: c["tp"] / (c["tp"] + c["fp"])),
    "recall": ("tp / (tp + fn)", lambda c: c["tp"] / (c["tp"] + c["fn"])),
    "specificity": ("tn / (tn + fp)", lambda c: c["tn"] / (c["tn"] + c["fp"])),
    "npv": ("tn / (tn + fn)", lambda c: c["tn"] / (c["tn"] + c["fn"])),
    "fpr": ("fp / (fp + tn)", lambda c: c["fp"] / (c["fp"] + c["tn"])),
    "fnr": ("fn / (fn + tp)", lambda c: c["fn"] / (c["fn"] + c["tp"])),
    "f1": ("2 * tp / (2 * tp + fp + fn)", lambda c: 2 * c["tp"] / (2 * c["tp"] + c["fp"] + c["fn"])),
    "iou": ("tp / (tp + fp + fn)", lambda c: c["tp"] / (c["tp"] + c["fp"] + c["fn"])),
    "accuracy": ("(tp + tn) / (tp + tn + fp + fn)",
                 lambda c: (c["tp"] + c["tn"]) / (c["tp"] + c["tn"] + c["fp"] + c["fn"])),
    "balanced accuracy": ("(tp / (tp + fn) + tn / (tn + fp)) / 2",
                          lambda c: (c["tp"] / (c["tp"] + c["fn"]) + c["tn"] / (c["tn"] + c["fp"])) / 2),
}
#: name words of each metric
_WORDS: dict[str, frozenset[str]] = {
    "precision": frozenset({"precision", "prec", "ppv"}),
    "recall": frozenset({"recall", "rec", "sensitivity", "tpr"}),
    "specificity": frozenset({"specificity", "tnr", "selectivity"}),
    "npv": frozenset({"npv"}),
    "fpr": frozenset({"fpr", "fallout"}),
    "fnr": frozenset({"fnr"}),
    "f1": frozenset({"f1", "fscore", "f1score", "dice", "fmeasure"}),
    "iou": frozenset({"iou", "jaccard", "miou"}),
    "accuracy": frozenset({"accuracy", "acc"}),
}
#: words that make a labelled value something else than the metric (its complement, a loss, a weight)
_NOT = frozenset({"loss", "error", "err", "weight", "weights", "1m", "one", "minus", "inv", "delta", "diff",
                  "gain", "change", "best", "prev", "previous", "old", "target", "threshold", "thr", "std", "var",
                  "macro", "weighted", "curve", "at", "top", "k", "map", "ap", "auc"})
#: count words: one token, or two
_ONE = {"tp": "tp", "fp": "fp", "fn": "fn", "tn": "tn"}
_TWO = {("true", "pos"): "tp", ("true", "positive"): "tp", ("true", "positives"): "tp",
        ("false", "pos"): "fp", ("false", "positive"): "fp", ("false", "positives"): "fp",
        ("false", "neg"): "fn", ("false", "negative"): "fn", ("false", "negatives"): "fn",
        ("true", "neg"): "tn", ("true", "negative"): "tn", ("true", "negatives"): "tn"}
#: other words a count's name may carry
_COUNT_EXTRA = frozenset({"n", "num", "number", "total", "sum", "count", "counts", "cnt", "all", "epoch", "val",
                          "valid", "test", "per", "class", "cls", "global", "micro", "of", "s", "c", "self", "t"})
#: three sets of counts (scaled up so that a smoothing constant does not count)
_SAMPLES: tuple[Counts, ...] = (
    {"tp": 613e3, "fp": 127e3, "fn": 241e3, "tn": 1009e3},
    {"tp": 71e3, "fp": 433e3, "fn": 19e3, "tn": 277e3},
    {"tp": 1301e3, "fp": 37e3, "fn": 509e3, "tn": 89e3},
)
_TOL = 1e-4
_SQRT = frozenset({"np.sqrt", "numpy.sqrt", "math.sqrt", "torch.sqrt"})
_MAX = frozenset({"max", "np.maximum", "numpy.maximum", "torch.maximum", "torch.clamp", "torch.clip", "np.clip"})
_SAME = frozenset({"item", "float", "double", "sum", "cpu", "detach", "tolist", "numpy"})
_COMPARE: dict[type, Callable[[float, float], bool]] = {
    ast.Gt: lambda a, b: a > b, ast.GtE: lambda a, b: a >= b, ast.Lt: lambda a, b: a < b,
    ast.LtE: lambda a, b: a <= b, ast.Eq: lambda a, b: a == b, ast.NotEq: lambda a, b: a != b}


_CASTS = frozenset({"float", "bool", "long", "int", "double", "byte", "half", "flatten", "ravel", "contiguous"})
_PRED = frozenset({"pred", "preds", "prediction", "predictions", "output", "outputs", "out", "yhat", "hat", "logits",
                   "probs", "predicted", "seg"})
_TARGET = frozenset({"target", "targets", "gt", "label", "labels", "true", "truth", "ground", "tgt", "gts"})


def _operand(node: ast.AST) -> ast.AST:
    """``node`` without the casts that keep its values (``.float()``, ``.bool()``, ``.flatten()``)."""
    while isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _CASTS \
            and not node.args:
        node = node.func.value
    return node


def _agreement(node: ast.AST) -> bool:
    """Is ``node`` an element-wise equality of two arrays (``preds == label``, ``p != t``)?  It marks where two
    arrays agree -- a correct pixel of any class, tp and tn alike -- not one mask whose overlap with another
    is tp; a comparison with a constant (``label == 1``, ``prob > 0.5``) is a mask."""
    return isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.ops[0], (ast.Eq, ast.NotEq)) \
        and not any(isinstance(_operand(side), ast.Constant) for side in (node.left, node.comparators[0]))


def mask_count(node: ast.AST) -> tuple[str, tuple[ast.AST, ...]] | None:
    """("and" | "or" | "one", operands) when ``node`` sums the overlap, the union or one of two masks:
    ``(p & t).sum()``, ``(p * t).sum()``, ``torch.logical_or(p, t).sum()``, ``p.sum()``.  None when a part is
    where two arrays agree (``(valid * (preds == label)).sum()``: the correct pixels of a multi-class map,
    not an overlap of a prediction mask and a target mask)."""
    if not isinstance(node, ast.Call):
        return None
    name = dotted(node.func) or ""
    if isinstance(node.func, ast.Attribute) and node.func.attr == "sum" and name not in ("torch.sum", "np.sum"):
        inner = node.func.value
    elif name in ("torch.sum", "np.sum", "numpy.sum") and node.args:
        inner = node.args[0]
    else:
        return None
    inner = _operand(inner)
    if isinstance(inner, ast.BinOp) and isinstance(inner.op, (ast.BitAnd, ast.Mult, ast.BitOr)):
        parts = (_operand(inner.left), _operand(inner.right))
        kind = "or" if isinstance(inner.op, ast.BitOr) else "and"
    elif isinstance(inner, ast.Call) and (dotted(inner.func) or "").rsplit(".", 1)[-1] in ("logical_and",
                                                                                           "logical_or") \
            and len(inner.args) == 2:
        parts = (_operand(inner.args[0]), _operand(inner.args[1]))
        kind = "or" if (dotted(inner.func) or "").endswith("or") else "and"
    elif isinstance(inner, (ast.Name, ast.Attribute, ast.Subscript, ast.Compare)):
        if dotted(inner) and count_kind(dotted(inner) or "") is not None or _agreement(inner):
            return None
        return "one", (inner,)
    else:
        return None
    if any(not isinstance(p, (ast.Name, ast.Attribute, ast.Subscript, ast.Compare)) or _agreement(p)
           for p in parts):
        return None
    return kind, parts


def _smoothing(name: str) -> bool:
    """A smoothing term's name (``eps``, ``smooth``): a small constant, whatever the caller passes."""
    return bool(set(tokens(name)) & {"eps", "epsilon", "smooth", "smoothing"}) and "." not in name


def _role(node: ast.AST) -> str | None:
    words = set()
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name):
            words |= set(tokens(sub.id)) | {sub.id.lower()}
    if words & _PRED and not words & _TARGET:
        return "pred"
    if words & _TARGET and not words & _PRED:
        return "target"
    return None


def count_kind(name: str) -> str | None:
    """"tp", "fp", "fn" or "tn" when ``name`` names one confusion count."""
    words = tokens(name)
    kinds = [_ONE[w] for w in words if w in _ONE]
    rest = [w for w in words if w not in _ONE]
    for pair, kind in _TWO.items():
        for i in range(len(words) - 1):
            if (words[i], words[i + 1]) == pair:
                kinds.append(kind)
                rest = [w for w in rest if w not in pair]
    if len(kinds) != 1 or any(w not in _COUNT_EXTRA for w in rest):
        return None
    return kinds[0]


def metric_of(label: str) -> str | None:
    """The confusion-count metric a name or label claims to be (one, and nothing that qualifies it)."""
    words = set()
    for part in label.replace("/", " ").replace(".", " ").replace("-", "_").split():
        words |= set(tokens(part)) | {w for w in re.split(r"[_\W]+", part.lower()) if w}
    if words & _NOT:
        return None
    found = {m for m, ws in _WORDS.items() if words & ws}
    if "balanced" in words and found == {"accuracy"}:
        return "balanced accuracy"
    return found.pop() if len(found) == 1 else None


class _Formula:
    """Evaluates an expression of confusion counts, resolving names bound once in ``scope``."""

    def __init__(self, ix: FileIndex, scope: ast.AST | None) -> None:
        self.ix = ix
        self.operands: dict[str, ast.AST] = {}  # the two masks a formula's sums are over, by their dump
        self.roles: dict[str, str] = {}  # the mask -> "pred" or "target" of the evaluation under way
        self.through_masks = False  # read a count name bound to a sum over masks as that sum
        self.bound: dict[str, list[ast.AST]] = {}
        self.called: set[str] = set()
        for node in ix.scope_nodes(scope if scope is not None else ix.tree):
            if isinstance(node, ast.Assign):
                for t in node.targets:
                    for e in (t.elts if isinstance(t, (ast.Tuple, ast.List)) else [t]):
                        name = dotted(e)
                        if name:
                            value = node.value if e is t else None
                            self.bound.setdefault(name, []).append(value)
            elif isinstance(node, (ast.AugAssign, ast.AnnAssign)) and dotted(node.target):
                self.bound.setdefault(dotted(node.target) or "", []).append(None)
            elif isinstance(node, (ast.For, ast.comprehension)):
                for e in ast.walk(node.target):
                    if isinstance(e, ast.Name):
                        self.bound.setdefault(e.id, []).append(None)
            elif isinstance(node, ast.Call) and dotted(node.func):
                self.called.add(dotted(node.func) or "")

    def leaves(self, node: ast.AST, depth: int = 0) -> set[str] | None:
        """The count kinds ``node`` is made of, or None when something in it is not a count formula."""
        if depth > 5:
            return None
        if isinstance(node, ast.Constant):
            return set() if isinstance(node.value, (int, float)) and not isinstance(node.value, bool) else None
        counted = mask_count(node)
        if counted is not None:
            keys = []
            for part in counted[1]:
                key = ast.dump(part)
                self.operands.setdefault(key, part)
                keys.append(key)
            return {f"{counted[0]}:{','.join(sorted(keys))}"}
        name = dotted(node)
        if name is not None:
            kind = count_kind(name)
            values = self.bound.get(name, [])
            if kind is not None and self.through_masks and len(values) == 1 and values[0] is not None \
                    and mask_count(values[0]):
                return self.leaves(values[0], depth + 1)  # tp = (pred & target).sum()
            if kind is not None and name not in self.called:
                return {kind}
            if _smoothing(name) and not values:
                return set()
            if len(values) != 1 or values[0] is None:
                return None
            return self.leaves(values[0], depth + 1)
        if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.Pow)):
            a, b = self.leaves(node.left, depth), self.leaves(node.right, depth)
            return None if a is None or b is None else a | b
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            return self.leaves(node.operand, depth)
        if isinstance(node, (ast.IfExp, ast.Compare, ast.BoolOp)):  # x / n if n > 0 else 0
            parts = [node.test, node.body, node.orelse] if isinstance(node, ast.IfExp) else \
                [node.left, *node.comparators] if isinstance(node, ast.Compare) else list(node.values)
            if isinstance(node, ast.Compare) and not all(type(op) in _COMPARE for op in node.ops):
                return None
            out: set[str] = set()
            for sub in parts:
                got = self.leaves(sub, depth)
                if got is None:
                    return None
                out |= got
            return out
        inner = self._inner(node)
        if inner is not None:
            out: set[str] = set()
            for sub in inner:
                got = self.leaves(sub, depth)
                if got is None:
                    return None
                out |= got
            return out
        return None

    def _inner(self, node: ast.AST) -> list[ast.AST] | None:
        """The arguments of a call the evaluator knows (a cast, a square root, a clamp from below)."""
        if not isinstance(node, ast.Call):
            return None
        func = dotted(node.func) or ""
        if func == "float" and len(node.args) == 1 and not node.keywords:
            return [node.args[0]]
        if isinstance(node.func, ast.Attribute) and node.func.attr in _SAME and not node.args and not node.keywords:
            return [node.func.value]
        if func in _SQRT and len(node.args) == 1:
            return [node.args[0]]
        if isinstance(node.func, ast.Attribute) and node.func.attr == "sqrt" and not node.args:
            return [node.func.value]
        if func in _MAX and len(node.args) == 2 and not node.keywords:
            return list(node.args)
        if isinstance(node.func, ast.Attribute) and node.func.attr in ("clamp", "clamp_min", "clip") and \
                len(node.args) + len(node.keywords) == 1 and (node.args or node.keywords[0].arg == "min"):
            return [node.func.value, node.args[0] if node.args else node.keywords[0].value]
        return None

    def value(self, node: ast.AST, counts: Counts, depth: int = 0) -> float:
        """The expression's value on ``counts`` (raises on anything unknown)."""
        if depth > 5:
            raise ValueError(node)
        if isinstance(node, ast.Constant):
            return float(node.value)
        counted = mask_count(node)
        if counted is not None:
            kind, parts = counted
            if kind == "and":
                return counts["tp"]
            if kind == "or":
                return counts["tp"] + counts["fp"] + counts["fn"]
            role = self.roles[ast.dump(parts[0])]
            return counts["tp"] + (counts["fp"] if role == "pred" else counts["fn"])
        name = dotted(node)
        if name is not None:
            kind = count_kind(name)
            values = self.bound.get(name, [])
            if kind is not None and self.through_masks and len(values) == 1 and values[0] is not None \
                    and mask_count(values[0]):
                return self.value(values[0], counts, depth + 1)
            if kind is not None and name not in self.called:
                return counts[kind]
            if _smoothing(name) and not values:
                return 1.0  # a smoothing term passed in: negligible at the sample counts
            return self.value(self.bound[name][0], counts, depth + 1)
        if isinstance(node, ast.BinOp):
            a, b = self.value(node.left, counts, depth), self.value(node.right, counts, depth)
            if isinstance(node.op, ast.Add):
                return a + b
            if isinstance(node.op, ast.Sub):
                return a - b
            if isinstance(node.op, ast.Mult):
                return a * b
            if isinstance(node.op, ast.Div):
                return a / b
            return a ** b
        if isinstance(node, ast.UnaryOp):
            v = self.value(node.operand, counts, depth)
            return -v if isinstance(node.op, ast.USub) else v
        if isinstance(node, ast.IfExp):
            taken = node.body if self.value(node.test, counts, depth) else node.orelse
            return self.value(taken, counts, depth)
        if isinstance(node, ast.BoolOp):
            values = [self.value(v, counts, depth) for v in node.values]
            return float(all(values) if isinstance(node.op, ast.And) else any(values))
        if isinstance(node, ast.Compare):
            left, ok = self.value(node.left, counts, depth), True
            for op, right_node in zip(node.ops, node.comparators):
                right = self.value(right_node, counts, depth)
                ok = ok and _COMPARE[type(op)](left, right)
                left = right
            return float(ok)
        assert isinstance(node, ast.Call)
        func = dotted(node.func) or ""
        args = self._inner(node) or []
        values = [self.value(a, counts, depth) for a in args]
        if func in _SQRT or (isinstance(node.func, ast.Attribute) and node.func.attr == "sqrt"):
            return math.sqrt(values[0])
        if len(values) == 2:
            return max(values)
        return values[0]


def _matches(got: float, expected: float) -> bool:
    return any(abs(got - scale * expected) <= _TOL * max(1e-9, abs(scale * expected)) for scale in (1.0, 100.0))


def _labelled(ix: FileIndex) -> Iterator[tuple[str, ast.AST, ast.AST]]:
    """(the label, the labelled value, the node to report) for every value the code names as a metric."""
    for node in ast.walk(ix.tree):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and dotted(node.targets[0]):
            yield dotted(node.targets[0]) or "", node.value, node.value
        elif isinstance(node, ast.JoinedStr):
            text = ""
            for part in node.values:
                if isinstance(part, ast.Constant) and isinstance(part.value, str):
                    text += part.value
                elif isinstance(part, ast.FormattedValue):
                    yield text, part.value, part.value
                    text = ""
        elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod) and isinstance(node.left, ast.Constant) \
                and isinstance(node.left.value, str) and node.left.value.count("%") == 1:
            yield node.left.value, node.right, node.right
        elif isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values):
                if isinstance(key, ast.Constant) and isinstance(key.value, str):
                    yield key.value, value, value
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "format" \
                and isinstance(node.func.value, ast.Constant) and isinstance(node.func.value.value, str) \
                and node.func.value.value.count("{") == 1 and len(node.args) == 1 and not node.keywords:
            yield node.func.value.value.split("{", 1)[0], node.args[0], node.args[0]
        elif isinstance(node, ast.Call):
            for kw in node.keywords:
                if kw.arg:
                    yield kw.arg, kw.value, kw.value
            for first, second in zip(node.args, node.args[1:]):
                if isinstance(first, ast.Constant) and isinstance(first.value, str):
                    yield first.value, second, second


def _label_metric(label: str) -> str | None:
    """The metric of the last words of a label (``"val precision: "``), when they name exactly one."""
    label = label.strip().rstrip(":=").strip()
    for sep in (",", "|", ";", "(", ")", "\t", "\n", "  "):
        label = label.rsplit(sep, 1)[-1]
    return metric_of(label) if label else None


def count_formulas(ix: FileIndex) -> Iterator[Hit]:
    """Hits of ``metric-off-definition`` for confusion-count formulas that are not the metric they are named."""
    done: set[int] = set()
    formulas: dict[int, _Formula] = {}
    labelled = sorted(_labelled(ix), key=lambda t: (not isinstance(ix.parents.get(t[1]), ast.Assign),
                                                    getattr(t[2], "lineno", 0)))
    for label, value, where in labelled:
        metric = _label_metric(label)
        if metric is None:
            continue
        scope = ix.enclosing_function(where)
        formula = formulas.setdefault(id(scope), _Formula(ix, scope))
        formula.operands, formula.through_masks = {}, False
        kinds = formula.leaves(value)
        if kinds and len(formula.operands) == 1:  # tp / target.sum(): the counts are sums over masks too
            formula.operands, formula.through_masks = {}, True
            kinds = formula.leaves(value)
        if not kinds or len(kinds) < 2:
            continue  # one count alone is no formula the rule can judge
        if formula.operands and not any(k.startswith(("and:", "or:")) for k in kinds):
            continue  # sums of two arrays, but no overlap or union of them: nothing says they are masks
        text, define = DEFINITIONS[metric]
        expected = [define(c) for c in _SAMPLES]
        got = _evaluations(formula, value, expected)
        if got is None:
            continue
        body = _body(formula, value)
        if id(body) in done:
            continue
        done.add(id(body))
        other = [m for m, (_, f) in DEFINITIONS.items() if m != metric
                 and all(_matches(g, f(c)) for g, c in zip(got, _SAMPLES))]
        seen = ix.segment(body)
        at = "" if body is value else f" (bound at line {body.lineno})"
        what = (f"it is the {other[0]} ({DEFINITIONS[other[0]][0]})" if other else
                f"on tp, fp, fn, tn = 613000, 127000, 241000, 1009000 it gives {got[0]:.4g} where the {metric} is "
                f"{expected[0]:.4g}")
        masks = (" (over two masks: tp their overlap, tp + fp the prediction's sum, tp + fn the target's, "
                 "tp + fp + fn their union)") if formula.operands else ""
        yield Hit("metric-off-definition", where,
                  f"`{seen}`{at} is reported as the {metric} (`{label.strip() or metric}`), but the {metric} of "
                  f"the confusion counts is {text}{masks}, and {what}: the number logged under the metric's name is "
                  "another quantity",
                  fix=f"compute the {metric} as {text} (or use sklearn.metrics / torchmetrics), and check the "
                      "formula on counts whose answer you know")


def _evaluations(formula: _Formula, value: ast.AST, expected: list[float]) -> list[float] | None:
    """The formula's values on the sample counts, when no reading of it gives the metric; else None.  Sums over
    two masks are read with the masks' roles when their names say them, else both ways."""
    keys = sorted(formula.operands)
    if keys and len(keys) != 2:
        return None
    readings: list[dict[str, str]] = [{}]
    if keys:
        named = {k: _role(formula.operands[k]) for k in keys}
        a, b = keys
        if {named[a], named[b]} == {"pred", "target"}:
            readings = [{a: named[a] or "", b: named[b] or ""}]
        else:
            readings = [{a: "pred", b: "target"}, {a: "target", b: "pred"}]
    first: list[float] | None = None
    for roles in readings:
        formula.roles = roles
        try:
            got = [formula.value(value, c) for c in _SAMPLES]
        except (ValueError, ZeroDivisionError, KeyError, OverflowError, AssertionError, IndexError):
            return None
        if any(_matches(g, e) for g, e in zip(got, expected)):
            return None
        first = first or got
    return first


def _body(formula: _Formula, value: ast.AST) -> ast.AST:
    """The formula behind a name bound once (the node to quote and to report once)."""
    seen = 0
    while dotted(value) is not None and count_kind(dotted(value) or "") is None and seen < 5:
        values = formula.bound.get(dotted(value) or "", [])
        if len(values) != 1 or values[0] is None:
            break
        value, seen = values[0], seen + 1
    return value
