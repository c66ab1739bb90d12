"""Guard on metric functions that do not give a perfect prediction its perfect score
(slug ``metric-imperfect-on-truth``; issue 33).

An invariant of every metric: scored against itself, the ground truth gets the metric's best value:
an IoU, Dice, accuracy, F1, precision, recall, AUC or correlation of 1 (or 100 in percent), an error
(MSE, MAE, RMSE, WER, CER) of 0.  A metric written by hand that breaks it is biased for every model
it scores: a class absent from both masks counted as IoU 0, a count divided by the wrong total, a
smoothing term that dominates, a decoding step that leaves a token behind, an average over the wrong
axis.  Nothing fails; the reported number is simply not the metric.

What is checked: the metric functions of the running script (``__main__``: functions defined in its
file, at module level, whose name is a metric's -- ``mean_iou``, ``dice_score``, ``compute_accuracy``,
``f1``, ``rmse`` ... -- with one parameter named like a prediction (``pred``, ``outputs``, ``y_pred``,
``logits`` ...) and one like a target (``target``, ``labels``, ``y_true``, ``masks`` ...)). When a
watched model is switched to eval mode, or the script enters a ``no_grad`` block, those functions are
wrapped in the module's namespace (and looked for again while the namespace grows); the first call of
each is recorded (its arguments by reference, its result) and passed through unchanged. At the end of
the run each recorded call is repeated once with the target given as the prediction (a copy of it, in
the prediction's shape and dtype), with output suppressed and gradients off; the result must be the best
value. Nothing is concluded when the premise is not met: prediction and target of different kinds or
shapes (beyond dimensions of size 1; logits against class indices: the target is then no prediction of
the function's kind), a target with a single value (precision or AUC are undefined there), a call that
raises or returns something other than one number, a function that writes module globals.
No host work on training steps: the wrappers exist from the first evaluation on and record once.

The same recorded call serves two more probes.  A metric whose best is its largest value (accuracy,
IoU, Dice, F1, precision, recall, BLEU ...) is repeated with a prediction that shares no element with
the target (ids shifted past the target's range, the complement of 0/1 values) and must score well
below its best (``metric-rewards-disjoint-prediction``).  A function named after a well-known
definition (box IoU/GIoU, WER/CER, NDCG, CTC greedy decoding; also without prediction/target parameter
names) is recomputed by that definition (:mod:`overt.guards.metricdef`, ``metric-off-definition``).  Ranking
metrics are called again with their items listed in reverse and their candidates renamed
(:mod:`overt.guards.rankorder`), span extractions with each word's own tokens (:mod:`overt.guards.spantext`);
a ranking metric (or a BLEU) defined after the last evaluation forward is found through its module-level call
(:mod:`overt.guards.latecalls`).
"""

from __future__ import annotations

import contextlib
import copy
import functools
import inspect
import io
import math
import re
import sys
import time
import types
from typing import Any

import torch

from overt.guards import (answerextract, batchdecode, countcells, ignoredpreds, latecalls, libranking, metricdef,
                          rankorder, scoredefs, spantext)
from overt.guards.aside import user_code
from overt.guards.check import Check
from overt.guards.scriptspace import script_grown
from overt.guards.where import short_location, user_location

#: name words of metrics whose best value is their largest (1, or 100 in percent)
HIGHER = frozenset({"iou", "miou", "jaccard", "dice", "accuracy", "acc", "f1", "fscore", "f1score", "precision",
                    "recall", "auc", "auroc", "sensitivity", "specificity", "ssim", "r2", "pearson", "spearman",
                    "corr", "correlation", "hitrate", "mrr", "ndcg", "exact", "em", "bleu", "rouge"})
#: name words of metrics whose best value is 0
LOWER = frozenset({"mse", "mae", "rmse", "mape", "smape", "wer", "cer", "error", "err"})
#: words that make a name something else than a metric (a loss is not required to reach 0)
NOT_METRIC = frozenset({"loss", "criterion", "objective", "plot", "print", "log", "show", "save", "load", "update",
                        "reset", "train", "step", "backward", "map", "ap", "footrule"})
PRED = frozenset({"pred", "preds", "prediction", "predictions", "output", "outputs", "out", "y_pred", "ypred",
                  "y_hat", "yhat", "logits", "probs", "probabilities", "hyp", "hyps", "hypothesis", "hypotheses",
                  "pred_mask", "pred_masks", "seg", "segmentation", "estimate", "estimates", "pred_labels",
                  "predicted", "y_pred_labels"})
TARGET = frozenset({"target", "targets", "y", "y_true", "ytrue", "label", "labels", "gt", "gts", "ground_truth",
                    "groundtruth", "truth", "true", "mask", "masks", "gt_mask", "gt_masks", "true_mask", "true_masks",
                    "target_mask", "target_masks", "ref", "refs", "reference", "references", "actual", "true_labels",
                    "gt_labels"})
