"""Guard on a normalising function of the script whose output follows its input's scale by a power that no
normalisation has (slug ``normaliser-not-scale-invariant``; issue 33, session 50: a normaliser normalises).

A function the script names for a normalisation (``utterance_mvn``, ``cmvn``, ``normalize``, ``standardise``,
``zscore`` ...) is one of two kinds: it divides by its input's own statistics (mean-variance normalisation per
utterance or per feature, min-max, peak, L2, a reward or advantage normalisation), and then multiplying its
input by a constant leaves its output unchanged (power 0); or it applies fixed statistics (a data set's mean and
standard deviation, a division by 255), and then its output about its mean moves with the input's scale (power
1).  An output that follows the input's scale by any other power is neither: a square root taken twice (power
1/2: utterances recorded at levels a million apart reach the model a thousand apart), a variance where the
standard deviation belongs (power -1), a square of it (-3).

What is looked at: on a checked training forward, the functions defined at module level in the running script
(``__main__``) whose name says it normalises (and not ``denormalize``, ``unnormalize``, an inverse, nor a power,
square-root or log normalisation, whose powers are their own; not a metric's name, such as a normalised DCG or
mutual information, which the metric probes wrap) and that write no module global are wrapped in the script's
namespace; the first call that returns a floating tensor of the shape of exactly one of its floating tensor arguments
is recorded (copies of its arguments), and the original function is put back at once (after :data:`TRIES` calls
when none fits).  After
the next optimizer step (or at the end of the run) it is called again (``no_grad``, as user code, the random
generators put back) with that argument scaled so that its smallest typical spread is 10, 20 and 40 (as in
:mod:`overt.guards.normscale`): a power law whose power is neither 0 nor 1 (each off by more than
:data:`MIN_POWER`, the two steps' powers within :data:`SAME_POWER` of each other) is reported.  Silent: a function
that raises, returns another shape or non-finite values, or whose output moves by no single power.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import io
import math
import re
import types
from typing import Any

import torch

from overt.guards.check import Check
from overt.guards.metricprobe import _writes_globals, metric_kind
from overt.guards.normscale import SCALES, _rms, _spread, _target, _with
from overt.guards.putback import RandomState
from overt.guards.rerun import rerun
from overt.guards.scriptspace import OneCallWrappers
from overt.guards.where import short_location, user_location

MIN_POWER = 0.25  # the power's distance from 0 and from 1 above which it is neither kind of normalisation
SAME_POWER = 0.15  # |k1 - k2| under which the output follows one power of the input's scale
MAX_ELEMENTS = 1 << 22
TRIES = 4  # calls of a wrapped function looked at for a recordable one; the script's function is put back after

_NAME = re.compile(r"(?:^|_)(?:c?mvn|normali[sz]\w*|standardi[sz]\w*|z_?score)", re.IGNORECASE)
_NOT = re.compile(r"^(?:de|un|inv)|inverse|power|sqrt|log|rank|quantile", re.IGNORECASE)


def normalising(name: str) -> bool:
    """Whether a function's name says it normalises its input (and is no inverse, power or log transform)."""
    return bool(_NAME.search(name)) and not _NOT.search(name)


