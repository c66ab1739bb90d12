"""A metric defined over the whole evaluation set computed as the unweighted mean of per-group values (part of
OVT824 ``metric-off-definition``).

Some metrics are ratios of totals by definition: a word or character error rate is the total number of edits over
the total reference length (sclite's corpus rate), an accuracy is the correct predictions over the predictions,
and the expected calibration error weighs each confidence bin's gap by the share of the predictions in it.  The
program that keeps the counts per group (per utterance, per batch, per bin) and averages the groups' own values
gives every group the same weight: a two-word utterance counts as much as a forty-word one, a bin of five
predictions as much as one of five thousand (sdrobert/pydrobert-pytorch#50, ethen8181/machine-learning#20).

Proven from the code, in two forms:

- **A rate averaged over groups.** A value named as an error rate (``wer``, ``cer``, ``rate``, ``error_rate``,
  ``err``) or an accuracy (``acc``, ``accuracy``) is the mean of ``e / n`` over pairs drawn together from two
  sequences (``zip(E, N)``, ``E[i] / N[i]`` over one index, or ``(E / N).mean()``), the first named for errors
  (``errors``, ``edits``, ``distances``) -- or for correct predictions when the value is an accuracy -- and the
  second for group sizes (``lengths``, ``totals``, ``counts``, ``n_words``).  The program holds both counts, so
  the group sizes are in hand and the definition is ``sum(E) / sum(N)``.
- **An ECE whose bins are not weighted.** Inside a loop over equal-width bins (the scope builds its edges with
  ``linspace(0, 1, ...)``), a value named as the expected calibration error (``ece``, ``calibration_error``) is
  accumulated (``+=``) with the absolute difference of two per-bin means (``abs(acc.mean() - conf.mean())``, or
  names bound in the loop to means), not multiplied by anything: each bin's gap enters with weight one whatever
  its count.

Silent when a name says the average is over groups on purpose (``per_utt``, ``sentence``, ``macro``,
``balanced``, ``class``, ``user``, ``mean``/``avg``: documented per-group averages, macro averages, per-user
ranking metrics), when the bins come from quantiles (equal-mass bins hold equal counts: their plain mean is the
weighted one), when the gap is multiplied by a weight or built from per-bin sums (divided by the total later),
for a maximum calibration error (``mce``, no weights by definition), and for any other formula.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from overt.lint.index import FileIndex, dotted, tokens
from overt.lint.rules.base import Hit
from overt.lint.rules.countformula import _labelled

_MEAN = frozenset({"np.mean", "numpy.mean", "torch.mean", "statistics.mean", "mean", "np.average",
                   "numpy.average", "np.nanmean", "fmean", "statistics.fmean"})
_SUM = frozenset({"sum", "np.sum", "numpy.sum", "torch.sum", "math.fsum", "fsum"})
_ARRAY = frozenset({"torch.tensor", "torch.as_tensor", "np.asarray", "np.array", "numpy.asarray", "numpy.array",
                    "torch.stack", "torch.cat", "np.concatenate", "list", "torch.Tensor", "torch.FloatTensor"})
_KEEP = frozenset({"float", "item", "cpu", "detach", "tolist", "numpy"})
_ABS = frozenset({"abs", "np.abs", "numpy.abs", "torch.abs", "math.fabs", "np.absolute", "numpy.absolute"})

#: words of a numerator that counts errors
_ERRORS = frozenset({"error", "errors", "err", "errs", "edit", "edits", "distance", "distances", "dist", "dists",
                     "mistake", "mistakes", "wrong", "incorrect", "mismatch", "mismatches", "lev", "levenshtein"})
#: words of a numerator that counts correct predictions
_CORRECT = frozenset({"correct", "corrects", "right", "matches", "matched"})
#: words of a group size
_SIZES = frozenset({"length", "lengths", "len", "lens", "total", "totals", "count", "counts", "size", "sizes", "n",
                    "num", "words", "tokens", "frames", "chars", "characters", "ref", "refs", "reference",
                    "references", "denom", "denominator", "denominators", "samples"})
#: words of a size that also prefix a count (``n_errors``, ``num_correct``, ``word_errors``)
_COUNTING = frozenset({"n", "num", "count", "counts", "words", "tokens", "chars", "characters", "frames", "ref"})
#: words that say the average over groups is meant (a documented per-group average, a macro average)
_MEANT = frozenset({"utt", "utts", "utterance", "utterances", "sentence", "sentences", "sent", "sents", "seq",
                    "sequence", "sequences", "sample", "item", "items", "user", "users", "query", "queries", "doc",
                    "docs", "document", "documents", "image", "images", "class", "classes", "classwise", "macro",
                    "avg", "average", "averaged", "mean", "balanced", "speaker", "speakers", "file", "files",
                    "group", "groups", "per", "best", "prev", "delta", "diff", "std", "var", "loss", "bin", "bins",
                    "client", "clients", "task", "tasks", "domain", "domains", "category", "categories"})


def _words(label: str) -> set[str]:
    label = label.strip().rstrip(":=").strip()
    for sep in (",", "|", ";", "(", ")", "\t", "\n", "  ", " "):
        label = label.rsplit(sep, 1)[-1]
    out: set[str] = set()
    for part in label.replace("/", ".").replace("-", "_").split("."):
        out |= set(tokens(part))
    return out


def _claim(label: str) -> str | None:
    """"rate" (an error rate) or "acc" (an accuracy) when a label names one, unqualified."""
    words = _words(label)
    if not words or words & _MEANT:
        return None
    if words & {"wer", "cer", "ter"} or words & {"rate", "error", "err"}:
        return None if words & {"acc", "accuracy", "lr", "learning", "dropout", "sample", "sampling", "hit",
                                "recall", "precision", "success", "click", "frame"} else "rate"
    if words & {"acc", "accuracy"}:
        return "acc"
    return None


def _strip(node: ast.AST) -> ast.AST:
    """The value under ``float(...)``, ``round(x, k)``, ``.item()``, a scaling by 100."""
    while True:
        if isinstance(node, ast.Call):
            name = dotted(node.func) or ""
            if name in ("float", "round") and node.args:
                node = node.args[0]
                continue
            if isinstance(node.func, ast.Attribute) and node.func.attr in _KEEP and not node.args:
                node = node.func.value
                continue
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
            if isinstance(node.left, ast.Constant) and node.left.value in (100, 100.0):
                node = node.right
                continue
            if isinstance(node.right, ast.Constant) and node.right.value in (100, 100.0):
                node = node.left
                continue
        return node


def _seq_name(node: ast.AST) -> str | None:
    """The name of a sequence, through ``np.array(E)`` / ``torch.tensor(E)`` and ``.float()``."""
    node = _strip(node)
    while isinstance(node, ast.Call) and dotted(node.func) in _ARRAY and node.args:
        node = _strip(node.args[0])
    return dotted(node)


def _pair(numer: str | None, denom: str | None, kind: str) -> bool:
    if not numer or not denom or numer == denom:
        return False
    nw, dw = set(tokens(numer)), set(tokens(denom))
    if (nw | dw) & (_MEANT - {"per", "mean", "avg", "average"}):
        return False  # per-class / per-user counts: a macro average is another metric, named so or not
    wanted = _ERRORS if kind == "rate" else _CORRECT
    return bool(nw & wanted) and not nw & (_SIZES - _COUNTING) and bool(dw & _SIZES) and not dw & (_ERRORS | _CORRECT)


def _ratio_of_targets(elt: ast.AST, gen: ast.comprehension) -> tuple[str, str] | None:
    """(E, N) when ``elt`` is ``e / n`` for ``e, n in zip(E, N)`` or ``E[i] / N[i]`` for ``i in range(...)``."""
    elt = _strip(elt)
    if not isinstance(elt, ast.BinOp) or not isinstance(elt.op, ast.Div):
        return None
    left, right = _strip(elt.left), _strip(elt.right)
    it = gen.iter
    if isinstance(it, ast.Call) and dotted(it.func) == "zip" and len(it.args) == 2 and not it.keywords \
            and isinstance(gen.target, ast.Tuple) and len(gen.target.elts) == 2 \
            and all(isinstance(t, ast.Name) for t in gen.target.elts) \
            and isinstance(left, ast.Name) and isinstance(right, ast.Name):
        names = [t.id for t in gen.target.elts]  # type: ignore[attr-defined]
        if [left.id, right.id] == names:
            return _seq_name(it.args[0]) or "", _seq_name(it.args[1]) or ""
        return None
    if isinstance(it, ast.Call) and dotted(it.func) == "range" and isinstance(gen.target, ast.Name) \
            and isinstance(left, ast.Subscript) and isinstance(right, ast.Subscript):
        index = gen.target.id
        if all(isinstance(s.slice, ast.Name) and s.slice.id == index for s in (left, right)):
            return dotted(left.value) or "", dotted(right.value) or ""
    return None


def _comprehension_ratio(node: ast.AST) -> tuple[str, str] | None:
    node = _strip(node)
    while isinstance(node, ast.Call) and dotted(node.func) in _ARRAY and node.args:
        node = _strip(node.args[0])
    if isinstance(node, (ast.GeneratorExp, ast.ListComp)) and len(node.generators) == 1 \
            and not node.generators[0].ifs:
        return _ratio_of_targets(node.elt, node.generators[0])
    return None


def _array_ratio(node: ast.AST) -> tuple[str, str] | None:
    """(E, N) of an elementwise ``E / N`` of two named sequences."""
    node = _strip(node)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
        left, right = _seq_name(node.left), _seq_name(node.right)
        if left and right:
            return left, right
    return None


def _mean_of_ratios(node: ast.AST) -> tuple[str, str] | None:
    """(E, N) when ``node`` is the plain mean of the per-group ratios ``E_i / N_i``."""
    node = _strip(node)
    if isinstance(node, ast.Call):
        name = dotted(node.func) or ""
        if name in _MEAN and len(node.args) == 1 and not node.keywords:
            return _comprehension_ratio(node.args[0]) or _array_ratio(node.args[0])
        if isinstance(node.func, ast.Attribute) and node.func.attr == "mean" and not node.args:
            return _comprehension_ratio(node.func.value) or _array_ratio(node.func.value)
        return None
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
        total, count = _strip(node.left), _strip(node.right)
        if not (isinstance(count, ast.Call) and dotted(count.func) == "len" and len(count.args) == 1):
            return None
        if isinstance(total, ast.Call) and dotted(total.func) in _SUM and len(total.args) == 1:
            pair = _comprehension_ratio(total.args[0])
            if pair and _seq_name(count.args[0]) in pair:
                return pair
    return None


def _rates(ix: FileIndex) -> Iterator[Hit]:
    seen: set[int] = set()
    for label, value, where in _labelled(ix):
        if id(value) in seen:
            continue
        kind = _claim(label)
        if kind is None:
            continue
        pair = _mean_of_ratios(value)
        if pair is None or not _pair(pair[0], pair[1], kind):
            continue
        seen.add(id(value))
        numer, denom = pair
        shown = label.strip().rstrip(":=").strip() or "rate"
        what = "error rate" if kind == "rate" else "accuracy"
        yield Hit("metric-off-definition", where,
                  f"`{ix.segment(value)}` is reported as the {what} (`{shown}`), but it is the unweighted mean of "
                  f"each group's own ratio `{numer}[i] / {denom}[i]`: the {what} is a ratio of totals by definition "
                  f"(sum({numer}) / sum({denom}), the corpus rate sclite and the usual tools report), and the mean of "
                  "the groups' ratios gives a group of two the weight of a group of forty, so the number moves with "
                  "how the data is cut into groups and is not the metric its name says unless every group has the "
                  "same size",
                  fix=f"divide the totals: sum({numer}) / sum({denom}); if a per-group average is what you mean, "
                      "name it so (e.g. `mean_utterance_rate`)")


def _ece_claim(name: str) -> bool:
    words = set(tokens(name))
    if words & {"mce", "max", "maximum", "best", "prev", "delta", "diff", "classwise", "class", "ace", "adaptive"}:
        return False
    return "ece" in words or {"calibration", "error"} <= words


def _is_abs_gap(node: ast.AST) -> ast.BinOp | None:
    """The ``A - B`` of ``abs(A - B)`` / ``(A - B).abs()`` (under ``float``/``.item()``)."""
    node = _strip(node)
    inner: ast.AST | None = None
    if isinstance(node, ast.Call) and dotted(node.func) in _ABS and len(node.args) == 1:
        inner = node.args[0]
    elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "abs" \
            and not node.args:
        inner = node.func.value
    if inner is None:
        return None
    inner = _strip(inner)
    if isinstance(inner, ast.BinOp) and isinstance(inner.op, ast.Sub):
        return inner
    return None


def _bound_in(loop: ast.AST, name: str, ix: FileIndex) -> list[ast.AST]:
    """Values assigned to ``name`` by plain assignments inside ``loop``."""
    out = []
    for node in ix.scope_nodes(loop):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name) \
                and node.targets[0].id == name:
            out.append(node.value)
    return out


def _is_mean(node: ast.AST, loop: ast.AST, ix: FileIndex, depth: int = 0) -> bool:
    """``node`` is a per-bin average: a ``.mean()`` / ``np.mean(...)`` call, or a name bound once in the loop to
    one."""
    node = _strip(node)
    if isinstance(node, ast.Call):
        name = dotted(node.func) or ""
        if name in _MEAN and name != "mean" and node.args:
            return True
        return isinstance(node.func, ast.Attribute) and node.func.attr == "mean" and not node.args
    if isinstance(node, ast.Name) and depth < 2:
        values = _bound_in(loop, node.id, ix)
        return len(values) == 1 and _is_mean(values[0], loop, ix, depth + 1)
    return False


def _unweighted_gap(node: ast.AST, loop: ast.AST, ix: FileIndex) -> bool:
    gap = _is_abs_gap(node)
    if gap is None and isinstance(_strip(node), ast.Name):
        values = _bound_in(loop, _strip(node).id, ix)  # type: ignore[attr-defined]
        if len(values) == 1:
            gap = _is_abs_gap(values[0])
    return gap is not None and _is_mean(gap.left, loop, ix) and _is_mean(gap.right, loop, ix)


def _equal_width_edges(scope: ast.AST, ix: FileIndex) -> bool:
    """The scope builds bin edges as ``linspace(0, 1, ...)`` and takes no quantiles."""
    found = False
    for node in ix.scope_nodes(scope):
        if not isinstance(node, ast.Call):
            continue
        name = dotted(node.func) or ""
        last = name.rsplit(".", 1)[-1]
        if last in ("quantile", "percentile", "nanquantile", "array_split", "qcut"):
            return False
        if last == "linspace" and len(node.args) >= 2 and all(isinstance(a, ast.Constant) for a in node.args[:2]) \
                and node.args[0].value in (0, 0.0) and node.args[1].value in (1, 1.0):  # type: ignore[attr-defined]
            found = True
    return found


def _ece_bins(ix: FileIndex) -> Iterator[Hit]:
    for node in ast.walk(ix.tree):
        if not isinstance(node, ast.AugAssign) or not isinstance(node.op, ast.Add):
            continue
        target = dotted(node.target)
        if not target or not _ece_claim(target):
            continue
        loops = [lp for lp in ix.enclosing_loops(node) if isinstance(lp, (ast.For, ast.AsyncFor))]
        if not loops:
            continue
        loop = loops[0]
        if not _unweighted_gap(node.value, loop, ix):
            continue
        scope = ix.enclosing_function(node) or ix.tree
        if not _equal_width_edges(scope, ix):
            continue
        yield Hit("metric-off-definition", node,
                  f"`{ix.segment(node)}` accumulates the expected calibration error (`{target}`) from each bin's gap "
                  "between accuracy and confidence with weight one, but the ECE weighs every bin by the share of the "
                  "predictions that fall in it: with equal-width bins a handful of predictions in a sparse bin then "
                  "count as much as thousands in the top one, and the number reported is not the model's "
                  "calibration error (equal-mass bins, whose plain mean is the weighted one, build their edges from "
                  "quantiles)",
                  fix="multiply each bin's gap by its share of the predictions: ece += gap * in_bin.float().mean() "
                      "(or use torchmetrics.CalibrationError)")


def unweighted_group_means(ix: FileIndex) -> Iterator[Hit]:
    """Hits of ``metric-off-definition`` for ratio-of-totals metrics averaged over groups with equal weights."""
    yield from _rates(ix)
    yield from _ece_bins(ix)