#: parameter names that may hold either side of a segmentation metric (a predicted or a true segmentation)
EITHER = frozenset({"seg", "segmentation", "mask", "masks"})
#: name words of metrics that need not be low on a prediction disjoint from the target (rank and
#: correlation measures, structural similarity)
NOT_OVERLAP = frozenset({"auc", "auroc", "ssim", "r2", "pearson", "spearman", "corr", "correlation", "mrr", "ndcg",
                         "specificity"})
RELATIVE = 1e-3  # how close to the best value a perfect prediction must score
LOSS_LOOKS = 8  # checked classification loss calls read for the label they ignore
SPAN_TRIES = 3  # calls of a function chosen by its arity alone looked at for a span extraction's form


@functools.lru_cache(maxsize=1024)  # a script's function names, looked at again at every evaluation pass
def _words(name: str) -> frozenset[str]:
    name = re.sub(r"m?IoU", lambda m: "_" + m.group(0).lower() + "_", name)  # the acronyms written in mixed case
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", name).lower()
    return frozenset(w for w in re.split(r"[_\W]+", spaced) if w)


def metric_kind(fn: Any) -> str | None:
    """"higher"/"lower" when ``fn``'s name is a metric's, else None."""
    words = _words(getattr(fn, "__name__", ""))
    if not words or words & NOT_METRIC:
        return None
    if words & HIGHER:
        return "higher"
    if words & LOWER:
        return "lower"
    return None


