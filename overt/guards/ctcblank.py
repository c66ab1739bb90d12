"""Guard on a decoder whose blank is not the CTC loss's blank (slug ``decoder-blank-not-loss-blank``; issue 33).

An invariant of every program trained with a CTC loss: the class the loss was told is the blank
(``nn.CTCLoss(blank=b)``, ``F.ctc_loss(..., blank=b)``) is the class its decoder removes.  The model
learns to put class ``b`` wherever there is no symbol; a decoder written or built with another blank
(a ``GreedyDecoder(labels)`` left at its default ``blank_index=0`` while the label list puts the blank
last) drops a real symbol everywhere it is predicted and prints the blank between the others, so every
transcript and every error rate computed from it is wrong while the loss falls and nothing fails.

What is checked: on checked training steps a wrapper of ``F.ctc_loss`` (which ``nn.CTCLoss`` calls)
records the blank and the number of classes ``C`` of its log-probabilities (nothing else, no device
read).  Once such a loss was seen, an evaluation (a watched model switched to eval mode, or a ``no_grad``
block entered by the script) wraps the script's decoders: functions of ``__main__`` named like one
(``decode``, ``greedy``, ``transcribe``, ``ctc``, ``beam``, ``collapse``), and the methods so named (or
``__call__``) of classes defined in the script.  The first call of each that is given a floating tensor
whose last dimension is ``C`` (the model's frame scores) is recorded.  At the end of the run the call
is repeated, quietly and without gradients, with that tensor replaced by frames that all score one
class: once per class (a sample of them when ``C`` is large).  Frames that all hold the blank must
decode to nothing.  Reported when they decode to something while frames of another class ``k`` decode
to nothing: the decoder removes ``k``, not the loss's blank.  Silent when the premise is not met: no
CTC loss, losses with different blanks, a decoder that removes no class (it then is no blank-removing
decoder), an output that is not text, ids or lists of them, a call that raises or runs a module.
"""

from __future__ import annotations

import contextlib
import inspect
import io
import re
import sys
import types
from typing import Any, Callable

import torch

from overt.guards.aside import user_code
from overt.guards.check import Check
from overt.guards.where import short_location, user_location

#: name words of a decoding function or method
DECODER_WORDS = frozenset({"decode", "decoder", "decoding", "greedy", "transcribe", "transcription", "ctc",
                           "beam", "collapse"})
MAX_ALL = 128  # label sets up to this size are probed class by class; larger ones by a sample
SAMPLE = 16  # ... of this many classes besides the blank, 0 and C - 1
_MARK = "__overt_ctc_blank__"


def _words(name: str) -> set[str]:
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", name).lower()
    return {w for w in re.split(r"[_\W]+", spaced) if w}


def _decoderish(name: str) -> bool:
    return bool(_words(name) & DECODER_WORDS)


def size_of(out: Any) -> int | None:
    """How many symbols a decoder's output holds: characters of a string, elements of a tensor, the
    items of (nested) lists; None for anything else (no decoding we can read)."""
    if isinstance(out, str):
        return len(out)
    if isinstance(out, bool) or out is None:
        return None
    if isinstance(out, (int, float)):
        return 1
    if isinstance(out, torch.Tensor):
        return int(out.numel())
    if isinstance(out, (list, tuple)):
        total = 0
        for item in out:
            n = size_of(item)
            if n is None:
                return None
            total += n
        return total
    return None


def _frames(like: torch.Tensor, cls: int) -> torch.Tensor:
    """A tensor of ``like``'s shape, dtype and device whose every frame (last dimension) scores ``cls``
    highest: log-probabilities, or probabilities when ``like`` holds no negative value."""
    c = like.shape[-1]
    low = 0.01 / max(c - 1, 1)
    probs = torch.full(like.shape, low, dtype=torch.float32, device=like.device)
    probs[..., cls] = 0.99
    if bool((like >= 0).all()):
        return probs.to(like.dtype)
    return probs.log().to(like.dtype)


