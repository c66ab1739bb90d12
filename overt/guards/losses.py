"""Guards at the loss call.

Slugs: ``softmax-before-cross-entropy`` (every loss's input domain: logits, log-probabilities,
probabilities), ``loss-arguments-swapped``,
``wrong-loss-for-task``,
``label-out-of-range``, ``non-finite`` (loss), ``loss-not-decreasing``,
``device-mismatch`` (logits vs targets).

:mod:`overt.guards.patches` wraps the loss functions of
``torch.nn.functional`` (the ``nn`` loss modules call them too); the wrapper
calls :meth:`LossChecks.before`, :meth:`after` and, when the loss raises,
:meth:`on_error`.
"""

from __future__ import annotations

import math
import operator
import re
import sys
from typing import TYPE_CHECKING, Any

import torch

from overt.guards.check import Check
from overt.guards.where import user_location, user_location_from

if TYPE_CHECKING:
    from overt.guards.session import GuardSession

CLASS_LOSSES = ("cross_entropy", "nll_loss")
#: losses linear in their target, whose gradient must reach the model through the input
CROSS_ENTROPY_LOSSES = ("cross_entropy", "binary_cross_entropy", "binary_cross_entropy_with_logits",
                        "poisson_nll_loss", "multilabel_soft_margin_loss")
#: of those, the ones wrapped only for the order of their arguments (no domain check, no loss history)
_ORDER_ONLY = ("poisson_nll_loss", "multilabel_soft_margin_loss")
REGRESSION_LOSSES = ("mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss")
_FIRST_CALLS = 3
#: optimizer steps over which trained logit-loss inputs of no [0, 1]-bounded maker must stay in [0, 1]
_PERSIST_STEPS = 20
#: how far above the mean input on negative targets the mean on positive ones must be, as a fraction of the
#: inputs' range, for inputs that stay in [0, 1] to show a bound: a model that does not rank the labels the
#: right way round (a domain classifier kept confused by gradient reversal, a task not learnt yet) keeps logits
#: near one value, in [0, 1] or not, and proves nothing
_SEPARATION = 0.1
#: autograd nodes that only move or copy values: the maker of a tensor is found past them
_SHAPE_OPS = ("View", "UnsafeView", "Reshape", "Squeeze", "Unsqueeze", "Permute", "Transpose", "T", "Expand",
              "Select", "Slice", "Index", "Clone", "ToCopy", "Alias", "Flatten", "Narrow", "Unbind", "Split",
              "SplitWithSizes", "Cat", "Stack")
_WINDOW = 3
#: loss-not-decreasing speaks only when its windows could have shown a fall of this fraction of the first loss
FALL_RESOLVED = 0.10


def ignore_index_of(args: tuple, kwargs: dict) -> int:
    # signature: (input, target, weight, size_average, ignore_index, ...)
    if "ignore_index" in kwargs:
        return int(kwargs["ignore_index"])
    return int(args[4]) if len(args) > 4 and isinstance(args[4], int) else -100


def _log_target(args: tuple, kwargs: dict) -> bool:
    # signature: (input, target, size_average, reduce, reduction, log_target)
    if "log_target" in kwargs:
        return bool(kwargs["log_target"])
    return bool(args[5]) if len(args) > 5 else False


_FIRST = operator.itemgetter(0)  # the node of a ``next_functions`` entry


def graph_leaves(fn: Any, limit: int = 100_000) -> frozenset[int] | None:
    """The ids of the leaf tensors (parameters) a graph reaches from ``fn`` (a ``grad_fn``), walked once
    on a checked step; None when the graph is larger than ``limit`` nodes (nothing proven)."""
    leaves: set[int] = set()
    seen: set[int] = set()
    stack = [fn]
    pop, extend, mark = stack.pop, stack.extend, seen.add  # a checked step's hot loop: no generator per node
    nodes = 0
    while stack:
        node = pop()
        if node is None:
            continue
        key = id(node)
        if key in seen:
            continue
        mark(key)
        nodes += 1
        if nodes > limit:
            return None
        var = getattr(node, "variable", None)
        if var is not None:
            leaves.add(id(var))
            continue
        extend(map(_FIRST, getattr(node, "next_functions", ())))
    return frozenset(leaves)


_UNSEEN = object()  # LossChecks.site() not asked yet for this loss call