def _roles(fn: Any) -> tuple[str, str] | None:
    """(prediction parameter, target parameter) of ``fn``, each named unambiguously, else None."""
    try:
        params = [p.name for p in inspect.signature(fn).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    except (TypeError, ValueError):
        return None
    preds = [p for p in params if p.lower() in PRED]
    targets = [p for p in params if p.lower() in TARGET]
    if len(preds) == 1 and len(targets) == 1:
        return preds[0], targets[0]
    # a segmentation written ``seg`` (or ``mask``) beside a parameter named only as a prediction: the target
    strong = [p for p in preds if p.lower() not in EITHER]
    either = [p for p in params if p.lower() in EITHER and p not in strong]
    if len(strong) == 1 and len(either) == 1 and set(targets) <= set(either):
        return strong[0], either[0]
    return None


@functools.lru_cache(maxsize=256)  # looked at again at every evaluation pass; equal code, equal answer
def _writes_globals(code: types.CodeType) -> bool:
    import dis

    if any(i.opname in ("STORE_GLOBAL", "DELETE_GLOBAL") for i in dis.get_instructions(code)):
        return True
    return any(isinstance(c, types.CodeType) and _writes_globals(c) for c in code.co_consts)


_TORCH = torch.__file__.rsplit("/", 1)[0] + "/"


def _inner(fn: Any) -> Any:
    """The script's own function under a ``torch.no_grad()`` / ``torch.inference_mode()`` decorator."""
    while getattr(fn, "__wrapped__", None) is not None and isinstance(fn, types.FunctionType) \
            and fn.__code__.co_filename.startswith(_TORCH):
        fn = fn.__wrapped__
    return fn


def _defined(fn: Any) -> str | None:
    """The file a script function is defined in: its own, or under a torch gradient-mode decorator; None for
    any other wrapper (this module's own among them)."""
    inner = _inner(fn)
    if not isinstance(inner, types.FunctionType) or getattr(inner, "__wrapped__", None) is not None:
        return None
    return inner.__code__.co_filename


#: definitions whose functions may change their input in place, or whose inputs a script may reuse as buffers
#: before the end of the run (their first call's input is copied first)
_IN_PLACE = frozenset({"topk-filter", "topp-filter", "mask-iou", "mask-dice", "nms"})


def _copies(args: tuple, kwargs: dict) -> tuple[tuple, dict]:
    def copy_of(v: Any) -> Any:
        if isinstance(v, torch.Tensor):
            return v.detach().clone()
        if hasattr(v, "copy") and hasattr(v, "dtype") and hasattr(v, "shape"):  # a numpy array
            return v.copy()
        return v

    return tuple(copy_of(v) for v in args), {k: copy_of(v) for k, v in kwargs.items()}


Candidate = tuple[Any, "str | None", "str | None", "str | None", "str | None", "str | None"]


def candidates(namespace: dict, filename: str, forms: bool = False) -> dict[str, Candidate]:
    """The metric functions of a script's namespace: name -> (function, kind, prediction param, target param,
    the well-known metric it is named after).  A function is one when its name and parameters say which
    is the prediction and which the target (kind and roles), or when its name is a metric that
    :mod:`overt.guards.metricdef` can recompute (roles None then, unless named).  With ``forms``, also a
    function of a form that a metamorphic probe calls again: a ranking metric (:mod:`overt.guards.rankorder`)
    or, by its arity alone, a possible span extraction (:mod:`overt.guards.spantext`, recorded only once a
    call has that form)."""
    found = {}
    for name, fn in list(namespace.items()):
        if not isinstance(fn, types.FunctionType) or _defined(fn) != filename:
            continue
        kind = metric_kind(fn)
        roles = _roles(fn) if kind else None
        words = _words(fn.__name__)
        known = metricdef.definition_of(words) if not words & NOT_METRIC else scoredefs.definition_of(words)
        form = (rankorder.form_of(words) or countcells.form_of(_inner(fn)) or batchdecode.form_of(words)
                or spantext.form_of(fn, _params(fn))) \
            if forms else None
        if not (kind and roles or known or form) or _writes_globals(_inner(fn).__code__):  # the bytecode read last
            continue
        if kind and roles:
            found[name] = (fn, kind, *roles, known, form)
        else:
            found[name] = (fn, None, None, None, known, form)
    return found


#: definitions whose check needs only the call's own values and result: a function named after one and defined after
#: the last evaluation forward is repeated through its module-level call (a BLEU scored once the outputs are decoded)
LATE_DEFINITIONS = frozenset({"bleu"})


def ranked(namespace: dict, filename: str) -> dict[str, Candidate]:
    """The functions of ``candidates(namespace, filename, forms=True)`` whose form is ``"rank-order"`` (named after
    a ranking metric, :func:`overt.guards.rankorder.form_of`), the same set, without the work that decides the
    other kinds and forms (a signature read per function of the script for ``spantext``'s form), and the functions
    named after a definition of ``LATE_DEFINITIONS``: the late calls keep only these
    (:meth:`MetricProbeChecks._late_calls`)."""
    found = {}
    for name, fn in list(namespace.items()):
        if not isinstance(fn, types.FunctionType) or _defined(fn) != filename:
            continue
        words = _words(fn.__name__)
        form = rankorder.form_of(words)
        known = metricdef.definition_of(words) if not words & NOT_METRIC else None
        if form != "rank-order" and known not in LATE_DEFINITIONS:
            continue
        if _writes_globals(_inner(fn).__code__):
            continue
        found[name] = (fn, None, None, None, known if known in LATE_DEFINITIONS else None,
                       "rank-order" if form == "rank-order" else None)
    return found


def _params(fn: Any) -> list[str]:
    """The names of ``fn``'s parameters that a call can fill by position or keyword."""
    try:
        return [p.name for p in inspect.signature(fn).parameters.values()
                if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    except (TypeError, ValueError):
        return []


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, torch.Tensor) and value.numel() == 1:
        return float(value.detach().float().cpu().item())
    item = getattr(value, "item", None)  # numpy scalars and one-element arrays
    if callable(item) and getattr(value, "size", 1) == 1:
        try:
            out = item()
        except (ValueError, TypeError):
            return None
        return float(out) if isinstance(out, (int, float)) and not isinstance(out, bool) else None
    return None


def _shape(x: Any) -> tuple | None:
    if isinstance(x, torch.Tensor):
        return ("tensor", tuple(x.shape))
    shape = getattr(x, "shape", None)
    if shape is not None and hasattr(x, "dtype"):  # numpy
        return ("array", tuple(shape))
    if isinstance(x, (list, tuple)):
        return ("list", len(x))
    return None


def _varied(x: Any) -> bool:
    """The target holds more than one value (metrics such as precision or AUC are undefined otherwise)."""
    try:
        if isinstance(x, torch.Tensor):
            return x.numel() > 1 and bool((x.reshape(-1) != x.reshape(-1)[0]).any())
        if hasattr(x, "shape") and hasattr(x, "dtype"):
            flat = x.reshape(-1)
            return flat.size > 1 and bool((flat != flat[0]).any())
        return len({repr(v) for v in x}) > 1
    except Exception:  # noqa: BLE001  an object we do not know: no premise
        return False


def _same_form(pred: Any, target: Any) -> bool:
    """Prediction and target hold one value per element alike: the same kind and shape, or shapes that
    differ only by dimensions of size 1 (``(N, 1)`` predictions of ``(N,)`` targets)."""
    a, b = _shape(pred), _shape(target)
    if a is None or b is None or a[0] != b[0]:
        return False
    if a[0] == "list":
        return a == b
    return tuple(d for d in a[1] if d != 1) == tuple(d for d in b[1] if d != 1)


def _as_prediction(target: Any, pred: Any) -> Any:
    """A copy of ``target`` in the prediction's form (shape, dtype, device): a perfect prediction."""
    if isinstance(target, torch.Tensor) and isinstance(pred, torch.Tensor):
        return target.detach().clone().to(device=pred.device, dtype=pred.dtype).reshape(pred.shape)
    if hasattr(target, "astype") and hasattr(pred, "dtype"):
        return target.astype(pred.dtype, copy=True).reshape(pred.shape)
    return copy.deepcopy(target)


class _Call:
    __slots__ = ("fn", "kind", "pred", "target", "known", "form", "given", "bound", "result", "loc", "seconds")

    def __init__(self, fn: Any, roles: tuple[str | None, str | None, str | None, str | None, str | None],
                 given: tuple[str, ...], bound: inspect.BoundArguments, result: Any, loc: str | None):
        self.fn = fn
        self.kind, self.pred, self.target, self.known, self.form = roles
        self.given, self.bound, self.result, self.loc = given, bound, result, loc
        self.seconds = 0.0  # how long the recorded call took (a probe that calls it again many times reads it)


class MetricProbeChecks(Check):
    name = "metric_probe"

    def __init__(self, session: Any):
        super().__init__(session)
        self.wrapped: dict[str, tuple[Any, Any]] = {}  # name -> (original, wrapper) in __main__
        self.roles: dict[str, tuple] = {}  # name -> (kind, prediction, target, definition) its calls record
        self.calls: dict[str, _Call] = {}
        self.namespace: dict | None = None
        self.seen = -1  # the namespace's size when last looked at
        self.seen_training = -1  # ... and when last looked at on a checked training step
        self.tries: dict[str, int] = {}  # calls of a function chosen by its arity looked at for a span's form
        self.ignored: dict[int, int] = {}  # label a training index loss ignored -> its classes (0: conflicting)
        self.loss_looks = 0  # checked classification losses read for their ignore_index
        self.extractors = answerextract.AnswerExtractors()  # number extractors that may drop a minus sign
        # scikit-learn's and torchmetrics' binary ranking metrics, judged on their calls (libranking.py)
        self.library = libranking.LibraryRanking(self._library_verdict, lambda exc: self.s.check_failed(self, exc))

    def on_checked_loss(self, name: str, inp: Any, target: Any, args: tuple, kwargs: dict) -> None:
        """A checked training loss: the label a classification loss ignores, with its number of classes (read
        from the call, no device work), for :mod:`overt.guards.ignoredpreds`."""
        if self.loss_looks >= LOSS_LOOKS or name not in ignoredpreds.INDEX_LOSSES:
            return
        self.loss_looks += 1
        found = ignoredpreds.index_losses(inp, args, kwargs)
        if found is not None:
            label, classes = found
            self.ignored[label] = classes if self.ignored.get(label, classes) == classes else 0

    def eval_started(self) -> None:
        """A watched model was switched to eval mode: wrap the script's metric functions defined by now.
        Evaluation forwards the session shows this check look again when the script's namespace has grown
        (a function defined after ``model.eval()``)."""
        self.library.install()
        main = sys.modules.get("__main__")
        filename = getattr(main, "__file__", None)
        if main is None or not filename or (self.namespace is not None and main.__dict__ is not self.namespace):
            return
        self.namespace = main.__dict__
        self.seen = len(self.namespace)
        self._wrap(filename, training=False)
        try:
            self.extractors.wrap(self.namespace, filename, skip=set(self.wrapped))
        except Exception as exc:  # noqa: BLE001  a guard never breaks the user's run
            self.s.check_failed(self, exc)

    def _wrap(self, filename: str, training: bool) -> None:
        """Wrap the namespace's metric functions not wrapped yet.  During training only the definition
        (``metric-off-definition``) is recorded: a metric first called on a training batch (an attack, a
        reconstruction inside the loop) is still recomputed by its definition, while the probes that repeat
        a call with other predictions wait for an evaluation."""
        originals = {n: fn for n, (fn, wrapper) in self.wrapped.items() if self.namespace.get(n) is wrapper}
        for name, (fn, *roles) in candidates({**self.namespace, **originals}, filename, forms=not training).items():
            if training:
                roles = [None, None, None, roles[3], None]
                if roles[3] is None:
                    continue
            if name in self.wrapped:
                if not training:
                    self.roles[name] = tuple(roles)
                continue
            self.roles[name] = tuple(roles)
            wrapper = self._wrapper(name, fn)
            self.wrapped[name] = (fn, wrapper)
            self.namespace[name] = wrapper

    def on_checked_forward(self, info: Any, args: tuple, light: bool) -> None:
        """A checked training step: wrap the script's functions named after a metric definition defined by now
        (a namespace size compared; nothing else on the step)."""
        found = script_grown(self.namespace, self.seen_training)
        if found is None:
            return
        self.namespace, filename = found
        self.seen_training = len(self.namespace)
        self.library.install()  # a ranking metric scored between training steps, without eval() or no_grad
        self._wrap(filename, training=True)
        box_format = getattr(self.s, "box_format", None)  # box functions given another format (boxformat.py)
        if box_format is not None:
            box_format.wrap_new(self.namespace, filename)

    @property
    def wants_no_grad(self) -> bool:
        """Whether a ``no_grad`` block the script enters should look for its metric functions: until the
        script's namespace was seen (a dict size compared after that)."""
        return True

    def no_grad_entered(self) -> None:
        """The script entered a ``no_grad``/``inference_mode`` block: an evaluation, with or without
        ``model.eval()`` (a model without dropout or batch norm is often evaluated in training mode)."""
        self._grown()

    def on_eval_forward(self, info: Any, args: tuple) -> None:
        self._grown()

    def on_no_grad_forward(self, info: Any) -> None:
        self._grown()

    def _grown(self) -> None:
        main = sys.modules.get("__main__")
        if main is not None and len(main.__dict__) != self.seen:
            self.eval_started()

    def _wrapper(self, name: str, fn: Any) -> Any:
        signature = inspect.signature(fn)

        @functools.wraps(fn)
        def metric(*args: Any, **kwargs: Any) -> Any:
            recorded = self.calls.get(name)
            seen = (args, kwargs)
            if recorded is None and self.roles[name][3] in _IN_PLACE:
                seen = _copies(args, kwargs)  # a filter may work in place: its input as it was given
            started = time.perf_counter()
            result = fn(*args, **kwargs)
            if recorded is None or (recorded.kind is None and self.roles[name][0] is not None):
                # the first call, or the first of an evaluation after one recorded during training
                roles = self.roles[name]
                only_form = roles[0] is None and roles[3] is None and roles[4] in ("span", "counts", "decode")
                if only_form and self.tries.get(name, 0) >= SPAN_TRIES:
                    return result
                try:
                    bound = signature.bind(*seen[0], **seen[1])
                    given = tuple(bound.arguments)
                    if only_form:  # a function chosen by its arity or code alone: recorded once a call has the form
                        self.tries[name] = self.tries.get(name, 0) + 1
                        if roles[4] == "span" and spantext.fits(dict(bound.arguments), result) is None:
                            return result
                        if roles[4] == "counts" and not countcells.fits(dict(bound.arguments), *(_roles(fn) or
                                                                          (None, None)), result):
                            return result
                        if roles[4] == "decode" and not batchdecode.fits(dict(bound.arguments), result):
                            return result
                    bound.apply_defaults()
                    self.calls[name] = _Call(fn, self.roles[name], given, bound, result, user_location(2))
                    self.calls[name].seconds = time.perf_counter() - started
                except Exception as exc:  # noqa: BLE001  a guard never breaks the user's call
                    self.s.check_failed(self, exc)
            return result

        return metric

    def end_of_run(self) -> None:
        self._late_calls()
        self.extractors.remove()
        for _name, where, message, fix in self.extractors.findings():
            self.s.report("metric-imperfect-on-truth", message, fix=fix, where=where, key=f"extract:{where}")
        for name, call in self.calls.items():
            code = _inner(call.fn).__code__
            defined = short_location(code.co_filename, code.co_firstlineno)
            at = f"the call at {call.loc}" if call.loc else "its first call"
            if call.kind is not None:
                self._properties(name, call, defined, at)
                if self.ignored:
                    self._ignored(name, call, defined, at)
            if call.known is not None:
                self._definition(name, call, defined, at)
            if call.form is not None:
                self._form(name, call, defined, at)
        self.calls = {}

    def _late_calls(self) -> None:
        """Ranking metrics the script defined and called after its last evaluation forward (never wrapped):
        their module-level calls, read from the script, repeated on the names' final values."""
        if self.namespace is None:
            return
        filename = self.namespace.get("__file__")
        if not filename:
            return
        late = {n: c for n, c in ranked(self.namespace, filename).items()
                if n not in self.calls and n not in self.wrapped}
        if not late:
            return
        for name, fn, args, kwargs, line in latecalls.module_calls(filename, late, self.namespace):
            try:
                result = metricdef._quiet(fn, *args, **kwargs)
                bound = inspect.signature(fn).bind(*args, **kwargs)
            except Exception:  # noqa: BLE001  the user's function on the names' final values: no premise
                continue
            given = tuple(bound.arguments)
            bound.apply_defaults()
            self.calls[name] = _Call(fn, (None, None, None, late[name][4], late[name][5]), given, bound, result,
                                     short_location(filename, line))

    def _form(self, name: str, call: _Call, defined: str, at: str) -> None:
        """The metamorphic probes of a function's form (:mod:`overt.guards.rankorder`, :mod:`overt.guards.spantext`)."""
        arguments = call.bound.arguments
        given = {p: arguments[p] for p in call.given}
        if call.form == "counts":
            self._counts(name, call, defined, at)
            return
        if call.form == "decode":
            self._decode(name, call, defined, at)
            return
        if call.form == "span":
            found = spantext.check(call.fn, name, given, dict(arguments), call.result)
            if found is not None:
                self.s.report(
                    "metric-imperfect-on-truth",
                    f"the function {name}() defined at {defined} does not give a perfect prediction its answer "
                    f"({at}): {found[0]} Every exact match it reports is lower than the model's, while nothing "
                    "fails.", fix=found[1], where=f"{name}() at {defined}", key=f"span:{defined}")
            return
        words = _words(getattr(call.fn, "__name__", name))
        listed = rankorder.listing_probe(call.fn, name, words, given, dict(arguments), call.result)
        if listed is not None:
            what, first, moved = listed
            self.s.report(
                "ranking-metric-on-labels",
                f"the ranking metric {name}() defined at {defined} depends on the order its items are listed in "
                f"({at}): with {what}, every field of every item kept, it gives {moved} instead of {first}. "
                "A ranking metric orders the items by their scores; one whose value follows the listing order "
                "ranks them by a key on which they tie (a label field read as the score, a hard 0/1 prediction, a "
                "constant), so the ranking it scores is the file order, not the model's, while nothing fails.",
                fix=f"rank by the items' scores in {name}() (check which field of an item holds its score, not "
                    "its label or a thresholded prediction), and check it by listing the items in another order: "
                    "the value must not move.",
                where=f"{name}() at {defined}", key=f"listing:{defined}")
            return
        renamed = rankorder.relabel_probe(call.fn, name, words, given, dict(arguments), call.result)
        if renamed is not None:
            scores, ids, first, moved = renamed
            self.s.report(
                "metric-off-definition",
                f"the ranking metric {name}() defined at {defined} depends on which ids its candidates carry, "
                f"not only on their scores ({at}): with the columns of {scores!r} reversed and {ids!r} renamed "
                f"alike, every row's ranking unchanged, it gives {moved} instead of {first}. A ranking metric "
                "ranks each row's candidates by score; one whose value moves when they are renamed ranks them by "
                "their index somewhere (a top-k taken as a set and scored in index order, a tie broken by "
                "column), so the rank it scores is not the model's, while nothing fails.",
                fix=f"sort each row's selected candidates by score before scoring their ranks in {name}() "
                    "(torch.topk / np.argsort(-scores) return them in score order; np.argpartition and a "
                    "threshold do not), and check it by renaming the candidates: the value must not move.",
                where=f"{name}() at {defined}", key=f"relabel:{defined}")

    def _decode(self, name: str, call: _Call, defined: str, at: str) -> None:
        """A batched decoding called again on rows of its batch alone (:mod:`overt.guards.batchdecode`)."""
        params = call.bound.signature.parameters.values()
        if any(p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD, p.POSITIONAL_ONLY) for p in params):
            return
        models = [info.module for info in self.s.models.values()]
        try:
            found = batchdecode.check(call.fn, name, dict(call.bound.arguments), call.result, call.seconds, models)
        except Exception:  # noqa: BLE001  values the probe does not know: no premise
            return
        if found is None:
            return
        message, fix = found
        self.s.report(
            "metric-off-definition",
            f"the decoding function {name}() defined at {defined} returns tokens past each sequence's end ({at}): "
            f"{message} Every number computed from its rows is another quantity than the model's decoding, while "
            "nothing fails.", fix=fix, where=f"{name}() at {defined}", key=f"decode:{defined}")

    def _counts(self, name: str, call: _Call, defined: str, at: str) -> None:
        """Confusion cells recounted on a prediction (or a target) of the function's own negative label
        (:mod:`overt.guards.countcells`)."""
        roles = _roles(call.fn)
        if roles is None:
            return
        try:
            found = countcells.check(call.fn, name, dict(call.bound.arguments), *roles)
        except Exception:  # noqa: BLE001  values the probe does not know: no premise
            return
        if found is None:
            return
        message, fix = found
        self.s.report(
            "metric-off-definition",
            f"the function {name}() defined at {defined} counts confusion cells that are not theirs ({at}): "
            f"{message} Every number reported through it is another quantity under the metric's name, while "
            "nothing fails.", fix=fix, where=f"{name}() at {defined}", key=f"counts:{defined}")

    def _properties(self, name: str, call: _Call, defined: str, at: str) -> None:
        found = self._probe(call)
        real = _number(call.result)
        shown = f" (it returned {real:.4g} there)" if real is not None else ""
        if found is None:
            wrong = self._disjoint_probe(name, call)
            if wrong is None:
                return
            self.s.report(
                "metric-rewards-disjoint-prediction",
                f"the metric function {name}() defined at {defined} scores a prediction that shares nothing with "
                f"its target {wrong[0]:.4g} (a perfect one: {wrong[1]:.4g}): {at}{shown} repeated with {wrong[2]} "
                f"as {call.pred!r} still scores well. A metric that rewards a wholly wrong prediction cannot tell "
                "models apart: its matching step (equality by a similarity that every pair passes, a threshold or a "
                "smoothing term that dominates, a comparison that broadcasts) counts hits that are not there, "
                "while nothing fails.",
                fix=f"fix {name}() so that a prediction disjoint from its target scores 0: trace it on one small "
                    "example with no element in common (compare items by equality, not by a similarity), or use a "
                    "maintained implementation (torchmetrics, scikit-learn, sacrebleu).",
                where=f"{name}() at {defined}", key=f"disjoint:{defined}")
            return
        perfect, best = found
        self.s.report(
            "metric-imperfect-on-truth",
            f"the metric function {name}() defined at {defined} scores a perfect prediction {perfect:.4g}, not "
            f"{best}: {at}{shown} repeated with the target itself as {call.pred!r} does not get the best value. "
            "A metric that misjudges the truth misjudges every model: something in it (a class absent from "
            "both sides scored as a miss, a count divided by the wrong total, a smoothing term, a decoding "
            "step, an average over the wrong axis) biases every number it reports, while nothing fails.",
            fix=f"fix {name}() so that {name}(target, target) is {best}: trace it on one small example whose "
                "prediction equals its target (a class missing from both sides is usually left out of the "
                "average, not scored 0), or use a maintained implementation (torchmetrics, scikit-learn).",
            where=f"{name}() at {defined}", key=f"metric:{defined}")

    def _ignored(self, name: str, call: _Call, defined: str, at: str) -> None:
        """The call repeated with its predictions changed where the target is a label training ignored
        (:mod:`overt.guards.ignoredpreds`)."""
        try:
            found = ignoredpreds.check(call.fn, name, call.bound.signature, str(call.pred), str(call.target),
                                       dict(call.bound.arguments), self.ignored)
        except Exception:  # noqa: BLE001  values the probe does not know: no premise
            return
        if found is None:
            return
        message, fix = found
        self.s.report(
            "metric-off-definition",
            f"the metric function {name}() defined at {defined} scores positions that carry no label ({at}): "
            f"{message} Every number reported through it is another quantity under the metric's name, while "
            "nothing fails.", fix=fix, where=f"{name}() at {defined}", key=f"ignored:{defined}")

    def _definition(self, name: str, call: _Call, defined: str, at: str) -> None:
        arguments = call.bound.arguments
        try:
            found = metricdef.check(call.fn, str(call.known), name, {p: arguments[p] for p in call.given},
                                    dict(arguments), call.result)
        except Exception:  # noqa: BLE001  inputs the references do not know: no premise
            return
        if found is None:
            return
        message, fix = found
        self.s.report(
            "metric-off-definition",
            f"the function {name}() defined at {defined} does not compute what it is named for ({at}): "
            f"{message} Every number reported through it is another quantity under the metric's name, while "
            "nothing fails.",
            fix=fix, where=f"{name}() at {defined}", key=f"definition:{defined}")

    def _score_with(self, call: _Call, prediction: Any) -> float | None:
        """The call repeated with ``prediction`` (and a copy of its target), quietly, without gradients."""
        args = call.bound.arguments
        target = args[call.target]
        changed = dict(args)
        changed[call.pred] = prediction
        changed[call.target] = copy.deepcopy(target) if not isinstance(target, torch.Tensor) \
            else target.detach().clone()
        bound = inspect.BoundArguments(call.bound.signature, changed)  # type: ignore[arg-type]
        sink = io.StringIO()
        try:
            with torch.no_grad(), contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink), user_code():
                value = _number(call.fn(*bound.args, **bound.kwargs))
        except Exception:  # noqa: BLE001  the user's function on other values: no premise
            return None
        return None if value is None or math.isnan(value) else value

    def _premise(self, call: _Call) -> tuple[Any, Any] | None:
        """(prediction, target) of the call when the target can stand for a prediction, else None."""
        args = call.bound.arguments
        pred, target = args.get(call.pred), args.get(call.target)
        if pred is None or target is None or _shape(pred) is None or not _same_form(pred, target):
            return None
        if isinstance(pred, torch.Tensor) and (pred.is_floating_point() != target.is_floating_point()) \
                and pred.is_floating_point() and not _binary(target):
            return None  # float scores against integer labels that are not 0/1: not a prediction of its kind
        if not _varied(target):
            return None
        return pred, target

    def _probe(self, call: _Call) -> tuple[float, str] | None:
        """(the score of a perfect prediction, the best value) when they differ, else None."""
        both = self._premise(call)
        if both is None:
            return None
        value = self._score_with(call, _as_prediction(both[1], both[0]))
        if value is None:
            return None
        if call.kind == "higher" and _kind(both[0]) == "float" and _kind(both[1]) in ("int", "bool"):
            # float scores of 0/1 labels: probabilities (threshold 0.5) or logits (threshold 0, where a
            # score of exactly 0 is on the boundary); -1/+1 is a perfect prediction under either reading
            signed = self._score_with(call, _as_prediction(both[1], both[0]) * 2 - 1)
            if signed is not None and any(abs(signed - top) <= RELATIVE * top for top in (1.0, 100.0)):
                return None
        if call.kind == "lower":
            real = _number(call.result)
            scale = max(1.0, abs(real)) if real is not None and math.isfinite(real) else 1.0
            return None if abs(value) <= 1e-6 * scale else (value, "0")
        if math.isinf(value) and value > 0:
            return None  # PSNR-like: a perfect prediction is infinitely good
        if any(abs(value - top) <= RELATIVE * top for top in (1.0, 100.0)):
            return None
        return value, "1 (or 100)"

    def _disjoint_probe(self, name: str, call: _Call) -> tuple[float, float, str] | None:
        """(the score of a prediction disjoint from the target, the perfect score, what it was) when a
        metric whose best is its largest value gives the disjoint prediction at least half its best."""
        if call.kind != "higher" or _words(name) & NOT_OVERLAP:
            return None
        both = self._premise(call)
        if both is None:
            return None
        made = _disjoint(both[1], both[0])
        if made is None:
            return None
        perfect = self._score_with(call, _as_prediction(both[1], both[0]))
        value = self._score_with(call, made[0])
        if perfect is None or value is None or not math.isfinite(perfect) or perfect <= 0:
            return None
        return (value, perfect, made[1]) if value >= 0.5 * perfect else None

    def _library_verdict(self, name: str, v: libranking.Verdict) -> None:
        """A library ranking metric's call whose scores break a property of every correct use (libranking.py)."""
        loc = user_location(2)
        where = f"the {name}() call at {loc}" if loc else f"a {name}() call"
        counts = f"{v.positives} positive and {v.negatives} negative samples"
        if v.slug == "ranking-metric-on-labels":
            self.s.report(
                v.slug,
                f"{name}() was given scores outside [0, 1] ({v.distinct} distinct values over {counts}); "
                "torchmetrics takes such inputs for logits and applies a sigmoid, which saturates at this "
                f"magnitude: the metric ranks only {v.seen_distinct} distinct value"
                f"{'' if v.seen_distinct == 1 else 's'}, so most samples tie and the metric reports the ties, "
                f"not the ranking (AUROC {v.auc:.3f} as the metric sees the scores, "
                f"{v.raw_auc:.3f} on the scores as computed). The number reported does not measure the score.",
                where, key=f"squash:{loc}",
                fix="give the metric scores it ranks as they are: scores in [0, 1] (a mean instead of a sum over "
                    "classes, a monotone map such as a rank or min-max scaling fitted on held-in data), or "
                    "compute the AUROC with a function that does not transform its input (sklearn.metrics."
                    "roc_auc_score).")
        else:
            self.s.report(
                v.slug,
                f"{name}() ranks the samples backwards: AUROC {v.auc:.3f} over {counts}, far below the 0.5 of a "
                "score that knows nothing. A score that separates the classes this well the wrong way round is "
                "oriented against label 1 (the metric's positive class): it was negated once too often (a score "
                "that already means 'higher = positive' given a minus sign), or it is the other class's "
                f"probability or column. The metric reports {v.auc:.3f} for a score worth {1 - v.auc:.3f}.",
                where, key=f"backwards:{loc}",
                fix="pass a score that is higher for label 1: follow the score from where it is computed to this "
                    "call and drop the extra negation (or take the positive class's column), or swap which "
                    "samples are labelled 1; check once that a trained model's AUROC is above 0.5.")

    def remove_hooks(self) -> None:
        self.extractors.remove()
        self.library.remove()
        if self.namespace is not None:
            for name, (fn, wrapper) in self.wrapped.items():
                if self.namespace.get(name) is wrapper:
                    self.namespace[name] = fn
        self.wrapped = {}