def _classes(c: int, blank: int) -> list[int]:
    if c <= MAX_ALL:
        return list(range(c))
    step = max(1, c // SAMPLE)
    return sorted({blank, 0, c - 1, *range(0, c, step)})


class _Call:
    __slots__ = ("fn", "name", "defined", "args", "kwargs", "slot", "loc")

    def __init__(self, fn: Callable, name: str, defined: str, args: tuple, kwargs: dict, slot: int | str,
                 loc: str | None):
        self.fn, self.name, self.defined = fn, name, defined
        self.args, self.kwargs, self.slot, self.loc = args, kwargs, slot, loc


class CtcBlankChecks(Check):
    name = "ctc_blank"

    def __init__(self, session: Any):
        super().__init__(session)
        #: (blank, classes, where) of the CTC loss seen on checked steps; None before, False when two disagree
        self.loss: tuple[int, int, str] | None | bool = None
        self.wrapped: dict[tuple[int, str], tuple[Any, str, Any, Any]] = {}  # (owner id, attr) -> (owner, attr,
        # original, wrapper)
        self.calls: dict[str, _Call] = {}
        self.seen = -1  # the script namespace's size when last looked at

    # -- the loss -------------------------------------------------------------------------------
    def on_ctc_loss(self, log_probs: Any, blank: Any) -> None:
        """An ``F.ctc_loss`` call on a checked training step."""
        if self.loss is False or not isinstance(log_probs, torch.Tensor) or log_probs.dim() < 2 \
                or not log_probs.is_floating_point() or isinstance(blank, bool) or not isinstance(blank, int):
            return
        c = int(log_probs.shape[-1])
        if not 0 <= blank < c:
            return
        if self.loss is None:
            self.loss = (blank, c, user_location(3) or "F.ctc_loss")
        elif self.loss[:2] != (blank, c):
            self.loss = False  # two conventions in one run: no one blank to hold a decoder to

    # -- the decoders ---------------------------------------------------------------------------
    def eval_started(self) -> None:
        """An evaluation began: wrap the script's decoders defined by now (once a CTC loss was seen)."""
        if not self.loss:
            return
        main = sys.modules.get("__main__")
        filename = getattr(main, "__file__", None)
        if main is None or not filename or len(main.__dict__) == self.seen:
            return
        self.seen = len(main.__dict__)
        for attr, value in list(main.__dict__.items()):
            inner = getattr(value, "__wrapped__", value)  # under the metric probe's wrapper (a "ctc_decode")
            if isinstance(value, types.FunctionType) and isinstance(inner, types.FunctionType) \
                    and _decoderish(attr) and self._ours(inner, filename) and not getattr(value, _MARK, False):
                self._wrap(main.__dict__, attr, value, attr, inner)
            elif isinstance(value, type) and value.__module__ == "__main__" \
                    and not issubclass(value, torch.nn.Module):
                whole = _decoderish(value.__name__)
                for name, fn in list(vars(value).items()):
                    if isinstance(fn, types.FunctionType) and self._ours(fn, filename) \
                            and (_decoderish(name) or (whole and name == "__call__")):
                        self._wrap(value, name, fn, f"{value.__name__}.{name}", fn)

    no_grad_entered = eval_started

    @staticmethod
    def _ours(fn: types.FunctionType, filename: str) -> bool:
        return fn.__code__.co_filename == filename and not getattr(fn, _MARK, False)

    def _wrap(self, owner: Any, attr: str, fn: types.FunctionType, shown: str, inner: types.FunctionType) -> None:
        """Put a recording wrapper of ``fn`` (the function itself, or a wrapper of ``inner``) in its place."""
        key = (id(owner), attr)
        if key in self.wrapped:
            return
        code = inner.__code__
        defined = short_location(code.co_filename, code.co_firstlineno)
        calls = self.calls
        classes = self.loss[1]  # type: ignore[index]

        def decoder(*args: Any, **kwargs: Any) -> Any:
            out = fn(*args, **kwargs)
            if shown not in calls:
                slot = _scores_slot(args, kwargs, classes)
                if slot is not None:
                    calls[shown] = _Call(inner, shown, defined, args, kwargs, slot, user_location(2))
            return out

        for a in ("__name__", "__qualname__", "__doc__", "__module__"):
            setattr(decoder, a, getattr(fn, a, None))
        setattr(decoder, _MARK, True)
        if isinstance(owner, dict):
            owner[attr] = decoder
        else:
            setattr(owner, attr, decoder)
        self.wrapped[key] = (owner, attr, fn, decoder)

    def remove_hooks(self) -> None:
        for owner, attr, fn, decoder in self.wrapped.values():
            if isinstance(owner, dict):
                if owner.get(attr) is decoder:
                    owner[attr] = fn
            elif vars(owner).get(attr) is decoder:
                setattr(owner, attr, fn)
        self.wrapped = {}

    # -- the probe ------------------------------------------------------------------------------
    def end_of_run(self) -> None:
        if not self.loss:
            return
        blank, classes, loss_at = self.loss  # type: ignore[misc]
        pending = list(self.calls.values())
        self.calls.clear()
        for call in pending:
            found = self._probe(call, blank, classes)
            if found is None:
                continue
            dropped, shown = found
            at = f" (called at {call.loc})" if call.loc else ""
            others = ", ".join(str(k) for k in dropped[:4])
            self.s.report(
                "decoder-blank-not-loss-blank",
                f"the decoder {call.name}() defined at {call.defined}{at} removes class {others}, not class "
                f"{blank}: frames that all score class {dropped[0]} decode to nothing, frames that all score class "
                f"{blank} decode to {shown}. The CTC loss at {loss_at} was given blank={blank} ({classes} classes): "
                f"the model learned to put class {blank} wherever there is no symbol, so this decoder prints the "
                f"blank between the symbols and drops every real class-{dropped[0]} symbol; every transcript and "
                "every error rate computed from it is wrong while the loss falls.",
                fix=f"give the decoder the loss's blank (e.g. GreedyDecoder(labels, blank_index={blank}), "
                    f"blank={blank}), from one definition both read (BLANK = labels.index('_') passed to "
                    "nn.CTCLoss and to the decoder), or put the blank where both defaults expect it",
                where=f"{call.name}() at {call.defined}", key=f"ctcblank:{call.defined}")

    def _probe(self, call: _Call, blank: int, classes: int) -> tuple[list[int], str] | None:
        """(classes the decoder removes, how it decodes all-blank frames) when it keeps the blank and
        removes some other class; else None."""
        scores = call.args[call.slot] if isinstance(call.slot, int) else call.kwargs[call.slot]
        sizes: dict[int, int] = {}
        shown = ""
        for k in [blank] + [c for c in _classes(classes, blank) if c != blank]:
            out = _quiet_call(call, _frames(scores, k))
            if out is _FAILED:
                return None
            n = size_of(out)
            if n is None:
                return None
            if k == blank:
                if n == 0:
                    return None  # the blank decodes to nothing: the decoder agrees with the loss
                shown = _short(out)
            sizes[k] = n
        dropped = [k for k, n in sizes.items() if n == 0]
        return (dropped, shown) if dropped else None


_FAILED = object()


def _quiet_call(call: _Call, scores: torch.Tensor) -> Any:
    """The recorded call repeated with ``scores`` in its score slot: quietly, without gradients;
    ``_FAILED`` when it raises or runs a module's forward (then it is no decoder of given scores)."""
    args, kwargs = list(call.args), dict(call.kwargs)
    if isinstance(call.slot, int):
        args[call.slot] = scores
    else:
        kwargs[call.slot] = scores
    ran = []
    handle = torch.nn.modules.module.register_module_forward_pre_hook(lambda m, a: ran.append(m) and None)
    sink = io.StringIO()
    try:
        with torch.no_grad(), contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink), user_code():
            out = call.fn(*args, **kwargs)
    except Exception:  # noqa: BLE001  the user's function on other values: no premise
        return _FAILED
    finally:
        handle.remove()
    return _FAILED if ran else out


