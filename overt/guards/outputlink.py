"""Guards on evaluation code that reads a model's outputs in another sense than its training loss gave
them (issue 33, branch scores).

The premise: what evaluation reads from a model's output is what the training loss taught the output to
mean.  The loss fixes the output's space -- logits for ``BCEWithLogitsLoss``/``cross_entropy``, one
independent probability per label for a multi-label ``BCEWithLogitsLoss``, the tokens that are not the
``ignore_index`` -- and a correct evaluation reads it through the same link, on the same labels, in a
precision that can hold the sum.  Four ways to break it leave no error:

- ``logits-thresholded-as-probabilities``: outputs trained as logits (``BCEWithLogitsLoss``) compared with
  0.5, the probability threshold, without the sigmoid (a logit of 0.5 is a probability of 0.62);
- ``scores-activation-mismatch``: outputs scored through another activation than the loss trained them
  with, then thresholded: independent sigmoids on multi-label targets scored through a softmax over the
  labels (a sample's labels then compete for one unit of probability), or logits trained by
  ``cross_entropy`` (a softmax over the classes) scored through a sigmoid per class;
- ``eval-loss-scores-ignored``: an evaluation loss of the training loss's kind, on the model's outputs,
  that does not ignore the index the training loss ignored, on targets that hold it (perplexity over
  padding);
- ``metric-summed-in-low-precision``: an evaluation sum (a count of correct predictions, a loss total)
  kept in a bfloat16/float16 tensor, which past a few hundred can no longer grow by its terms.

How it is seen.  On the first :data:`TRAIN_LOOKS` checked training forwards of each watched model the
outputs (a tensor, the first four of a tuple, an ``output.logits``) are remembered by their memory; a
checked loss call whose input is one of them (itself or a whole view: ``out.squeeze(1)``,
``out.reshape(-1, V)``) links that output (model, position) to the loss: its name, its ``ignore_index``
and (``BCEWithLogitsLoss``, one deferred read) whether some target row holds several positives.  An
output fed to losses of different kinds is linked to none.  From a watched model's ``eval()`` the outputs
of its first :data:`OUT_LOOKS` evaluation forwards are remembered likewise, and while an evaluation lasts
(until training resumes) a few functions are wrapped: the comparisons (``>``/``>=``/``<``/``<=``,
``gt``/``ge``/``lt``/``le``), the softmax functions (through :mod:`overt.guards.softmax_dim`'s wrappers),
the loss functions (through :mod:`overt.guards.patches`, only when some link has an ``ignore_index`` that
is not PyTorch's default) and in-place additions (``+=``, ``add_``) on small half-precision tensors.  The
judgements read the device once each, in evaluation, at most once per call site: the compared outputs'
range (a logit is proven by a value outside [0, 1]: a model that applies the sigmoid itself in eval mode
stays quiet), whether the evaluation targets hold the ignored index, and, when training resumes or the run
ends, each half-precision sum against the same terms summed in float64 on the side.  Nothing runs on
unchecked training steps.
"""

from __future__ import annotations

import functools
import sys
import weakref
from typing import TYPE_CHECKING, Any

import torch

from overt.guards.check import Check
from overt.guards.losses import ignore_index_of
from overt.guards.oneshot import OneShotHook
from overt.guards.swapped import EvalOutputLooks, Swapped, compiling
from overt.guards.watched import storage_ptr
from overt.guards.where import from_torch, user_location

if TYPE_CHECKING:
    from overt.guards.watched import ModelInfo

TRAIN_LOOKS = 8  # checked training forwards per model whose outputs are matched with the loss
OUT_LOOKS = 8  # evaluation forwards per model whose outputs are remembered
LOSS_LOOKS = 4  # evaluation loss calls judged per run (one read each)
SUM_PHASES = 4  # evaluation phases whose half-precision sums are followed
TRACKED = 8  # half-precision sums followed at once
SUM_TERMS = 8  # terms a sum must have received to be judged
SUM_ELEMENTS = 16  # a sum is a small tensor: a scalar, a per-class count
RELATIVE = 0.01  # a sum further than this from the float64 sum of its terms (and by more than 0.5) is wrong
LOW = (torch.bfloat16, torch.float16)
EXACT = {torch.bfloat16: 256, torch.float16: 2048}  # the largest integer past which +1 may round away
LOGIT_LOSS = "binary_cross_entropy_with_logits"
INDEX_LOSSES = ("cross_entropy", "nll_loss")
_LINKS = (LOGIT_LOSS, *INDEX_LOSSES)  # losses that train outputs which are not probabilities
_COMPARISONS = ((torch.Tensor, "__gt__"), (torch.Tensor, "__ge__"), (torch.Tensor, "__lt__"), (torch.Tensor, "__le__"),
                (torch.Tensor, "gt"), (torch.Tensor, "ge"), (torch.Tensor, "lt"), (torch.Tensor, "le"),
                (torch, "gt"), (torch, "ge"), (torch, "lt"), (torch, "le"))