def _disjoint(target: Any, pred: Any) -> tuple[Any, str] | None:
    """A prediction in ``pred``'s form that shares no element with ``target``, and what it is: integer ids
    shifted past the target's range (none equals any target id), the complement of 0/1 values; None for
    anything else (scores, regression values, text), and when prediction and target are of different
    kinds (float scores of integer labels: shifted ids or a complement would be read as scores)."""
    if _kind(target) is None or _kind(target) != _kind(pred):
        return None
    if isinstance(target, torch.Tensor) and isinstance(pred, torch.Tensor):
        t = target.detach()
        if t.dtype == torch.bool:
            made, what = ~t, "the target's complement"
        elif not t.is_floating_point() and not t.is_complex():
            made, what = t + (int(t.max()) - int(t.min()) + 1), "the target's ids shifted past their range"
        elif _binary(t):
            made, what = 1 - t, "the target's complement (1 - target)"
        else:
            return None
        return made.to(device=pred.device, dtype=pred.dtype).reshape(pred.shape), what
    if hasattr(target, "dtype") and hasattr(target, "astype") and hasattr(pred, "dtype"):
        kind = getattr(target.dtype, "kind", "")
        if kind == "b":
            made, what = ~target, "the target's complement"
        elif kind in "iu":
            span = int(target.max()) - int(target.min()) + 1
            made, what = target + span, "the target's ids shifted past their range"
        elif kind == "f" and _binary(target):
            made, what = 1 - target, "the target's complement (1 - target)"
        else:
            return None
        return made.astype(pred.dtype).reshape(pred.shape), what
    if isinstance(target, list) and target and all(type(v) is int for v in target):
        span = max(target) - min(target) + 1
        return [v + span for v in target], "the target's ids shifted past their range"
    return None


def _kind(x: Any) -> str | None:
    """"bool", "int" or "float" for a tensor, array or list of numbers, else None."""
    if isinstance(x, torch.Tensor):
        return "bool" if x.dtype == torch.bool else "float" if x.is_floating_point() else \
            None if x.is_complex() else "int"
    kind = getattr(getattr(x, "dtype", None), "kind", None)
    if kind is not None:
        return {"b": "bool", "i": "int", "u": "int", "f": "float"}.get(kind)
    if isinstance(x, list) and x and all(type(v) is int for v in x):
        return "int"
    return None


def _binary(x: Any) -> bool:
    try:
        return bool(((x == 0) | (x == 1)).all())
    except Exception:  # noqa: BLE001
        return False