def _scores_slot(args: tuple, kwargs: dict, classes: int) -> int | str | None:
    """The one argument that holds frame scores over ``classes`` classes (a floating tensor of 2 or 3
    dimensions, the last of size ``classes``), else None."""
    slots = [i for i, a in enumerate(args) if _scores(a, classes)]
    slots += [k for k, a in kwargs.items() if _scores(a, classes)]
    return slots[0] if len(slots) == 1 else None


def _scores(a: Any, classes: int) -> bool:
    return isinstance(a, torch.Tensor) and a.is_floating_point() and a.dim() in (2, 3) \
        and int(a.shape[-1]) == classes and a.numel() > 0


def _short(out: Any) -> str:
    text = repr(out)
    return text if len(text) <= 40 else text[:37] + "..."


def _wrapper(active: list, is_armed: Callable[[], bool], orig: Callable) -> Callable:
    signature = inspect.signature(orig)

    def ctc_loss(*args: Any, **kwargs: Any) -> Any:
        if active and is_armed() and not torch.compiler.is_compiling():
            try:
                bound = signature.bind(*args, **kwargs)
                log_probs = bound.arguments.get("log_probs")
                blank = bound.arguments.get("blank", 0)
            except TypeError:
                log_probs = blank = None
            for s in active:
                if s.armed and log_probs is not None:
                    try:
                        s.ctc_blank.on_ctc_loss(log_probs, blank)
                    except Exception as exc:  # never break the user's call over a check
                        s.check_failed(s.ctc_blank, exc)
        return orig(*args, **kwargs)

    for a in ("__name__", "__qualname__", "__doc__", "__module__"):
        setattr(ctc_loss, a, getattr(orig, a, None))
    return ctc_loss


def install(patch: Callable, active: list, is_armed: Callable[[], bool]) -> None:
    """Wrap ``F.ctc_loss`` with ``patch(owner, name, make)``; ``nn.CTCLoss`` calls it through ``F``."""
    import torch.nn.functional as F

    patch(F, "ctc_loss", lambda orig: _wrapper(active, is_armed, orig))