class LossChecks(Check):
    """Called by the loss-function wrappers of :mod:`overt.guards.patches`
    (:meth:`before`, :meth:`after`, :meth:`on_error`)."""

    name = "losses"

    def __init__(self, session: GuardSession):
        super().__init__(session)
        self.calls = 0
        self.locs: dict[str, str] = {}
        self.history: list[tuple[int, float]] = []
        self.not_decreasing_checked = False
        #: (step, ids of the leaves its graph reaches, where) of the last loss of a checked step: an optimizer
        #: step of the same step that finds no gradient asks whether that loss has a path to its parameters
        self.last: tuple[int, frozenset[int] | None, str] | None = None

    _frame: Any = None  # while the checks see a checked loss call: a frame of it below the user's code
    _site: Any = None

    def site(self) -> str | None:
        """``"file.py:LINE"``: the user's line of the loss call that the checks' ``on_checked_loss`` are seeing,
        found once per call (the innermost frame of the user's code: the stack walked once, not once per
        check that keys its findings on the line); outside such a call, the line of the caller's user code."""
        if self._frame is None:
            return user_location(2)
        site = self._site
        if site is _UNSEEN:
            site = self._site = user_location_from(self._frame)
        return site

    def _loc(self, name: str) -> str:
        loc = self.locs.get(name)
        if loc is None:
            loc = self.locs[name] = user_location(4) or ""
        return loc

    def _where(self, name: str) -> str:
        parts = [f"F.{name} call" + (f" at {self.locs.get(name)}" if self.locs.get(name) else "")]
        if self.s.batch_where():
            parts.append(self.s.batch_where())
        return ", ".join(parts)

    prob_strikes = 0  # checked steps in a row whose logit-loss inputs, made in [0, 1], were all in [0, 1]
    prob_since: int | None = None  # the first step of a run of trained logit-loss inputs all in [0, 1]

    def before(self, name: str, args: tuple, kwargs: dict) -> bool:
        """Checks before the loss runs; returns whether :meth:`after` should look at the result."""
        self.calls += 1
        if not self.s.armed:
            return False
        inp = args[0] if args else kwargs.get("input")
        target = args[1] if len(args) > 1 else kwargs.get("target")
        if not isinstance(inp, torch.Tensor) or not isinstance(target, torch.Tensor):
            return False
        self._loc(name)
        if name in CROSS_ENTROPY_LOSSES and torch.is_grad_enabled() and self._swapped(name, inp, target):
            return False  # the arguments are swapped: the input's domain says nothing about the model
        if name in _ORDER_ONLY:
            return False
        if name in CLASS_LOSSES:
            self._class_loss(name, inp, target, ignore_index_of(args, kwargs))
        elif name in REGRESSION_LOSSES:
            self._regression_loss(name, inp, target)
        elif name == "binary_cross_entropy_with_logits":
            self._logit_loss(name, inp, target)
            self._binary_targets(name, target)
        elif name == "binary_cross_entropy":
            self._probability_loss(name, inp)
            self._binary_targets(name, target)
        elif name == "kl_div":
            self._kl_div(name, inp, target, _log_target(args, kwargs))
        if torch.is_grad_enabled():
            outer = self._frame, self._site
            self._frame, self._site = sys._getframe(1), _UNSEEN  # the loss call's frames, for site()
            try:
                self.s._each("on_checked_loss", name, inp, target, args, kwargs)
            finally:
                self._frame, self._site = outer  # no frame kept past the call
            # a divergence term is no training loss's trend, nor are a GAN's BCE losses meant to fall
            return name not in ("kl_div", "binary_cross_entropy")
        return False

    def _swapped(self, name: str, inp: torch.Tensor, target: torch.Tensor) -> bool:
        """A cross-entropy whose target carries the gradient and whose input does not: the arguments are
        swapped.  Cross-entropy is linear in its target, so training through the target alone only drives
        the model's outputs to +-inf wherever the (data) input's logit has a sign: no correct objective is
        that.  Read from autograd's metadata on the host (no device work)."""
        if not (target.is_floating_point() and target.requires_grad) or inp.requires_grad:
            return False
        s = self.s
        s.report(
            "loss-arguments-swapped",
            f"F.{name} is given a target that carries the gradient (computed by the model, "
            f"{_made_by(target)}) and an input that does not ({_made_by(inp)}): the input and the target "
            f"are swapped. {'Cross-entropy' if 'cross_entropy' in name else f'F.{name}'} is linear in its "
            "target, so this loss falls without bound as the "
            "model's outputs grow, the run looks like it trains, and the model learns nothing of the data.",
            fix=f"pass the model's output first and the data second: F.{name}(model_output, target) "
            "(BCEWithLogitsLoss()(logits, target))",
            where=self._where(name), key=name, step=s.step)
        return True

    def _logit_loss(self, name: str, inp: torch.Tensor, target: torch.Tensor) -> None:
        """BCEWithLogitsLoss given probabilities (a sigmoid already applied).  Values that happen to lie in
        [0, 1] are no proof (an untrained network's small outputs do), so the check needs evidence: the input
        is made by an operation whose outputs are in [0, 1] (a sigmoid or softmax, a clamp to [0, 1], a
        hand-written ``1 / (1 + exp(-x))``; read from autograd's metadata on the host) and is in [0, 1] on two
        checked steps in a row; or, whatever made it, it is still all in [0, 1] on a checked step
        :data:`_PERSIST_STEPS` or more optimizer steps after the first, through training calls whose targets
        include negatives (< 0.5), which the loss pushes below 0 when the input is a logit, and while the inputs
        rank the labels the right way round on every checked step of that stretch (their mean on positive targets
        above their mean on negative ones, by :data:`_SEPARATION` of their range at the end): a model that has learnt the labels yet keeps every output in
        [0, 1] is bounded there, where one that does not separate them (an adversarially confused discriminator,
        found on a twin of the wild corpus under check_every=100) proves nothing."""
        if not inp.is_floating_point() or inp.numel() < 16 or inp.device.type == "meta":
            return
        maker = unit_maker(inp.grad_fn)
        trained = inp.requires_grad and torch.is_grad_enabled()
        if maker is None and not (trained and target.is_floating_point() and target.numel()):
            return  # nothing could prove the values are probabilities
        x = inp.detach()
        parts = [*torch.aminmax(x)]
        if maker is None:
            t = target.detach()
            if t.shape != x.shape:
                return  # the inputs cannot be paired with their labels: no separation to read
            neg = t < 0.5
            pos = ~neg
            parts += [t.min().to(x.dtype),
                      (x * neg).sum() / neg.sum().clamp(min=1).to(x.dtype),
                      (x * pos).sum() / pos.sum().clamp(min=1).to(x.dtype)]
        where, step = self._where(name), self.s.step
        s = self.s
        made = type(inp.grad_fn).__name__ if inp.grad_fn is not None else ""
        if maker == "sigmoid":
            msg = ("every input to F.binary_cross_entropy_with_logits (BCEWithLogitsLoss) is in [0, 1] on two "
                   "checked steps: the model outputs probabilities (a sigmoid), and the loss applies the sigmoid "
                   "again, so its predictions are squashed into [0.5, 0.73] and the gradients shrink.")
        else:  # no sigmoid made it: say what is seen, not a cause that is not there
            origin = (f"its last operation is {_op(made)}, not a sigmoid" if made else
                      "it has no autograd history")
            seen = (f"made by {maker}, " if maker else
                    f"still after {_PERSIST_STEPS} or more optimizer steps of training on targets that include "
                    "negatives, ")
            msg = ("every input to F.binary_cross_entropy_with_logits (BCEWithLogitsLoss) is in [0, 1] on two "
                   f"checked steps ({seen}{origin}): the loss reads them as logits, so every prediction is in "
                   "[0.5, 0.73] and none is ever below 0.5. Probabilities computed by hand (1 / (1 + exp(-x)), a "
                   "clamp) give this, and so does another term of the loss that holds these logits in [0, 1] "
                   "(a loss meant for probabilities, such as a Dice or IoU term, given the raw logits).")

        def callback(vals: list[float]) -> None:
            if not (vals[0] >= 0 and vals[1] <= 1):
                self.prob_strikes, self.prob_since = 0, None
                return
            if maker is not None:
                self.prob_strikes += 1
                if self.prob_strikes < 2:
                    return
            else:
                if vals[2] >= 0.5:
                    return  # no negative target: logits trained on these may well stay in [0, 1]
                if vals[4] <= vals[3]:  # positives not above negatives: the labels are not told apart (yet)
                    self.prob_since = None
                    return
                if self.prob_since is None:
                    self.prob_since = step
                if step - self.prob_since < _PERSIST_STEPS:
                    return
                if vals[4] - vals[3] < _SEPARATION * (vals[1] - vals[0]):
                    return  # ranked right, but too close to tell from chance: logits near one value prove no bound
            s.report(
                "softmax-before-cross-entropy", msg,
                fix="give BCEWithLogitsLoss raw logits (drop a final sigmoid) and every loss meant for "
                "probabilities torch.sigmoid(logits); apply torch.sigmoid only for predictions.",
                where=where, key=name, step=step)

        s.defer(torch.stack(parts), callback)

    def _binary_targets(self, name: str, target: torch.Tensor) -> None:
        """Binary cross-entropy's targets are probabilities in [0, 1] (PyTorch's documented domain; it does not
        check them).  Outside it the loss is unbounded below and pushes the logits to infinity: masks read as
        0/255 images, labels in {-1, 1}, augmented masks.  A single out-of-range code beside both 0 and 1 is an
        "ignore" marker that the caller masks out of a ``reduction='none'`` loss (-1 for a missing label, 255
        for a void region): left alone.  Six values read at the next flush."""
        if not target.is_floating_point() or not target.numel() or target.device.type == "meta" \
                or self.s.reporter.has("wrong-loss-for-task", name + ":targets"):
            return
        t = target.detach().float()
        out = (t < 0) | (t > 1)
        inf = torch.tensor(float("inf"), device=t.device)
        vals = torch.stack((t.min(), t.max(), torch.where(out, t, inf).min(), torch.where(out, t, -inf).max(),
                            (t == 0).sum().float(), (t == 1).sum().float()))
        where, step = self._where(name), self.s.step
        s = self.s

        def callback(v: list[float]) -> None:
            lo, hi, out_lo, out_hi, zeros, ones = v
            if lo >= 0 and hi <= 1:
                return
            if out_lo == out_hi and zeros and ones:
                return  # one marker value beside both classes: an ignore code, masked by the caller
            hint = (" (a mask or label image read as 0..255?)" if hi > 1 and lo >= 0 else
                    " (labels in {-1, 1}?)" if lo < 0 and hi <= 1 else "")
            s.report(
                "wrong-loss-for-task",
                f"the targets of F.{name} range over [{lo:.4g}, {hi:.4g}]{hint}: binary cross-entropy takes "
                "targets in [0, 1] (probabilities of the positive class). Outside that range the loss is unbounded "
                "below (it goes negative) and drives the logits to infinity instead of fitting the labels.",
                fix="map the targets into [0, 1] (mask / 255, (y + 1) / 2, y.clamp(0, 1) for binary masks) where "
                "they are loaded.",
                where=where, key=name + ":targets", step=step)

        s.defer(vals, callback)

    def _probability_loss(self, name: str, inp: torch.Tensor) -> None:
        """``BCELoss`` takes probabilities.  Raw logits (values outside [0, 1]) make it raise on the CPU
        (explained by :meth:`on_error`) and trip an asynchronous device-side assert on an accelerator, far
        from the cause: there the first calls are checked now (one device read each)."""
        if inp.device.type in ("cpu", "meta") or self.calls > _FIRST_CALLS or not inp.is_floating_point():
            return
        x = inp.detach()
        if bool(((x < 0) | (x > 1)).any()):
            self._report_bce_logits(name, x, stop=True)

    def _report_bce_logits(self, name: str, x: torch.Tensor, stop: bool = False) -> None:
        lo, hi = (float(v) for v in torch.aminmax(x.float()))
        msg = (f"F.{name} (BCELoss) got values in [{lo:.3g}, {hi:.3g}]: it takes probabilities in [0, 1], so these "
               "are raw logits (no sigmoid was applied). PyTorch raises on the CPU and trips a device-side assert "
               "on an accelerator.")
        fix = "use BCEWithLogitsLoss on the logits (it applies the sigmoid itself, stably); BCELoss only after sigmoid."
        report = self.s.stop if stop else self.s.report
        report("softmax-before-cross-entropy", msg, self._where(name), key=name, fix=fix)

    def _kl_div(self, name: str, inp: torch.Tensor, target: torch.Tensor, log_target: bool) -> None:
        """``F.kl_div``/``KLDivLoss``: the input must be log-probabilities, the target probabilities (or
        log-probabilities with ``log_target=True``).  Judged along the dimension over which one of the two
        is a distribution (dimension 1 and the last one are tried): rows of the input in [0, 1] summing to 1
        are probabilities (the log was forgotten); rows of the target in [0, 1] summing to 1 under
        ``log_target=True``, or a target <= 0 whose rows' exponentials sum to 1 without it, are the target in
        the other domain; positive inputs beside a target of probability rows are raw logits."""
        if not inp.is_floating_point() or not target.is_floating_point() or inp.shape != target.shape \
                or inp.dim() < 2 or inp.numel() < 16 or "meta" in (inp.device.type, target.device.type):
            return
        dims = sorted({1, inp.dim() - 1})
        dims = [d for d in dims if inp.shape[d] >= 2]
        if not dims:
            return
        x, t = inp.detach().float(), target.detach().float()
        parts = [torch.stack(torch.aminmax(x)), torch.stack(torch.aminmax(t))]
        for d in dims:
            parts += [torch.stack(torch.aminmax(x.sum(d))), torch.stack(torch.aminmax(t.sum(d))),
                      torch.stack(torch.aminmax(t.exp().sum(d)))]
        where, step = self._where(name), self.s.step
        self.s.defer(torch.cat(parts), self._kl_cb(name, where, step, dims, log_target))

    def _kl_cb(self, name: str, where: str, step: int, dims: list[int], log_target: bool):
        s = self.s

        def one(lo: float, hi: float) -> bool:
            return abs(lo - 1) < 1e-3 and abs(hi - 1) < 1e-3

        def callback(vals: list[float]) -> None:
            x_lo, x_hi, t_lo, t_hi = vals[:4]
            x_unit, t_unit = x_lo >= 0 and x_hi <= 1, t_lo >= 0 and t_hi <= 1
            msg = fix = None
            for i, d in enumerate(dims):
                xs, ts, es = vals[4 + 6 * i:6 + 6 * i], vals[6 + 6 * i:8 + 6 * i], vals[8 + 6 * i:10 + 6 * i]
                t_probs = t_unit and one(*ts)
                if x_unit and one(*xs):
                    msg = (f"every row of the input to F.kl_div (KLDivLoss) is in [0, 1] and sums to 1 over dimension "
                           f"{d}: it received probabilities, but its input must be log-probabilities (it computes "
                           "target * (log(target) - input)), so the loss is no longer a divergence and its minimum is "
                           "not the target distribution.")
                    fix = ("pass F.log_softmax(logits, dim=...) as the input (not softmax); the target stays "
                           "probabilities (or log-probabilities with log_target=True).")
                elif log_target and t_probs:
                    msg = (f"F.kl_div (KLDivLoss) has log_target=True but every row of its target is in [0, 1] and "
                           f"sums to 1 over dimension {d}: the target holds probabilities, read as log-probabilities, "
                           "so the model is fitted to exp(p), not to p.")
                    fix = ("pass log_softmax of the target's logits, or drop log_target=True for a target of "
                           "probabilities.")
                elif not log_target and t_hi <= 0 and t_lo < 0 and one(*es):
                    msg = (f"every value of the target of F.kl_div (KLDivLoss) is <= 0 and its exponentials sum to 1 "
                           f"over dimension {d}: the target holds log-probabilities, but log_target is False, so it is "
                           "read as probabilities (negative ones: the loss is NaN or meaningless).")
                    fix = "pass log_target=True, or give the target as probabilities (softmax, not log_softmax)."
                elif t_probs and x_hi > 1e-6:
                    msg = (f"the input to F.kl_div (KLDivLoss) has positive values (max {x_hi:.3g}) beside a target of "
                           f"probability rows over dimension {d}: log-probabilities are <= 0, so these are raw logits "
                           "and the loss is not a divergence.")
                    fix = "apply F.log_softmax(logits, dim=...) to the input first."
                if msg:
                    break
            if msg:
                s.report("softmax-before-cross-entropy", msg, where, key=name, step=step, fix=fix)

        return callback

    def _class_loss(self, name: str, inp: torch.Tensor, target: torch.Tensor, ignore_index: int) -> None:
        s = self.s
        if not inp.is_floating_point() or inp.dim() == 0 or "meta" in (inp.device.type, target.device.type):
            return
        x = inp.detach()
        if x.numel() == 0:
            return
        dim = 1 if x.dim() >= 2 else 0
        where = self._where(name)
        step = s.step
        # three small reductions, judged on the host at the next flush: min and max of the
        # input, and min and max of its row sums
        lo, hi = torch.aminmax(x)
        s_lo, s_hi = torch.aminmax(x.sum(dim))
        parts = [lo, hi, s_lo, s_hi]
        if name == "nll_loss" and x.dim() >= 2 and x.shape[dim] >= 2:
            # log-probabilities are normalised over the class dimension: logsumexp 0 there (and, for a
            # (batch, classes) input, whether they are normalised over the batch instead)
            # (on the first rows only: logsumexp makes a temporary of its input's size)
            rows = x[:4096] if x.dim() == 2 else x[:64]
            parts += list(torch.aminmax(torch.logsumexp(rows.float(), dim)))
            if x.dim() == 2 and 2 <= x.shape[0] <= 4096:
                parts += list(torch.aminmax(torch.logsumexp(x.float(), 0)))
        s.defer(torch.stack(parts), self._softmax_cb(name, where, step, x.numel(), tuple(x.shape)))
        if not target.is_floating_point() and target.dtype != torch.bool and target.numel():
            num_classes = x.shape[dim]
            t = target.detach()
            if t.device.type != "cpu" and t.device == x.device and self.calls <= _FIRST_CALLS:
                # on an accelerator a bad index becomes an asynchronous device assert: check now
                bad = ((t < 0) | (t >= num_classes)) & (t != ignore_index)
                if bool(bad.any()):
                    self._report_labels(name, t, num_classes, ignore_index, stop=True)
            else:
                t_lo, t_hi = torch.aminmax(t)
                s.defer(torch.stack((t_lo, t_hi)), self._labels_cb(name, t, num_classes, ignore_index))
            if 0 <= ignore_index < num_classes and t.dim() == 1 and not s.reporter.has("ignore-index-is-class") \
                    and not self._token_targets(t):
                # one label per sample (classification, not tokens): an ignore_index that is a class index
                # the model has an output for drops that class's labelled samples from the loss
                s.defer(torch.stack(((t == ignore_index).sum(), torch.tensor(t.numel(), device=t.device))),
                        self._ignored_cb(name, where, step, ignore_index, num_classes))

    def _token_targets(self, t: torch.Tensor) -> bool:
        """Targets that are tokens of the checked forward's 2-D ids (several per sequence, flattened):
        there an ignored id that is a vocabulary entry (the padding's) is the usual, correct choice."""
        padloss = getattr(self.s, "padloss", None)
        ids = getattr(padloss, "ids", None)
        return ids is not None and t.numel() != len(ids) and t.numel() % len(ids) == 0

    def _labels_cb(self, name: str, t: torch.Tensor, num_classes: int, ignore_index: int):
        def callback(vals: list[float]) -> None:
            if vals[0] >= 0 and vals[1] < num_classes:
                return
            # out of range, or only ignore_index is: look exactly (this batch only)
            bad = ((t < 0) | (t >= num_classes)) & (t != ignore_index)
            if bool(bad.any()):
                self._report_labels(name, t, num_classes, ignore_index)

        return callback

    def _ignored_cb(self, name: str, where: str, step: int, ignore_index: int, num_classes: int):
        def callback(vals: list[float]) -> None:
            ignored, n = int(vals[0]), int(vals[1])
            if not ignored:
                return
            self.s.report(
                "ignore-index-is-class",
                f"F.{name} has ignore_index={ignore_index}, which is one of the model's {num_classes} classes: "
                f"{ignored} of the {n} samples of this batch are labelled {ignore_index} and are left out of the "
                f"loss, so class {ignore_index} is never learned (its output is only ever pushed down) and the "
                "model never predicts it.",
                fix=f"keep ignore_index out of the class range (the default -100), or remap the labels so that "
                f"the value to ignore is not a class; if class {ignore_index} really is 'no label', drop its "
                "output column.",
                where=where, key=name, step=step)

        return callback

    def _softmax_cb(self, name: str, where: str, step: int, n: int = 0, shape: tuple = ()):
        s = self.s

        def callback(vals: list[float]) -> None:
            lo, hi, s_lo, s_hi = vals[:4]
            slug = "softmax-before-cross-entropy"
            if lo >= 0 and hi <= 1 and abs(s_lo - 1) < 1e-3 and abs(s_hi - 1) < 1e-3:
                if name == "cross_entropy":
                    msg = ("every input row to F.cross_entropy is in [0, 1] and sums to 1: the model outputs "
                           "probabilities, so softmax is applied twice (CrossEntropyLoss applies log_softmax "
                           "itself), gradients shrink and learning stalls.")
                    fix = ("return raw logits from forward (drop the final softmax) and apply softmax only for "
                           "predictions.")
                else:
                    msg = ("every input row to F.nll_loss is in [0, 1] and sums to 1: it received "
                           "probabilities, not log-probabilities.")
                    fix = "use F.log_softmax instead of softmax, or CrossEntropyLoss on raw logits."
            elif name == "nll_loss" and hi > 1e-6:
                msg = (f"F.{name} (NLLLoss) received positive values: it expects log-probabilities "
                       "(<= 0), so these are raw logits and the loss is meaningless.")
                fix = "apply F.log_softmax(logits, dim=1) before NLLLoss, or use CrossEntropyLoss on the logits."
            elif name == "nll_loss" and len(vals) >= 6 and max(abs(vals[4]), abs(vals[5])) > 0.1:
                mass = f"[{math.exp(vals[4]):.3g}, {math.exp(vals[5]):.3g}]"
                if len(vals) >= 8 and max(abs(vals[6]), abs(vals[7])) < 1e-3:
                    slug = "softmax-over-batch"
                    msg = (f"the input to F.nll_loss, {shape}, is normalised over dimension 0, the batch of "
                           f"{shape[0]} samples (log_softmax(..., dim=0)): each class is normalised over the samples, "
                           f"and a sample's probabilities over its {shape[1]} classes sum to {mass}, not 1, so its "
                           "loss depends on the rest of the batch.")
                    fix = "log_softmax over the class dimension: F.log_softmax(x, dim=1) (or dim=-1)."
                else:
                    msg = (f"the input to F.nll_loss, {shape}, is <= 0 but its exponentials sum to {mass} over the "
                           "class dimension (1), not 1: these are not log-probabilities of the classes (log_softmax "
                           "over another dimension, e.g. the time steps of a (batch, time, classes) output, or "
                           "scores never normalised), so the loss does not measure the targets' probability.")
                    fix = ("log_softmax over the class dimension (dim=-1 for (batch, time, classes), then move the "
                           "classes to dimension 1 or flatten to (batch*time, classes)), or CrossEntropyLoss on "
                           "the raw logits.")
            else:
                return
            s.report(slug, msg, where, key=name, step=step, fix=fix)

        return callback

    def _report_labels(self, name: str, t: torch.Tensor, num_classes: int, ignore_index: int,
                       stop: bool = False) -> None:
        valid = t[t != ignore_index]
        lo, hi = (int(valid.min()), int(valid.max())) if valid.numel() else (0, 0)
        n_bad = int((((valid < 0) | (valid >= num_classes))).sum()) if valid.numel() else 0
        msg = (f"{n_bad} target(s) outside [0, {num_classes}) in this batch (min {lo}, max {hi}); the "
               f"logits have {num_classes} classes. On CUDA this is a cryptic device-side assert.")
        fix = ("make the output layer as wide as the number of classes, or remap the labels to "
               f"0..{num_classes - 1} (e.g. 1-based labels: y - 1).")
        if stop:
            self.s.stop("label-out-of-range", msg, self._where(name), key=name, fix=fix)
        else:
            self.s.report("label-out-of-range", msg, self._where(name), key=name, fix=fix)

    def _regression_loss(self, name: str, inp: torch.Tensor, target: torch.Tensor) -> None:
        where = self._where(name)
        if not target.is_floating_point():
            self.s.report(
                "wrong-loss-for-task",
                f"F.{name} got {target.dtype} targets (class indices?) for {tuple(inp.shape)} outputs: a "
                "regression loss on class indices treats classes as ordered numbers.",
                fix="for classification use CrossEntropyLoss on logits with integer labels.",
                where=where, key=name + ":dtype",
            )
        elif inp.shape != target.shape:
            try:
                broadcast = tuple(torch.broadcast_shapes(inp.shape, target.shape))
            except RuntimeError:
                return  # PyTorch raises on its own
            self.s.report(
                "wrong-loss-for-task",
                f"F.{name} got outputs {tuple(inp.shape)} and targets {tuple(target.shape)}: they "
                f"broadcast to {broadcast}, so every output is compared with every target.",
                fix="make the shapes equal (e.g. output.squeeze(-1) or target.unsqueeze(-1)); for class "
                "indices use CrossEntropyLoss.",
                where=where, key=name + ":shape",
            )

    def after(self, name: str, out: Any) -> None:
        if not isinstance(out, torch.Tensor) or out.dim() != 0 or not out.requires_grad:
            return
        step = self.s.step
        where = self._where(name)
        if out.grad_fn is not None:
            self.last = (step, graph_leaves(out.grad_fn), where)

        def callback(vals: list[float]) -> None:
            v = vals[0]
            if not math.isfinite(v):
                self.s.stop("non-finite",
                            f"the loss from F.{name} is {v} at step {self.s.run_step(step)}: its gradients will poison "
                            "every weight.",
                            fix="check the inputs for NaN/inf, log of 0, division by "
                            "zero; lower the learning rate; use gradient clipping.",
                            where=where, key="loss", can_stop=self.s.can_stop)
                return
            self.history.append((step, v))

        self.s.defer(out.detach().float(), callback)

    def check_decreasing(self, final: bool = False) -> None:
        """Judged once, when the run ends, over the whole run: a loss that has not fallen YET says nothing of the
        steps to come (a recurrent model under plain SGD can sit at chance level for hundreds of steps and then learn:
        a public LSTM tutorial did, fresh4 public scripts), so a window in the middle of the run proves no premise."""
        s = self.s
        hist = self.history
        if not final or self.not_decreasing_checked or len(s.optimizers) != 1 or len(hist) < 2 * _WINDOW:
            return
        if hist[-1][0] - hist[0][0] < max(20, 10 * s.options.check_every):
            return  # a span of at least ten check intervals: the checked steps are fixed, not stretched
        self.not_decreasing_checked = True
        if agent_generated_data():
            return  # no fixed objective: the data come from the model's own behaviour (see the function)
        w = max(_WINDOW, len(hist) // 4)  # the first and last quarters: the means' noise shrinks with the run
        first = sum(v for _, v in hist[:w]) / w
        last = sum(v for _, v in hist[-w:]) / w
        if last >= 0.99 * first and first > 1e-6 and not noise_hides_a_fall([v for _, v in hist], w, first - last):
            s.report(
                "loss-not-decreasing",
                f"the training loss went from {first:.4g} (steps {hist[0][0]}-{hist[w - 1][0]}) "
                f"to {last:.4g} (steps {hist[-w][0]}-{hist[-1][0]}): no progress over "
                f"{hist[-1][0] - hist[0][0]} steps.",
                fix="check the learning rate (too low: flat; too "
                "high: rising), that labels match inputs, and that the optimizer holds the model's "
                "parameters.",
                where=f"loss from F.{self._first_name()}", key="loss",
            )

    def _first_name(self) -> str:
        return next(iter(self.locs), "loss")

    def on_error(self, name: str, args: tuple, kwargs: dict) -> None:
        """The loss raised: say why, when it is one of the catalog's causes."""
        inp = args[0] if args else kwargs.get("input")
        target = args[1] if len(args) > 1 else kwargs.get("target")
        if not isinstance(inp, torch.Tensor) or not isinstance(target, torch.Tensor):
            return
        self._loc(name)
        if inp.device != target.device:
            self.s.report(
                "device-mismatch",
                f"F.{name} got outputs on {inp.device} and targets on {target.device}.",
                fix="move the targets with `y = y.to(device)` (assign the result) together with the inputs.",
                where=self._where(name), key=name,
            )
            return
        if name == "binary_cross_entropy" and inp.is_floating_point() and inp.numel():
            x = inp.detach()
            if bool(((x < 0) | (x > 1)).any()):  # the loss has raised already: a read costs nothing now
                self._report_bce_logits(name, x)
            return
        if name in CLASS_LOSSES and inp.is_floating_point() and inp.dim() >= 1:
            if target.is_floating_point() and target.shape != inp.shape:
                self.s.report(
                    "wrong-loss-for-task",
                    f"F.{name} got float targets of shape {tuple(target.shape)} for outputs "
                    f"{tuple(inp.shape)}: class-index targets must be integers (torch.long); "
                    "probability targets must have the output's shape.",
                    fix="y.long() for class indices.",
                    where=self._where(name), key=name + ":dtype",
                )
                return
            if not target.is_floating_point():
                dim = 1 if inp.dim() >= 2 else 0
                t = target.detach()
                num_classes = inp.shape[dim]
                ii = ignore_index_of(args, kwargs)
                valid = t[t != ii]
                if valid.numel() and (int(valid.min()) < 0 or int(valid.max()) >= num_classes):
                    self._report_labels(name, t, num_classes, ii)

    def end_of_run(self) -> None:
        self.check_decreasing(final=True)


def _node_op(node: Any) -> str:
    return _op(type(node).__name__)


def unit_maker(fn: Any) -> str | None:
    """What made a tensor (its ``grad_fn``) with every value in [0, 1] by construction, in words: ``"sigmoid"``
    (a sigmoid, hard sigmoid or softmax), ``"a clamp to [0, 1]"``, ``"a hand-written sigmoid"``
    (``1 / (1 + exp(-x))``); None when its maker bounds nothing (or there is none).  Operations that only
    move values (views, reshapes, indexing, concatenation of such tensors) are looked through.  Host metadata
    only: no device work."""
    node, seen = fn, 0
    while node is not None and seen < 32:
        seen += 1
        op = _node_op(node)
        if op.startswith(("Sigmoid", "Hardsigmoid", "Softmax")):
            return "sigmoid"
        if op.startswith(("Clamp", "Hardtanh")):
            lo = getattr(node, "_saved_min", getattr(node, "_saved_min_val", None))
            hi = getattr(node, "_saved_max", getattr(node, "_saved_max_val", None))
            try:
                bounded = lo is not None and hi is not None and float(lo) >= 0 and float(hi) <= 1
            except (TypeError, RuntimeError, ValueError):  # a tensor bound: not read (no device work)
                bounded = False
            return "a clamp to [0, 1]" if bounded else None
        if op in ("Reciprocal", "Div", "Mul") and _reaches(node, ("Add",), ("Exp",)):
            return "a hand-written sigmoid"
        if op.rstrip("0123456789") not in _SHAPE_OPS:
            return None
        nexts = [f for f, _ in getattr(node, "next_functions", ()) if f is not None]
        makers = {unit_maker(f) for f in nexts} if len(nexts) > 1 else None
        if makers is not None:  # a concatenation: bounded when every part is
            return makers.pop() if len(makers) == 1 else None
        node = nexts[0] if nexts else None
    return None


def _reaches(node: Any, *chain: tuple[str, ...]) -> bool:
    """Whether ``node``'s inputs (within one Reciprocal/Div step) lead through ops named by ``chain`` in turn
    (``1 / (1 + exp(-x))``: Reciprocal <- Add <- Exp)."""
    frontier = [f for f, _ in getattr(node, "next_functions", ()) if f is not None]
    frontier += [g for f in frontier if _node_op(f) == "Reciprocal"
                 for g, _ in getattr(f, "next_functions", ()) if g is not None]
    for names in chain:
        frontier = [f for f in frontier if _node_op(f) in names]
        if not frontier:
            return False
        frontier = [g for f in frontier for g, _ in getattr(f, "next_functions", ()) if g is not None]
    return True


def _made_by(t: torch.Tensor) -> str:
    """What produced ``t``, in words: its autograd node, or that it is a leaf (data)."""
    fn = t.grad_fn
    if fn is None:
        return "a trained parameter" if t.requires_grad else "data, no autograd history"
    return f"last by {_op(type(fn).__name__)}"


def _op(node_name: str) -> str:
    """``Addmm`` of autograd's ``AddmmBackward0``."""
    return re.sub(r"Backward\d*$", "", node_name)


#: packages whose import means the program trains an agent in an environment (reinforcement learning)
ENV_PACKAGES = ("gym", "gymnasium", "dm_env", "dm_control", "pettingzoo", "procgen", "minigrid", "ale_py")


def noise_hides_a_fall(values: list[float], w: int, fall: float) -> bool:
    """Whether the step-to-step noise of the checked losses ``values`` is too large for the means of their first and
    last ``w`` to show a fall of ``FALL_RESOLVED`` of the first: the measured ``fall`` (first mean minus last) plus
    two standard errors of that difference reaches it.  "No progress" is a claim that the loss did not fall; a
    loss of one sample a step (a character RNN fed one name at a time: single-sample cross-entropies spread over
    the whole range) falls by a tenth over thousands of steps while three samples at each end say anything, so
    there the comparison proves nothing and the check stays silent.  The noise is read from successive
    differences (half their mean square), which a slow trend leaves almost untouched."""
    n = len(values)
    if n < 2:
        return False
    sigma = math.sqrt(sum((b - a) ** 2 for a, b in zip(values, values[1:])) / (2 * (n - 1)))
    first = sum(values[:w]) / w
    return fall + 2 * sigma * math.sqrt(2 / w) >= FALL_RESOLVED * abs(first)


def agent_generated_data() -> bool:
    """Whether the program trains an agent on data its own behaviour generates: an environment package is
    loaded.  ``loss-not-decreasing`` rests on a fixed objective (a data set and targets that do not move
    with the model); a value loss against bootstrapped targets (a DQN's TD target from a target network
    refreshed every N steps, PPO's returns) and a policy loss on the agent's own rollouts need not fall
    while the agent improves -- the returns rise and the loss with them -- so there the check cannot prove
    its premise and stays silent (cleanrl's dqn.py and minimalRL's ppo-lstm had this false finding)."""
    modules = sys.modules
    return any(name in modules for name in ENV_PACKAGES)
