"""Guard on predictions compared with labels of another shape (slug ``prediction-shape-mismatch``).

A prediction compared with its labels has the labels' shape.  Two ways to lose it leave no error:
``argmax()`` with no ``dim`` over a batch of outputs is one index into the flattened batch (compared with
the batch's labels, every sample is scored against the same number), and a ``(B,)`` prediction compared
with ``(B, 1)`` labels (or the reverse) broadcasts to a ``B x B`` table of every prediction against every
label, whose mean is no accuracy.

From a watched model's ``eval()`` (and for its first :data:`OUT_LOOKS` evaluation forwards) the outputs of
its evaluation forwards are remembered by identity; ``argmax``/``argmin``/``max``/``topk`` (torch's functions and the
tensor methods) called on such an output (or on a tensor of its very shape: ``softmax(out, 1)``) remember
their result as a prediction, and ``==``/``!=``/``eq``/``ne`` with a remembered prediction on one side is
judged: a flat index against more than one label, or two tensors that both start with the forward's batch
and broadcast to more elements than either.  Host metadata only (shapes, identities): no device read.
Unchecked training steps run unwrapped.

The same window sees the units predictions are scored in (slug ``predictions-not-denormalised``,
judged by :mod:`overt.guards.units`): the regression losses (``mse_loss``, ``l1_loss``, ``smooth_l1_loss``,
``huber_loss``) of checked training steps give the training targets' mean and spread and how well the model
fitted them (a deferred read of three numbers); in evaluation, the two sides of an error -- a remembered output
(or a view of it: ``out.squeeze(1)``; or the outputs of a loop gathered by ``torch.cat``) subtracted from a
tensor of as many values, or the input and target of
a regression loss called while the evaluation lasts (functional or ``nn.MSELoss``-style), or ``(y_true,
y_pred)`` of a scikit-learn regression error (:mod:`overt.guards.skerrors`) -- are judged, once
or twice per run with one read of four numbers: predictions in the training targets' units scored against
values far outside them, or, for a model that fitted its training targets, two sides whose values do not
overlap or whose spreads differ many times over, mean a normalisation of the targets is missing on one side,
applied twice or undone with other statistics.
"""

from __future__ import annotations

import functools
import math
import sys
import weakref
from typing import TYPE_CHECKING, Any

import torch

from overt.guards.check import Check
from overt.guards.labelmap import reindexed
from overt.guards import patches, units
from overt.guards.skerrors import SklearnErrors
from overt.guards.oneshot import OneShotHook
from overt.guards.swapped import EvalOutputLooks, Swapped, batched_outputs, compiling
from overt.guards.watched import storage_ptr
from overt.guards.where import from_torch, user_location

if TYPE_CHECKING:
    from overt.guards.watched import ModelInfo

OUT_LOOKS = 8  # evaluation forwards per model whose outputs are remembered
#: no_grad forwards per model in training mode (a model the mode does not change) after which the window for choices
#: (flatpick) stops opening: an evaluation that never calls eval() (session 56)
CHOICE_WINDOWS = 4
_PRODUCERS = ((torch, "argmax"), (torch, "argmin"), (torch, "max"), (torch, "topk"),
              (torch.Tensor, "argmax"), (torch.Tensor, "argmin"), (torch.Tensor, "max"), (torch.Tensor, "topk"))
_COMPARISONS = ((torch.Tensor, "__eq__"), (torch.Tensor, "__ne__"), (torch.Tensor, "eq"), (torch.Tensor, "ne"),
                (torch, "eq"), (torch, "ne"))
#: (the functional losses are not wrapped here: overt/guards/patches.py swaps them in and out on its own)
_DIFFERENCES = ((torch.Tensor, "__sub__"), (torch.Tensor, "__rsub__"), (torch, "sub"))
#: the evaluation outputs of a loop gathered into one tensor: remembered as an output too
_GATHERS = ((torch, "cat"), (torch, "concat"), (torch, "vstack"))
_REGRESSION = frozenset({"mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss"})
_ONE_HOT_LOSSES = frozenset({"binary_cross_entropy_with_logits", "binary_cross_entropy"})
MAP_PAIRS = 4096  # evaluation (prediction, label) pairs kept per model for eval-classes-renumbered
UNITS_LOOKS = 2  # evaluation errors judged per run (one read of four numbers each, four per column)
MAX_COLUMNS = 16  # regression targets of at most this many columns are also judged column by column