_ROUNDS = ((torch, "round"), (torch.Tensor, "round"))
_SIGMOIDS = ((torch, "sigmoid"), (torch.Tensor, "sigmoid"), (torch.nn.functional, "sigmoid"))
_ADDITIONS = ((torch.Tensor, "__iadd__"), (torch.Tensor, "add_"))


def model_outputs(output: Any) -> list[tuple[int, torch.Tensor]]:
    """(position, tensor) of the floating tensors a forward returned: the output itself (0), the first
    four of a tuple or list (their index), an ``output.logits`` (-1)."""
    if isinstance(output, torch.Tensor):
        found = [(0, output)]
    elif isinstance(output, (tuple, list)):
        found = [(i, t) for i, t in enumerate(output[:4]) if isinstance(t, torch.Tensor)]
    else:
        logits = getattr(output, "logits", None)
        found = [(-1, logits)] if isinstance(logits, torch.Tensor) else []
    return [(i, t) for i, t in found if t.is_floating_point() and t.dim() >= 1 and t.numel() >= 2]


class _Link:
    """What the training loss made of one output (a model's output at one position)."""

    __slots__ = ("loss", "ignore", "multi", "mixed", "calls")

    def __init__(self, loss: str, ignore: int | None):
        self.loss, self.ignore = loss, ignore
        self.multi = False  # BCEWithLogits targets with a row holding several positives (read on the device)
        self.mixed = False  # fed to losses of different kinds (or ignore indices): nothing concluded
        self.calls = 0


