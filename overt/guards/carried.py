"""Guard on evaluation batches fed the state of the batch before (slug ``eval-state-carried``).

An invariant of evaluating a model on a data set of samples: a batch's predictions depend on that
batch, not on the batches evaluated before it.  A recurrent model whose evaluation loop passes the
hidden state returned for one batch into the forward of the next (``logits, hidden = model(xb,
hidden)`` with no reset) breaks it: every batch starts from the previous batch's final state, so
predictions depend on the evaluation order and the model is evaluated in conditions it was never
trained in.

What is proven before anything is said: on consecutive batches of a DataLoader pass, an
evaluation forward (eval mode, or autograd off) receives a tensor that the same model's forward on
the previous batch returned (the same tensor, or a detached view of it), while on at least
:data:`MIN_TRAIN_PAIRS` consecutive training batches the same argument (matched by the name of
``forward``'s parameter) was never given the previous batch's output: a fresh tensor, or nothing (a
default of None): training starts every batch from a fresh state.  Carrying the state across
contiguous batches in training too -- stateful language-model training and evaluation over one
stream (pytorch/examples' word_language_model) -- is consistent and stays silent, as does generation
(its inputs do not come from a DataLoader) and an evaluation for which the guards saw no consecutive
training batches (no evidence: silence).

Cost: a one-shot forward hook on the hooked training forwards of the warm-up and on the first
:data:`LOOKS` evaluation forwards of each model, comparing tensor identities and storage
addresses on the host.  No device value is read.
"""

from __future__ import annotations

import inspect
import weakref
from typing import TYPE_CHECKING, Any

import torch

from overt.guards.check import Check
from overt.guards.oneshot import OneShotHook
from overt.guards.watched import storage_ptr
from overt.guards.where import user_location

if TYPE_CHECKING:
    from overt.guards.watched import ModelInfo

LOOKS = 8  # evaluation forwards looked at per model
TRAIN_LOOKS = 8  # training forwards looked at per model
KEEP_NUMEL = 1 << 20  # outputs up to this many elements are kept until the next look
MIN_TRAIN_PAIRS = 2  # consecutive training batches seen starting fresh, before evaluation is judged


def _flat(args: tuple, kwargs: dict, names: list[str]) -> list[tuple[str, torch.Tensor]]:
    """(argument, tensor) of a forward's tensor arguments, by the name of ``forward``'s parameter (``names``,
    positional ones in order; else ``"argument N"``), nested one level in tuples and lists (an LSTM's
    ``(h, c)``: ``"hidden.0"``), so that a state passed by position and one passed by keyword are one."""
    out: list[tuple[str, torch.Tensor]] = []
    items = [(names[i] if i < len(names) else f"argument {i + 1}", a) for i, a in enumerate(args[:8])]
    items += list(kwargs.items())[:8]
    for key, value in items:
        if isinstance(value, torch.Tensor):
            out.append((key, value))
        elif isinstance(value, (tuple, list)):
            out.extend((f"{key}.{j}", v) for j, v in enumerate(value[:4]) if isinstance(v, torch.Tensor))
    return out


def _positional_names(module: Any) -> list[str]:
    try:
        params = inspect.signature(module.forward).parameters.values()
    except (TypeError, ValueError):
        return []
    return [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]


def _outputs(output: Any) -> list[torch.Tensor]:
    if isinstance(output, torch.Tensor):
        return [output]
    if isinstance(output, (tuple, list)):
        out: list[torch.Tensor] = []
        for v in output[:8]:
            if isinstance(v, torch.Tensor):
                out.append(v)
            elif isinstance(v, (tuple, list)):
                out.extend(t for t in v[:4] if isinstance(t, torch.Tensor))
        return out
    return []


class _Kept:
    """A strong reference that reads like a weak one (``kept()`` is the tensor)."""

    __slots__ = ("t",)

    def __init__(self, t: torch.Tensor):
        self.t = t

    def __call__(self) -> torch.Tensor:
        return self.t


class _Seen:
    """What one watched model's last looked-at forward returned, and the evidence so far."""

    __slots__ = ("forward", "batch", "training", "outs", "train_pairs", "train_carried", "looks", "train_looks",
                 "names")

    def __init__(self) -> None:
        self.forward = -1  # the model's forward count at the last looked-at forward
        self.batch: int | None = None  # the DataLoader batch index then
        self.training = True
        self.outs: list[tuple[Any, int | None, tuple[int, ...]]] = []  # (weakref, storage, shape) of its outputs
        self.train_pairs = 0  # consecutive training batches seen
        self.train_carried: set[str] = set()  # arguments carried from batch to batch in training
        self.names: list[str] | None = None  # the positional parameters of the model's forward
        self.looks = 0
        self.train_looks = 0