class PredictionShapeChecks(EvalOutputLooks, Check):
    name = "pred_shape"
    OUT_LOOKS = OUT_LOOKS

    def __init__(self, session: Any):
        super().__init__(session)
        self.out_looks: dict[int, int] = {}  # id(ModelInfo) -> evaluation forwards whose outputs were remembered
        self.choice_windows: dict[int, int] = {}  # id(ModelInfo) -> training-mode no_grad windows opened for choices
        self.outputs: list[tuple[Any, int | None, tuple[int, ...], ModelInfo]] = []  # (ref, storage, shape, model)
        # predictions made from them: (ref, storage, flat, batch, the output's shape, model, what made it)
        self.preds: list[tuple[Any, int | None, bool, int, tuple[int, ...], ModelInfo, str]] = []
        self.out_hook = OneShotHook()
        self.targets = units.TrainingFit()  # the checked regression losses' targets and how well they were fitted
        self.units_looks = 0
        self.sk_errors = SklearnErrors(self._sk_error)  # scikit-learn's regression errors, while evaluating
        # class-index training seen: the number of classes of checked cross_entropy/nll_loss calls
        self.index_classes: set[int] = set()
        self.one_hot_looks = 0  # checked per-class binary losses whose targets were read for one-hot-ness
        # (prediction, label) pairs of evaluation comparisons, per model: judged at the end (labelmap.py)
        self.pairs: dict[int, tuple[ModelInfo, str, list[tuple[torch.Tensor, torch.Tensor]]]] = {}

    # -- the units of the training targets ---------------------------------------------------------
    def on_checked_loss(self, name: str, inp: Any, target: Any, args: tuple, kwargs: dict) -> None:
        if name in ("cross_entropy", "nll_loss") and isinstance(target, torch.Tensor) and inp.dim() >= 1 \
                and not target.is_floating_point() and target.dtype != torch.bool and len(self.index_classes) < 4:
            self.index_classes.add(int(inp.shape[1] if inp.dim() >= 2 else inp.shape[0]))
        elif name in _ONE_HOT_LOSSES and isinstance(target, torch.Tensor) and isinstance(inp, torch.Tensor) \
                and target.is_floating_point() and target.shape == inp.shape and inp.dim() >= 2 \
                and 2 <= inp.shape[1] <= 256 and len(self.index_classes) < 4 and self.one_hot_looks < 3:
            self.one_hot_looks += 1  # the first three checked calls decide (a multi-label run stops asking)
            # per-class binary targets that are one-hot over dim 1 (at most one 1 per sample or pixel): class
            # k's indicator in channel k, so the argmax over the channels predicts class indices too
            t = target.detach()
            binary = ((t == 0) | (t == 1)).all() & (t.sum(1) <= 1).all() & (t.sum(1) == 1).any()
            self.s.defer(binary.float().reshape(1), self._one_hot(int(inp.shape[1])))
        if name not in _REGRESSION or self.targets.full() or not isinstance(target, torch.Tensor):
            return
        if not target.is_floating_point() or target.numel() < 8 or target.numel() != inp.numel():
            return
        t, p = target.detach().float(), inp.detach().float().reshape(target.shape)
        whole = torch.stack([t.mean(), t.std(), (p - t).square().mean()])
        if t.dim() == 2 and 2 <= t.shape[1] <= MAX_COLUMNS and t.shape[0] >= 8:  # per column, in the same read
            cols = torch.stack([t.mean(0), t.std(0), (p - t).square().mean(0)], 1).reshape(-1)
            whole = torch.cat([whole, cols])
        self.s.defer(whole, self.targets.add)

    def _one_hot(self, classes: int):
        def callback(values: list[float]) -> None:
            if values[0] and len(self.index_classes) < 4:
                self.index_classes.add(classes)

        return callback

    # -- remembering evaluation outputs (EvalOutputLooks) -----------------------------------------
    def on_train_forward(self, info: ModelInfo, args: tuple) -> None:
        if self in _WRAPPERS.listening:  # training resumed: the evaluation is over
            self._unwrap()
        self._close_choices()

    def _close_choices(self) -> None:
        pick = getattr(self.s, "flatpick", None)
        if pick is not None:
            pick.close_window()

    def on_no_grad_forward(self, info: ModelInfo) -> None:
        """A ``no_grad`` forward: an evaluation in eval mode (:class:`EvalOutputLooks`), or, for a model without
        Dropout/BatchNorm left in training mode after training started (the mode changes nothing it computes), an
        evaluation that never called ``eval()``.  The latter opens the wrappers for the choices an evaluation makes
        (flatpick's argmax/argmin over a curve) until training resumes, without remembering its outputs: the
        checks of predictions stay with evaluations in eval mode; only ``argmax``/``argmin`` are wrapped there, by
        flatpick's own set, so that the arithmetic of a target computed under ``no_grad`` runs unwrapped (session 56)."""
        super().on_no_grad_forward(info)
        pick = getattr(self.s, "flatpick", None)
        if not info.module.training or info.dropbn or self.s.step < 1 or self in _WRAPPERS.listening \
                or pick is None or pick.window_open():
            return
        n = self.choice_windows.get(id(info), 0)
        if n >= CHOICE_WINDOWS:
            return
        self.choice_windows[id(info)] = n + 1
        pick.open_window()

    def _remember(self, info: ModelInfo):
        def hook(module: Any, args: tuple, output: Any) -> None:
            if not self.out_hook.fired():
                return
            try:
                for t in batched_outputs(args, output):
                    self.outputs = self.outputs[-3:] + [(weakref.ref(t), storage_ptr(t), tuple(t.shape), info)]
                    self._wrap()
            except Exception as exc:  # a guard never breaks the user's forward
                self.s.check_failed(self, exc)

        return hook

    def _output(self, x: torch.Tensor) -> tuple[tuple[int, ...], ModelInfo] | None:
        """(shape, model) of the remembered output ``x`` is (itself, a view of it, or, for the latest one, a
        floating tensor of its very shape: ``softmax(out, 1)``), else None."""
        storage, latest = storage_ptr(x), len(self.outputs) - 1
        for i, (ref, out_storage, shape, info) in enumerate(self.outputs):
            t = ref()
            if (t is not None and (t is x or (storage and storage == out_storage and tuple(x.shape) == shape))) \
                    or (i == latest and tuple(x.shape) == shape and x.is_floating_point()):
                return shape, info
        return None

    def _output_view(self, x: Any) -> tuple[tuple[int, ...], ModelInfo] | None:
        """(shape, model) of the remembered output ``x`` shares its memory with, values for values."""
        if not isinstance(x, torch.Tensor):
            return None
        storage = storage_ptr(x)
        for ref, out_storage, shape, info in reversed(self.outputs):
            t = ref()
            if t is not None and (t is x or (storage and storage == out_storage and x.numel() == math.prod(shape))):
                return shape, info
        return None

    def subtracted(self, a: Any, b: Any) -> None:
        if not self.targets or self.units_looks >= UNITS_LOOKS:
            return
        for pred, other in ((a, b), (b, a)):
            if not (isinstance(pred, torch.Tensor) and isinstance(other, torch.Tensor)):
                return
            found = self._output_view(pred)
            if found is None or self._output_view(other) is not None:
                continue
            self._units(pred, other, found[1].name, "the error")
            return

    def eval_loss(self, name: str, args: tuple, kwargs: dict) -> None:
        """A loss called while an evaluation lasts (patches.eval_losses): a regression loss's input and target."""
        if name not in _REGRESSION or not self.targets or self.units_looks >= UNITS_LOOKS or not self.outputs:
            return
        inp = args[0] if args else kwargs.get("input")
        target = args[1] if len(args) > 1 else kwargs.get("target")
        if isinstance(inp, torch.Tensor) and isinstance(target, torch.Tensor):
            found = self._output_view(inp)
            self._units(inp, target, found[1].name if found else self.outputs[-1][3].name, f"the {name}")

    def _units(self, pred: torch.Tensor, other: torch.Tensor, model: str, what: str) -> None:
        """Judge an evaluation error's two sides (one read of four numbers)."""
        if other.numel() != pred.numel() or other.numel() < 8 \
                or not (pred.is_floating_point() and other.is_floating_point()):
            return
        self.units_looks += 1
        p, o = pred.detach().float(), other.detach().float()
        values = torch.stack([p.mean(), p.std(), o.mean(), o.std()])
        columns = p.dim() == 2 and p.shape == o.shape and len(self.targets.columns) == p.shape[1] >= 2 \
            and p.shape[0] >= 8
        if columns:
            values = torch.cat([values, torch.stack([p.mean(0), p.std(0), o.mean(0), o.std(0)], 1).reshape(-1)])
        read = values.tolist()
        if self._judged(units.Side(*read[0:2]), units.Side(*read[2:4]), model, what) or not columns:
            return
        pairs = [(units.Side(*read[i:i + 2]), units.Side(*read[i + 2:i + 4])) for i in range(4, len(read), 4)]
        column = units.judge_columns(pairs, self.targets)
        if column is not None:
            self._report(units.explain_column(column, model, *pairs[column], self.targets), model, what)

    def _sk_error(self, name: str, y_true: Any, y_pred: Any) -> None:
        """A scikit-learn regression error called while an evaluation lasts (skerrors.py): judged on the host."""
        try:
            if not self.targets or self.units_looks >= UNITS_LOOKS or not self.outputs:
                return
            if isinstance(y_true, torch.Tensor) and isinstance(y_pred, torch.Tensor):
                self._units(y_pred, y_true, self.outputs[-1][3].name, f"{name}()")
                return
            import numpy as np

            t = np.asarray(y_true.detach().cpu() if isinstance(y_true, torch.Tensor) else y_true, dtype=np.float64)
            p = np.asarray(y_pred.detach().cpu() if isinstance(y_pred, torch.Tensor) else y_pred, dtype=np.float64)
            if t.size != p.size or t.size < 8:
                return
            self.units_looks += 1
            self._judged(units.Side(float(p.mean()), float(p.std(ddof=1))),
                         units.Side(float(t.mean()), float(t.std(ddof=1))), self.outputs[-1][3].name, f"{name}()")
        except Exception as exc:  # noqa: BLE001  never break the user's metric over a check
            self.s.check_failed(self, exc)

    def _judged(self, pred: units.Side, other: units.Side, model: str, what: str) -> bool:
        kind = units.judge(pred, other, self.targets)
        if kind is not None:
            self._report(units.explain(kind, model, pred, other, self.targets), model, what)
        return kind is not None

    def _report(self, message: str, model: str, what: str) -> None:
        loc = user_location(4) or ""
        self.s.report(
            "predictions-not-denormalised", message,
            fix="score predictions and targets in one set of units: undo the training targets' normalisation "
                "once, on the predictions, with the statistics it was fitted with (pred * std + mean, "
                "the scaler's inverse_transform, expm1 after log1p), or score against targets normalised the "
                "same way.",
            where=f"{what} at {loc}" if loc else f"{model}'s outputs", key=f"units:{loc}")

    def gathered(self, parts: Any, out: Any) -> None:
        """``torch.cat`` of evaluation outputs (the predictions of a loop, gathered): the result is remembered
        as an output of the model whose remembered output is among the parts (all parts floating tensors)."""
        if not isinstance(out, torch.Tensor) or not isinstance(parts, (list, tuple)) or not out.is_floating_point():
            return
        if not all(isinstance(t, torch.Tensor) and t.is_floating_point() for t in parts):
            return
        found = next((f for f in map(self._output_view, reversed(parts)) if f is not None), None)
        if found is not None:
            self.outputs = self.outputs[-3:] + [(weakref.ref(out), storage_ptr(out), tuple(out.shape), found[1])]

    # -- the wrapped calls -------------------------------------------------------------------------
    def produced(self, name: str, args: tuple, kwargs: dict, result: Any) -> None:
        x = args[0] if args else None
        if not isinstance(x, torch.Tensor) or not self.outputs:
            return
        found = self._output(x)
        if found is None:
            return
        shape, info = found
        if name == "topk":  # (values, indices) of the k best: never flat; k=1 keeps a dimension of 1
            k = kwargs.get("k", args[1] if len(args) > 1 else None)
            dim = kwargs.get("dim", args[2] if len(args) > 2 else -1)
        else:
            dim = kwargs.get("dim", args[1] if len(args) > 1 else None)
        if dim is None and name == "max":
            return  # the largest value, not a prediction
        index = result if isinstance(result, torch.Tensor) else getattr(result, "indices", None)
        if not isinstance(index, torch.Tensor):
            return
        what = f"{name}()" if dim is None else f"topk({k}, dim={dim})" if name == "topk" else f"{name}(dim={dim})"
        classes = shape[dim] if isinstance(dim, int) and -len(shape) <= dim < len(shape) else shape[-1]
        self.preds = self.preds[-7:] + [(weakref.ref(index), storage_ptr(index), dim is None, shape[0], shape,
                                         info, what, classes)]

    def _pred(self, t: Any) -> tuple[bool, int, tuple[int, ...], ModelInfo, str, int] | None:
        if not isinstance(t, torch.Tensor):
            return None
        storage = storage_ptr(t)
        for ref, p_storage, flat, batch, shape, info, what, classes in reversed(self.preds):
            p = ref()
            if p is not None and (p is t or (storage and storage == p_storage)):
                return flat, batch, shape, info, what, classes
        return None

    def compared(self, name: str, a: Any, b: Any) -> None:
        if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)) or not self.preds:
            return
        for pred, other in ((a, b), (b, a)):
            found = self._pred(pred)
            if found is None or self._pred(other) is not None:
                continue
            flat, batch, shape, info, what, classes = found
            loc = user_location(3) or ""
            where = f"{name} at {loc}" if loc else f"a comparison with {info.name}'s predictions"
            if flat and other.numel() > 1:
                self.s.report(
                    "prediction-shape-mismatch",
                    f"{what} with no dim over the {shape} evaluation outputs of {info.name} is one index into the "
                    f"flattened batch of {batch} samples, compared here with a {tuple(other.shape)} tensor: every "
                    "sample is scored against the same number, not against its own prediction, and the metric "
                    "is wrong while nothing fails.",
                    fix=f"{what[:-2] if what.endswith('()') else what}(dim=1) (or dim=-1): one prediction per "
                        "sample, over the classes.",
                    where=where, key=f"flat:{loc}")
                return
            if flat or pred.dim() == 0 or other.dim() == 0 or pred.shape[0] != batch or other.shape[0] != batch:
                continue
            if pred.shape == other.shape and classes in self.index_classes:
                self._pair(pred, other, info, user_location(3) or "")
            try:
                wide = math.prod(torch.broadcast_shapes(pred.shape, other.shape))
            except RuntimeError:
                return  # not broadcastable: PyTorch raises on its own
            if wide > max(pred.numel(), other.numel()) and storage_ptr(pred) != storage_ptr(other):
                self.s.report(
                    "prediction-shape-mismatch",
                    f"the {tuple(pred.shape)} predictions ({what} of {info.name}'s {shape} evaluation outputs) are "
                    f"compared with a {tuple(other.shape)} tensor: broadcasting turns the comparison into a "
                    f"{tuple(torch.broadcast_shapes(pred.shape, other.shape))} table of every prediction against "
                    "every label, so a count or mean of it is not the metric, and nothing fails.",
                    fix="give both sides the same shape before comparing (labels.view(-1) or pred.view_as(labels), "
                        "or squeeze the trailing dimension of size 1).",
                    where=where, key=f"broadcast:{loc}")
                return

    # -- evaluation labels numbered like the training labels (labelmap.py) ---------------------------
    def _pair(self, pred: torch.Tensor, labels: torch.Tensor, info: ModelInfo, loc: str) -> None:
        """Keep an evaluation comparison of class predictions with integer labels (the predictions by
        reference, the labels copied on their device: read once, at the end of the run)."""
        if labels.is_floating_point() or labels.dtype == torch.bool or pred.is_floating_point():
            return
        _, _, kept = self.pairs.setdefault(id(info), (info, loc, []))
        if sum(p.numel() for p, _ in kept) < MAP_PAIRS:
            kept.append((pred.detach(), labels.detach().clone()))  # a label buffer reused by the loop stays put

    def end_of_run(self) -> None:
        for info, loc, kept in self.pairs.values():
            if not kept:
                continue
            found = reindexed(torch.cat([p.reshape(-1) for p, _ in kept]).cpu(),
                              torch.cat([y.reshape(-1) for _, y in kept]).cpu())
            if found is None:
                continue
            self.s.report(
                "eval-classes-renumbered",
                f"{info.name} was trained on class indices (or one-hot class targets), and in evaluation its "
                "predictions match the labels they "
                f"are compared with only under another numbering of the classes: {found.describe()}. Over "
                f"{found.pairs} evaluated samples the accuracy is {found.as_given:.1%} on the labels as given and "
                f"{found.relabelled:.1%} once the classes are renumbered. Either the evaluation labels were numbered "
                "by another class-to-index map than the training labels (class folders listed per split when one "
                "split lacks a class, a label encoder fitted again on the evaluation data, 1-based labels, a class "
                "list in another order), or the evaluation inputs were prepared so that one class looks like another "
                "(colour channels in another order, BGR for RGB; images flipped where orientation is the class); "
                "either way the metric scores the numbering, not the model.",
                fix="build the class-to-index map once, from the training data or a fixed list of class names, and "
                    "use that same map for every split (a folder loader: pass the training split's class_to_idx; "
                    "an encoder: fit it on the training labels and only transform the others); prepare evaluation "
                    "inputs exactly as the training inputs (the same channel order and orientation).",
                where=f"the comparison at {loc}" if loc else f"{info.name}'s evaluation", key=f"map:{loc}")
        self.pairs = {}

    # -- wrappers ------------------------------------------------------------------------------------
    def _wrap(self) -> None:
        self._close_choices()  # an evaluation in eval mode: its wrappers see the choices (never both sets at once)
        _WRAPPERS.listen(self)
        if self.targets and self.units_looks < UNITS_LOOKS:
            patches.eval_losses(self, True)
            self.sk_errors.install()

    def _unwrap(self) -> None:
        self.outputs, self.preds = [], []
        _WRAPPERS.stop(self)
        patches.eval_losses(self, False)
        self.sk_errors.remove()

    def remove_hooks(self) -> None:
        self._unwrap()
        self.out_hook.remove()