class OutputLinkChecks(EvalOutputLooks, Check):
    name = "output_link"
    OUT_LOOKS = OUT_LOOKS

    def __init__(self, session: Any):
        super().__init__(session)
        self.train_looks: dict[int, int] = {}  # id(ModelInfo) -> checked training forwards remembered
        # id(ModelInfo) -> its latest checked training outputs: (position, ref, storage, numel)
        self.train_outs: dict[int, tuple[ModelInfo, list[tuple[int, Any, int | None, int]]]] = {}
        self.links: dict[tuple[int, int], _Link] = {}  # (id(ModelInfo), position) -> the loss it was trained by
        self.out_looks: dict[int, int] = {}
        self.out_hook = OneShotHook()
        # evaluation outputs remembered: (ref, storage, numel, model, position)
        self.outputs: list[tuple[Any, int | None, int, ModelInfo, int]] = []
        # scores made with another activation than the loss's: (ref, storage, model, where, activation, loss)
        self.softmaxed: list[tuple[Any, int | None, ModelInfo, str, str, str]] = []
        self.judged: set[str] = set()  # call sites already judged (one read each)
        self.loss_looks = 0
        self.sum_phases = 0
        self.in_phase = False  # the additions' wrappers follow this evaluation phase
        # half-precision sums followed: id -> (ref, float64 shadow, terms, where)
        self.sums: dict[int, list[Any]] = {}

    # -- training: which loss each output feeds ---------------------------------------------------
    def on_forward_end(self, info: ModelInfo, output: Any, failed: bool) -> None:
        if failed or output is None or not info.module.training or not torch.is_grad_enabled():
            return
        n = self.train_looks.get(id(info), 0)
        if n >= TRAIN_LOOKS:
            self.train_outs.pop(id(info), None)  # (a stale address could match a later tensor's)
            return
        self.train_looks[id(info)] = n + 1
        self.train_outs[id(info)] = (info, [(pos, weakref.ref(t), storage_ptr(t), t.numel())
                                            for pos, t in model_outputs(output)])

    def on_checked_loss(self, name: str, inp: Any, target: Any, args: tuple, kwargs: dict) -> None:
        if not self.train_outs or not isinstance(inp, torch.Tensor):
            return
        storage = storage_ptr(inp)
        if storage is None:
            return
        for info, outs in self.train_outs.values():
            for pos, ref, out_storage, numel in outs:
                if out_storage != storage or numel != inp.numel() or ref() is None:
                    continue
                self._link(info, pos, name, inp, target, args, kwargs)
                return

    def _link(self, info: ModelInfo, pos: int, name: str, inp: torch.Tensor, target: Any, args: tuple,
              kwargs: dict) -> None:
        ignore = ignore_index_of(args, kwargs) if name in INDEX_LOSSES else None
        key = (id(info), pos)
        link = self.links.get(key)
        if link is None:
            link = self.links[key] = _Link(name, ignore)
        elif link.loss != name or link.ignore != ignore:
            link.mixed = True
        link.calls += 1
        if name == LOGIT_LOSS and not link.multi and link.calls <= 4 and isinstance(target, torch.Tensor) \
                and target.dim() >= 2 and target.shape[-1] >= 2 and target.shape == inp.shape:
            positives = ((target.detach() > 0.5).sum(-1) >= 2).any()

            def multi(values: list[Any], link: _Link = link) -> None:
                link.multi = link.multi or bool(values[0])

            self.s.defer(positives.reshape(1), multi)

    def _trained(self, info: ModelInfo, pos: int) -> _Link | None:
        link = self.links.get((id(info), pos))
        return None if link is None or link.mixed else link

    # -- evaluation: the outputs (EvalOutputLooks) -------------------------------------------------
    def eval_started(self) -> None:
        if self.sum_phases < SUM_PHASES and not self.in_phase:
            self.sum_phases += 1
            self.in_phase = True
            _ADDS.listen(self)
        if self.links and any(self.out_looks.get(id(m), 0) < OUT_LOOKS for m in self.s.models.values()):
            self._wrap()

    def on_train_forward(self, info: ModelInfo, args: tuple) -> None:
        if self.in_phase or self in _COMPARES.listening:  # training resumed: the evaluation is over
            self._unwrap()

    def eval_looks_left(self, info: ModelInfo) -> bool:
        return any(key[0] == id(info) for key in self.links) and super().eval_looks_left(info)

    def _eval(self, info: ModelInfo) -> None:
        if not any(key[0] == id(info) for key in self.links):
            return  # no loss linked to this model's outputs: nothing to read them against
        super()._eval(info)

    def _remember(self, info: ModelInfo):
        def hook(module: Any, args: tuple, output: Any) -> None:
            if not self.out_hook.fired():
                return
            try:
                for pos, t in model_outputs(output):
                    if self._trained(info, pos) is not None:
                        self.outputs = self.outputs[-3:] + [(weakref.ref(t), storage_ptr(t), t.numel(), info, pos)]
                        self._wrap()
            except Exception as exc:  # a guard never breaks the user's forward
                self.s.check_failed(self, exc)

        return hook

    def _output(self, x: Any) -> tuple[ModelInfo, int, _Link] | None:
        """(model, position, link) of the remembered evaluation output ``x`` is (or a view of: its memory)."""
        if not isinstance(x, torch.Tensor) or not self.outputs:
            return None
        storage = storage_ptr(x)
        for ref, out_storage, numel, info, pos in reversed(self.outputs):
            t = ref()
            if t is not None and (t is x or (storage and storage == out_storage and x.numel() <= numel)):
                link = self._trained(info, pos)
                if link is not None:
                    return info, pos, link
        return None

    def _wrap(self) -> None:
        from overt.guards import patches, softmax_dim

        _COMPARES.listen(self)
        softmax_dim._WRAPPERS.listen(self)
        ignoring = any(not link.mixed and link.loss in INDEX_LOSSES and link.ignore != -100
                       for link in self.links.values())
        if ignoring and self.loss_looks < LOSS_LOOKS:
            patches.eval_losses(self, True)

    def _unwrap(self) -> None:
        from overt.guards import patches, softmax_dim

        self.outputs, self.softmaxed = [], []
        _COMPARES.stop(self)
        softmax_dim._WRAPPERS.stop(self)
        patches.eval_losses(self, False)
        if self.in_phase:
            self.in_phase = False
            _ADDS.stop(self)
            self._judge_sums()

    # -- logits compared with 0.5; multi-label scores softmaxed, then thresholded ------------------
    def called(self, name: str, args: tuple, kwargs: dict, out: Any) -> None:
        """A wrapped comparison, ``round`` or ``sigmoid`` was called (``out``: its result)."""
        if name == "round":
            if not kwargs.get("decimals"):
                self.rounded(args[0])
        elif name == "sigmoid":
            self.sigmoid_called(args[0], out)
        elif len(args) >= 2:
            self.compared(name, args[0], args[1])

    def compared(self, name: str, a: Any, b: Any) -> None:
        tensor, number = (a, b) if isinstance(a, torch.Tensor) else (b, a)
        if not isinstance(tensor, torch.Tensor) or isinstance(number, (torch.Tensor, bool)) \
                or not isinstance(number, (int, float)):
            return
        found = self._output(tensor) if number == 0.5 else None
        if found is not None and found[2].loss in _LINKS:
            loc = user_location(3) or ""
            if loc not in self.judged:
                self.judged.add(loc)
                self._logits_thresholded(f"compared with 0.5 ({loc or name})", tensor, found[0], found[2], loc)
            return
        soft = self._softmaxed(tensor) if self.softmaxed and 0 < number < 1 else None
        if soft is not None:
            loc = user_location(3) or ""
            if loc in self.judged:
                return
            self.judged.add(loc)
            info, where, activation, loss = soft
            if activation == "softmax":
                what = (f"the evaluation outputs of {info.name} were trained by BCEWithLogitsLoss on multi-label "
                        "targets (rows with several positive labels, seen on the checked steps): each label is an "
                        f"independent sigmoid. Here they go through a softmax over the labels ({where}) and are then "
                        f"compared with {number:g} ({loc or name}): the labels of a sample now compete for one unit of "
                        "probability, so a sample with k true labels scores at most about 1/k on each and loses most "
                        "of its positive predictions")
                fix = ("score multi-label outputs with torch.sigmoid(logits) (what the loss trained), not softmax over "
                       "the labels; a softmax fits only outputs trained with cross_entropy (one label per sample).")
            else:
                what = (f"the evaluation outputs of {info.name} were trained by {loss}: a softmax over the classes, "
                        "where only the differences between a sample's logits mean anything. Here they go through a "
                        f"sigmoid, class by class ({where}), and are then compared with {number:g} ({loc or name}): "
                        "each class's score is read alone, as if the classes were independent labels, so the "
                        "decisions depend on the logits' offset, not on how likely each class is")
                fix = ("score the classes with torch.softmax(logits, dim=-1) (what the loss trained) before "
                       "thresholding, or take the most likely class with argmax(dim=-1); a sigmoid per output fits "
                       "only outputs trained with BCEWithLogitsLoss.")
            self.s.report(
                "scores-activation-mismatch",
                f"{what}, and every thresholded or per-class metric is wrong while nothing fails.", fix=fix,
                where=f"the {activation} at {where}" if where else f"{info.name}'s evaluation outputs",
                key=f"activation:{where}")

    def rounded(self, x: Any) -> None:
        """``torch.round(out)``/``out.round()``: a 0/1 decision made by rounding, right for probabilities only."""
        found = self._output(x)
        if found is None or found[2].loss not in _LINKS:
            return
        loc = user_location(3) or ""
        if loc not in self.judged:
            self.judged.add(loc)
            self._logits_thresholded(f"rounded to 0 or 1 ({loc or 'round'}), which thresholds them at 0.5,", x,
                                     found[0], found[2], loc)

    def _logits_thresholded(self, how: str, tensor: torch.Tensor, info: ModelInfo, link: _Link, loc: str) -> None:
        low, high = (float(v) for v in torch.stack([*torch.aminmax(tensor.detach().float())]).tolist())
        if low >= 0.0 and high <= 1.0:
            return  # values all in [0, 1]: the model may apply the sigmoid itself in eval mode
        if link.loss == LOGIT_LOSS:
            taken = "BCEWithLogitsLoss (binary_cross_entropy_with_logits), took them as logits"
            why = ("0.5 is the threshold of a probability, and a logit of 0.5 is a probability of 0.62, so every "
                   "prediction with a probability between 0.5 and 0.62 is counted as negative")
            fix = ("apply the sigmoid first (torch.sigmoid(logits) > 0.5), or threshold the logits at 0 (logits > 0), "
                   "which is the same decision.")
        else:
            what = "logits" if link.loss == "cross_entropy" else "log-probabilities"
            taken = f"{link.loss}, took them as {what} over the classes"
            why = (f"0.5 is the threshold of a probability, and a class's {what[:-1]} says nothing on its own (a "
                   "logit counts only against the other classes' logits, a log-probability is at most 0), so the "
                   "decisions depend on the scale of the outputs, not on which class is most likely")
            fix = ("compare probabilities: torch.softmax(logits, dim=-1)[:, k] > 0.5 (or .exp() of log-probabilities), "
                   "or take the most likely class with argmax(dim=-1).")
        self.s.report(
            "logits-thresholded-as-probabilities",
            f"the evaluation outputs of {info.name} are {how} but its training loss, {taken} (they range from "
            f"{low:.3g} to {high:.3g} here): {why}, and the recall, F1 and accuracy reported are wrong while nothing "
            "fails.", fix=fix,
            where=f"the comparison at {loc}" if loc else f"{info.name}'s evaluation outputs", key=f"logit05:{loc}")

    def softmax_called(self, name: str, args: tuple, kwargs: dict, out: Any) -> None:
        x = args[0]
        if not isinstance(x, torch.Tensor) or x.dim() < 2 or not isinstance(out, torch.Tensor):
            return
        dim = kwargs.get("dim", args[1] if len(args) > 1 else None)
        if not isinstance(dim, int) or (dim + x.dim() if dim < 0 else dim) != x.dim() - 1:
            return  # not over the last (label) dimension
        found = self._output(x)
        if found is None or found[2].loss != LOGIT_LOSS or not found[2].multi:
            return
        self.softmaxed = self.softmaxed[-3:] + [(weakref.ref(out), storage_ptr(out), found[0], user_location(3) or "",
                                                 "softmax", LOGIT_LOSS)]

    def sigmoid_called(self, x: Any, out: Any) -> None:
        """``torch.sigmoid(out)`` of outputs trained by cross_entropy/nll_loss (a softmax over the classes)."""
        if not isinstance(out, torch.Tensor):
            return
        found = self._output(x)
        if found is None or found[2].loss not in INDEX_LOSSES:
            return
        self.softmaxed = self.softmaxed[-3:] + [(weakref.ref(out), storage_ptr(out), found[0], user_location(3) or "",
                                                 "sigmoid", found[2].loss)]

    def _softmaxed(self, x: torch.Tensor) -> tuple[ModelInfo, str, str, str] | None:
        storage = storage_ptr(x)
        for ref, s_storage, info, where, activation, loss in reversed(self.softmaxed):
            t = ref()
            if t is not None and (t is x or (storage and storage == s_storage)):
                return info, where, activation, loss
        return None

    # -- an evaluation loss that scores what training ignored --------------------------------------
    def eval_loss(self, name: str, args: tuple, kwargs: dict) -> None:
        if name not in INDEX_LOSSES or self.loss_looks >= LOSS_LOOKS:
            return
        inp = args[0] if args else kwargs.get("input")
        target = args[1] if len(args) > 1 else kwargs.get("target")
        if not isinstance(target, torch.Tensor) or target.is_floating_point():
            return
        reduction = kwargs.get("reduction", args[6] if len(args) > 6 else "mean")
        if reduction == "none":
            return  # per-position values: a mask may still be applied to them
        found = self._output(inp)
        if found is None or found[2].loss not in INDEX_LOSSES or found[2].ignore == -100:
            return
        info, _, link = found
        ignore = ignore_index_of(args, kwargs)
        loc = user_location(4) or ""
        if ignore == link.ignore or loc in self.judged:
            return
        self.judged.add(loc)
        self.loss_looks += 1
        share = float((target == link.ignore).float().mean())
        if share <= 0.0:
            return
        shown = "PyTorch's default -100" if ignore == -100 else str(ignore)
        self.s.report(
            "eval-loss-scores-ignored",
            f"the training loss of {info.name} ({link.loss}) ignores the index {link.ignore} (ignore_index="
            f"{link.ignore}: padding, or positions without a label), but this evaluation {name} on its outputs "
            f"({loc or name}) ignores {shown}, and {share:.1%} of its targets are {link.ignore}: the evaluation loss "
            "(and a perplexity or accuracy computed from it) also scores the positions training never learned, so "
            "the number reported is not the model's on the real tokens and moves with the amount of padding.",
            fix=f"pass the same ignore_index={link.ignore} to the evaluation loss (and count only the targets that "
                f"are not {link.ignore} when dividing a sum).",
            where=f"the {name} at {loc}" if loc else f"{info.name}'s evaluation loss", key=f"ignored:{loc}")

    # -- sums kept in half precision ---------------------------------------------------------------
    def before_add(self, acc: torch.Tensor, other: Any, alpha: Any) -> None:
        if acc.requires_grad or acc.numel() > SUM_ELEMENTS or acc.dtype not in LOW:
            return
        if isinstance(other, torch.Tensor):
            if other.requires_grad or other.numel() > acc.numel() or other.is_complex():
                return
            term = other.detach().double()
        elif isinstance(other, (int, float)) and not isinstance(other, bool):
            term = float(other)
        else:
            return
        if alpha is not None:
            term = term * alpha
        entry = self.sums.get(id(acc))
        if entry is not None and entry[0]() is not acc:
            entry = None
        if entry is None:
            if len(self.sums) >= TRACKED:
                self.sums = {k: v for k, v in self.sums.items() if v[0]() is not None and v[2] > 1}
                if len(self.sums) >= TRACKED:
                    return
            entry = self.sums[id(acc)] = [weakref.ref(acc), acc.detach().double().clone(), 0, user_location(3) or ""]
        entry[1].add_(term)
        entry[2] += 1

    def _judge_sums(self) -> None:
        sums, self.sums = self.sums, {}
        for ref, shadow, terms, loc in sums.values():
            acc = ref()
            if acc is None or terms < SUM_TERMS or loc in self.judged or acc.shape != shadow.shape:
                continue
            kept, true = (v.reshape(-1).tolist() for v in (acc.detach().double(), shadow))
            worst = max(range(len(true)), key=lambda i: abs(kept[i] - true[i]))
            off = abs(kept[worst] - true[worst])
            if off <= 0.5 or off <= RELATIVE * abs(true[worst]):
                continue
            self.judged.add(loc)
            dtype = str(acc.dtype).replace("torch.", "")
            self.s.report(
                "metric-summed-in-low-precision",
                f"a sum kept in {dtype} ({loc or 'an in-place addition'}) in evaluation holds {kept[worst]:.6g} after "
                f"{terms} additions, while the same terms add up to {true[worst]:.6g}: {dtype} keeps "
                f"{8 if acc.dtype == torch.bfloat16 else 11} significant bits, so past {EXACT[acc.dtype]} it can no "
                "longer grow by 1 and every small "
                "term is rounded away; a count of correct predictions stops counting while its denominator keeps "
                "growing, and the accuracy or mean loss reported is wrong while nothing fails.",
                fix="keep evaluation sums and counts in float32/float64 or as Python numbers (correct += "
                    "(pred == y).sum().item(), or torch.zeros((), dtype=torch.float32)), whatever the model's dtype.",
                where=f"the sum at {loc}" if loc else "an evaluation sum", key=f"lowsum:{loc}")

    def end_of_run(self) -> None:
        self._unwrap()

    def remove_hooks(self) -> None:
        from overt.guards import patches, softmax_dim

        _COMPARES.stop(self)
        softmax_dim._WRAPPERS.stop(self)
        patches.eval_losses(self, False)
        _ADDS.stop(self)
        self.out_hook.remove()