class CarriedStateChecks(Check):
    name = "carried"

    def __init__(self, session: Any):
        super().__init__(session)
        self.seen: dict[int, _Seen] = {}  # id(ModelInfo) -> evidence
        self.hook = OneShotHook()

    # -- which forwards are looked at ----------------------------------------------------------
    def on_checked_forward(self, info: ModelInfo, args: tuple, light: bool) -> None:
        st = self._of(info)
        if st.train_looks < TRAIN_LOOKS:
            st.train_looks += 1
            self._place(info, st)

    def on_eval_forward(self, info: ModelInfo, args: tuple) -> None:
        self._eval(info)

    def on_no_grad_forward(self, info: ModelInfo) -> None:
        self._eval(info)

    def eval_looks_left(self, info: ModelInfo) -> bool:
        st = self.seen.get(id(info))
        return st is not None and st.looks < LOOKS and st.train_pairs >= MIN_TRAIN_PAIRS \
            and not self.s.reporter.has("eval-state-carried", info.name)

    def _eval(self, info: ModelInfo) -> None:
        st = self._of(info)
        if st.looks >= LOOKS or st.train_pairs < MIN_TRAIN_PAIRS or self.s.reporter.has("eval-state-carried",
                                                                                        info.name):
            return  # no consecutive training batches seen: nothing to compare the evaluation with
        st.looks += 1
        self._place(info, st)

    def _of(self, info: ModelInfo) -> _Seen:
        st = self.seen.get(id(info))
        if st is None:
            st = self.seen[id(info)] = _Seen()
        return st

    def _place(self, info: ModelInfo, st: _Seen) -> None:
        self.hook.clear_stale()
        if self.hook.pending:
            return
        self.hook.place(info.module, self._after(info, st, info.forwards), with_kwargs=True)

    def _after(self, info: ModelInfo, st: _Seen, forward: int):
        def hook(module: Any, args: tuple, kwargs: dict, output: Any) -> None:
            if not self.hook.fired():
                return
            try:
                self._look(info, st, forward, args, kwargs, output)
            except Exception as exc:  # a guard never breaks the user's forward
                self.s.check_failed(self, exc)

        return hook

    # -- the judgement -------------------------------------------------------------------------
    def _look(self, info: ModelInfo, st: _Seen, forward: int, args: tuple, kwargs: dict, output: Any) -> None:
        training = info.module.training and torch.is_grad_enabled()
        batch = self.s.batch_index
        consecutive = (st.forward == forward - 1 and st.training == training and batch is not None
                       and st.batch is not None and batch == st.batch + 1)
        if st.names is None:
            st.names = _positional_names(info.module)
        if consecutive:
            carried = self._carried(st, _flat(args, kwargs, st.names))
            if training:  # a state given fresh (or not given: a default of None) does not count as carried
                st.train_carried.update(carried)
                st.train_pairs += 1
            else:
                fresh_in_training = [key for key in carried if key not in st.train_carried]
                if fresh_in_training and st.train_pairs >= MIN_TRAIN_PAIRS:
                    self._report(info, fresh_in_training[0], batch)
        st.forward, st.batch, st.training = forward, batch, training
        # small outputs (a recurrent state) are kept, detached, until the next look: a state the loop
        # detaches (``h.detach()``) frees the returned tensor but shares its memory, which stays this
        # tensor's while it is kept; large ones (logits) are only referenced weakly
        st.outs = [(_Kept(t.detach()) if t.numel() <= KEEP_NUMEL else weakref.ref(t), storage_ptr(t), tuple(t.shape))
                   for t in _outputs(output)]

    @staticmethod
    def _carried(st: _Seen, flat: list[tuple[str, torch.Tensor]]) -> list[str]:
        """The argument positions given a tensor the previous forward returned (or a view of it)."""
        live = [(ref(), storage, shape) for ref, storage, shape in st.outs]
        live = [(t, storage, shape) for t, storage, shape in live if t is not None]  # alive: its memory is its own
        found = []
        for key, a in flat:
            for t, storage, shape in live:
                if a is t or (storage is not None and storage != 0 and storage_ptr(a) == storage
                              and tuple(a.shape) == shape):
                    found.append(key)
                    break
        return found

    def _report(self, info: ModelInfo, key: str, batch: int) -> None:
        name = _argument_name(key)
        loc = user_location(3)
        self.s.report(
            "eval-state-carried",
            f"in evaluation, {info.name} is given as {name} the tensor its forward on the previous batch returned "
            f"(batch {batch} gets the state batch {batch - 1} ended with), while every training batch started "
            "from a fresh one: each evaluation batch's predictions depend on the batches before it and on their "
            "order, and the model is evaluated in a condition it was never trained in.",
            fix="start every evaluation batch from a fresh state, as training does (e.g. hidden = "
            "model.init_hidden(len(xb)) inside the evaluation loop); if the batches are one contiguous stream "
            "(stateful sequence evaluation), carry the detached state across training batches too.",
            where=f"{info.name}({name}) at {loc}" if loc else f"{info.name} forward, evaluation", key=info.name,
        )

    def remove_hooks(self) -> None:
        self.hook.remove()
        for st in self.seen.values():
            st.outs = []


def _argument_name(key: str) -> str:
    """``'hidden'``, ``'state' (element 0)``."""
    head, _, rest = key.partition(".")
    return f"'{head}'" + (f" (element {rest})" if rest else "")