def _listening(frame: Any) -> bool:
    return bool(_WRAPPERS.listening) and not compiling() and not from_torch(frame)


def _producer(orig: Any, name: str, shown: str) -> Any:
    @functools.wraps(orig)
    def produce(*args: Any, **kwargs: Any) -> Any:
        out = orig(*args, **kwargs)
        if args and _listening(sys._getframe(1)):
            for check in _WRAPPERS.listening:
                try:
                    check.produced(name, args, kwargs, out)
                except Exception as exc:  # noqa: BLE001  never break the user's call over a check
                    check.s.check_failed(check, exc)
                if name in ("argmax", "argmin"):  # a choice over a curve (overt.guards.flatpick), same window
                    pick = getattr(check.s, "flatpick", None)
                    if pick is not None:
                        try:
                            pick.seen_choice(shown, args, kwargs, sys._getframe(1))
                        except Exception as exc:  # noqa: BLE001
                            check.s.check_failed(pick, exc)
        return out

    return produce


def _comparison(orig: Any, name: str) -> Any:
    shown = {"__eq__": "==", "__ne__": "!="}.get(name, name)

    @functools.wraps(orig)
    def compare(*args: Any, **kwargs: Any) -> Any:
        if len(args) >= 2 and _listening(sys._getframe(1)):
            for check in _WRAPPERS.listening:
                if check.preds:
                    try:
                        check.compared(shown, args[0], args[1])
                    except Exception as exc:  # noqa: BLE001
                        check.s.check_failed(check, exc)
        return orig(*args, **kwargs)

    return compare