_SHOWN = {"__gt__": ">", "__ge__": ">=", "__lt__": "<", "__le__": "<="}


def _watched(orig: Any, name: str) -> Any:
    """A comparison, ``round`` or ``sigmoid`` whose calls on remembered evaluation outputs are shown to the
    listening checks (:meth:`OutputLinkChecks.called`)."""
    shown = _SHOWN.get(name, name)

    @functools.wraps(orig)
    def watched(*args: Any, **kwargs: Any) -> Any:
        out = orig(*args, **kwargs)
        if args and _COMPARES.listening and not compiling() and not from_torch(sys._getframe(1)):
            for check in _COMPARES.listening:
                if check.outputs or check.softmaxed:
                    try:
                        check.called(shown, args, kwargs, out)
                    except Exception as exc:  # noqa: BLE001  never break the user's call over a check
                        check.s.check_failed(check, exc)
        return out

    return watched


def _addition(orig: Any, name: str) -> Any:
    @functools.wraps(orig)
    def add(*args: Any, **kwargs: Any) -> Any:
        if len(args) >= 2 and _ADDS.listening and isinstance(args[0], torch.Tensor) and args[0].dtype in LOW \
                and not compiling() and not from_torch(sys._getframe(1)):
            alpha = kwargs.get("alpha")
            for check in _ADDS.listening:
                try:
                    check.before_add(args[0], args[1], alpha)
                except Exception as exc:  # noqa: BLE001
                    check.s.check_failed(check, exc)
        return orig(*args, **kwargs)

    return add


# wrapped while some session's evaluation outputs are remembered / while an evaluation phase is followed
_COMPARES = Swapped(_COMPARISONS + _ROUNDS + _SIGMOIDS, lambda orig, owner, name: _watched(orig, name))
_ADDS = Swapped(_ADDITIONS, lambda orig, owner, name: _addition(orig, name))