class NormFunctionChecks(Check):
    name = "normfunc"

    def __init__(self, session: Any):
        super().__init__(session)
        self.script = OneCallWrappers(self, TRIES)
        self.calls: list[tuple[Any, str, tuple, dict, torch.Size, str]] = []

    def on_checked_forward(self, info: Any, args: tuple, light: bool) -> None:
        filename = self.script.grown()
        if filename is None:
            return
        for name, fn in list(self.script.namespace.items()):
            if name in self.script.looked or not isinstance(fn, types.FunctionType) or not normalising(name) \
                    or metric_kind(fn) is not None or fn.__code__.co_filename != filename \
                    or _writes_globals(fn.__code__):  # a normalised metric (NDCG, NMI) is the metric probes' own
                continue
            self.script.wrap(name, fn, functools.partial(self._record, fn, name))

    def _record(self, fn: Any, name: str, args: tuple, kwargs: dict, result: Any) -> bool:
        """Keep a call whose result is a floating tensor of a size to probe, with an input of its shape to scale."""
        if not (isinstance(result, torch.Tensor) and result.is_floating_point()
                and 32 <= result.numel() <= MAX_ELEMENTS and _target(args, kwargs, result.shape) is not None):
            return False
        copy = tuple(a.detach().clone() if isinstance(a, torch.Tensor) else a for a in args)
        kw = {k: v.detach().clone() if isinstance(v, torch.Tensor) else v for k, v in kwargs.items()}
        self.calls.append((fn, name, copy, kw, result.shape, user_location(3) or ""))
        return True

    def after_checked_step(self, oi: Any) -> None:
        if self.calls:
            self._judge()

    def end_of_run(self) -> None:
        self._judge()

    def _judge(self) -> None:
        calls, self.calls = self.calls, []
        for fn, name, args, kwargs, shape, at in calls:
            power = self._power(fn, args, kwargs, shape)
            if power is not None:
                self._report(fn, name, power, at)

    @staticmethod
    def _power(fn: Any, args: tuple, kwargs: dict, shape: torch.Size) -> float | None:
        where = _target(args, kwargs, shape)
        if where is None:
            return None
        x = args[where[1]] if where[0] == "a" else kwargs[where[1]]
        spread = _spread(x)
        if spread is None:
            return None
        state = RandomState([x.device])  # each call from the same draws
        try:
            with rerun(None, x.device), torch.no_grad(), contextlib.redirect_stdout(io.StringIO()):
                rms = []
                for s in SCALES:
                    a, k = _with(args, kwargs, where, x * (s / spread))
                    y = fn(*a, **k)
                    state.restore()
                    if not isinstance(y, torch.Tensor) or y.shape != shape or not bool(torch.isfinite(y).all()):
                        return None
                    rms.append(_rms(y - y.mean(0, keepdim=True)) if y.dim() > 0 and y.shape[0] > 1 else _rms(y))
        except Exception:  # noqa: BLE001  a function that cannot be called again on its own: nothing to judge
            return None
        if min(rms) <= 0 or not all(math.isfinite(r) for r in rms):
            return None
        k1, k2 = math.log2(rms[1] / rms[0]), math.log2(rms[2] / rms[1])
        if abs(k1 - k2) < SAME_POWER and abs(k2) > MIN_POWER and abs(k2 - 1) > MIN_POWER:
            return (k1 + k2) / 2
        return None

    def _report(self, fn: Any, name: str, power: float, at: str) -> None:
        code = fn.__code__
        try:
            src, start = inspect.getsourcelines(fn)
        except (OSError, TypeError):
            src, start = [], code.co_firstlineno
        line = short_location(code.co_filename, code.co_firstlineno)
        for i, text in enumerate(src):  # the returned expression: where the division is
            if text.strip().startswith("return"):
                line = short_location(code.co_filename, start + i)
        self.s.report(
            "normaliser-not-scale-invariant",
            f"{name}() (defined at {short_location(code.co_filename, code.co_firstlineno)}, called at "
            f"{at or 'the script'}) normalises by its name, but called again on its own input scaled twice and four "
            f"times, its output grew {2 ** power:.3g}x each time the input doubled: as the input's scale to the power "
            f"{power:+.2f}. A normalisation by the input's own statistics gives power 0 (the output does not depend "
            "on the input's scale), one by fixed statistics power 1; this is neither: it divides by something that "
            f"grows as the input's spread to the power {1 - power:.2f} (a standard deviation: 1; its square root "
            "taken again: 0.5; a variance: 2). Inputs recorded at different levels reach the model at different "
            "scales, which is what the normalisation was there to remove.",
            fix=f"divide the centred input by its standard deviation once (x / var.sqrt(), or x / std with std "
                f"already the root of the variance) in {name}()",
            where=line, key=f"fn:{name}")

    def remove_hooks(self) -> None:
        self.script.put_back()
        self.calls = []