def _difference(orig: Any, name: str) -> Any:
    @functools.wraps(orig)
    def difference(*args: Any, **kwargs: Any) -> Any:
        if len(args) >= 2 and _listening(sys._getframe(1)):
            for check in _WRAPPERS.listening:
                if check.outputs and check.targets:
                    try:
                        check.subtracted(args[0], args[1])
                    except Exception as exc:  # noqa: BLE001
                        check.s.check_failed(check, exc)
        return orig(*args, **kwargs)

    return difference


def _gather(orig: Any, name: str) -> Any:
    @functools.wraps(orig)
    def gather(*args: Any, **kwargs: Any) -> Any:
        out = orig(*args, **kwargs)
        if args and _listening(sys._getframe(1)):
            for check in _WRAPPERS.listening:
                if check.outputs:
                    try:
                        check.gathered(args[0], out)
                    except Exception as exc:  # noqa: BLE001
                        check.s.check_failed(check, exc)
        return out

    return gather


def _make(orig: Any, owner: Any, name: str) -> Any:
    if (owner, name) in _GATHERS:
        return _gather(orig, name)
    if (owner, name) in _PRODUCERS:
        return _producer(orig, name, f"{'torch' if owner is torch else 'Tensor'}.{name}")
    return _comparison(orig, name) if (owner, name) in _COMPARISONS else _difference(orig, name)


# the functions wrapped while some session's evaluation outputs are remembered
_WRAPPERS = Swapped(_PRODUCERS + _COMPARISONS + _DIFFERENCES + _GATHERS, _make)
