"""Guard on an encoding function of the script whose paired decoding function does not give the data back (slug
``inverse-transform-not-inverse``, widened from methods to the script's functions; issue 33, session 51's w339).

A program that defines both directions of a transform of its targets -- ``encode_landm``/``decode_landm``,
``encode``/``decode``, ``to_target``/``from_target``, ``boxes_to_deltas``/``deltas_to_boxes``,
``normalize_y``/``denormalize_y``, ``f``/``inverse_f`` -- trains the model in the encoded space and reads its
outputs through the decoder, so decoding what the encoder made of the program's own data gives that data back:
``decode(encode(y, *context), *context) == y``, where the context (prior boxes, variances, statistics) is what the
two functions share by parameter name.  A floor division where a division belongs, a missing pair of parentheses
(``y // v * p`` for ``y / (v * p)``), a variance used on one side and a standard deviation on the other: the
targets the network learns are not the ones the decoder reads, and every prediction is put back wrong, with no
error.

What is looked at: on a checked training forward, module-level functions of the running script (``__main__``)
whose name pairs with another of its functions as an encoding with its decoding (and that write no module
global) are wrapped in the script's namespace; the first call whose first argument is a floating tensor (or
array) of 16 or more elements and whose result is floating is kept, and the script's own function is put back at
once (after :data:`TRIES` calls when none fits).  After the next optimizer step (or at the end of the run) the
decoder is called (``no_grad``, as user code, the random generators put back) on that result, its other
parameters given the encoder's arguments of the same name (or, when the two have as many parameters and names do
not match, of the same position), and once on a zero code (the decoder's origin).  Reported when at least half of
the elements differ from the input by more than 1e-4 of their scale, and the round trip loses the typical
element's displacement from the decoder's origin: the median of ``|decode(encode(y)) - y| / |y - decode(0)|``
is :data:`LOSS_SHARE` or more.  Silent, because the premise cannot be proven there: a decoder with a parameter
the encoder does not give, a result of another shape than ``y``, an integer code (class bins), encodings lossy by
design (quantisers, clamps, bins: their round trip keeps each element within a grid step, far less than its
displacement; ``quantize``/``dequantize`` pairs are not looked at), and encoders that raise when called again.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import io
import re
import types
from typing import Any

import numpy as np
import torch
from torch.nn.modules.module import register_module_forward_pre_hook

from overt.guards.check import Check
from overt.guards.metricprobe import _writes_globals
from overt.guards.rerun import rerun
from overt.guards.scriptspace import OneCallWrappers
from overt.guards.where import short_location, user_location

MIN_ELEMENTS = 16
TOL = 1e-4
FAIL_SHARE = 0.5  # share of elements off by more than TOL of their scale
LOSS_SHARE = 0.5  # median share of an element's displacement from the decoder's origin the round trip loses
TRIES = 4  # calls of a wrapped encoder looked at for a recordable one
MAX_ELEMENTS = 1 << 22

_SWAPS = (("encode", "decode"), ("encoding", "decoding"), ("normalize", "denormalize"),
          ("normalise", "denormalise"), ("normalize", "unnormalize"), ("normalise", "unnormalise"),
          ("standardize", "destandardize"), ("standardise", "destandardise"), ("scale", "unscale"),
          ("norm", "denorm"), ("transform", "inverse_transform"))
_LOSSY = re.compile(r"quanti|round|bin|discreti|clip|clamp|hash|compress|mask", re.IGNORECASE)


def _decoder_names(name: str) -> list[str]:
    """Names the decoder of an encoding function called ``name`` would have."""
    out = [f"inverse_{name}", f"inv_{name}", f"{name}_inverse", f"{name}_inv"]
    parts = name.split("_")
    lowered = [p.lower() for p in parts]
    for a, b in _SWAPS:
        if a in lowered:
            for i, p in enumerate(lowered):
                if p == a:
                    out.append("_".join(parts[:i] + [b] + parts[i + 1:]))
    if len(parts) >= 2 and parts[0] == "to":
        out.append("_".join(["from"] + parts[1:]))
    if "to" in parts[1:-1]:
        i = parts.index("to", 1)
        out.append("_".join(parts[i + 1:] + ["to"] + parts[:i]))
    return [n for n in out if n != name]


def _own(fn: Any, filename: str) -> Any:
    """The script's own function ``fn`` is, or wraps (another check's wrapper made with ``functools.wraps``)."""
    for _ in range(3):
        if not isinstance(fn, types.FunctionType):
            return None
        if fn.__code__.co_filename == filename:
            return fn
        fn = getattr(fn, "__wrapped__", None)
    return None


def _tensor(v: Any) -> torch.Tensor | None:
    if isinstance(v, torch.Tensor) and v.is_floating_point():
        return v.detach()
    if isinstance(v, np.ndarray) and v.dtype.kind == "f":
        return torch.from_numpy(np.array(v, copy=True))
    return None


def _copy(v: Any) -> Any:
    if isinstance(v, torch.Tensor):
        return v.detach().clone()
    if isinstance(v, np.ndarray):
        return np.array(v, copy=True)
    return v


def _decoder_call(enc: Any, dec: Any, bound: inspect.BoundArguments) -> dict | None:
    """The decoder's arguments after its first, from the encoder's bound ones: by name, else by position when the
    two have as many parameters; None when one cannot be given."""
    try:
        dparams = list(inspect.signature(dec).parameters.values())
        eparams = list(inspect.signature(enc).parameters.values())
    except (TypeError, ValueError):
        return None
    plain = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.POSITIONAL_ONLY,
             inspect.Parameter.KEYWORD_ONLY)
    if not dparams or any(p.kind not in plain for p in dparams + eparams) \
            or dparams[0].kind == inspect.Parameter.KEYWORD_ONLY:
        return None
    given = bound.arguments
    kwargs = {}
    for i, p in enumerate(dparams[1:], start=1):
        if p.name in given and p.name != eparams[0].name:
            kwargs[p.name] = given[p.name]
        elif len(dparams) == len(eparams) and eparams[i].name in given:
            kwargs[p.name] = given[eparams[i].name]
        elif p.default is inspect.Parameter.empty:
            return None
    return kwargs


class RoundTripFunctionChecks(Check):
    name = "roundfunc"

    def __init__(self, session: Any):
        super().__init__(session)
        self.script = OneCallWrappers(self, TRIES)
        self.calls: list[tuple[str, Any, str, Any, tuple, dict, Any, str]] = []

    def on_checked_forward(self, info: Any, args: tuple, light: bool) -> None:
        filename = self.script.grown()
        if filename is None:
            return
        namespace = self.script.namespace
        for name, found in list(namespace.items()):
            fn = _own(found, filename)
            if name in self.script.looked or fn is None or _LOSSY.search(name):
                continue
            dec = next((d for d in (_own(namespace[n], filename) for n in _decoder_names(name) if n in namespace)
                        if d is not None), None)
            if dec is None or _writes_globals(fn.__code__) or _writes_globals(dec.__code__):
                continue
            self.script.wrap(name, found, functools.partial(self._record, name, found, dec))

    def _record(self, name: str, fn: Any, dec: Any, args: tuple, kwargs: dict, result: Any) -> bool:
        """Keep a call whose first argument and result are floating values of a size to probe, not learned."""
        x = _tensor(args[0]) if args else None
        y = _tensor(result)
        if x is None or y is None or not MIN_ELEMENTS <= x.numel() <= MAX_ELEMENTS \
                or (isinstance(result, torch.Tensor) and result.requires_grad):  # a learned encoder: no inverse
            return False
        self.calls.append((name, inspect.unwrap(fn), dec.__name__, dec, tuple(_copy(a) for a in args),
                           {k: _copy(v) for k, v in kwargs.items()}, _copy(result), user_location(3) or ""))
        return True

    def after_checked_step(self, oi: Any) -> None:
        if self.calls:
            self._judge()

    def end_of_run(self) -> None:
        self._judge()

    def _judge(self) -> None:
        calls, self.calls = self.calls, []
        for name, fn, dname, dec, args, kwargs, code, at in calls:
            found = self._round_trip(fn, dec, args, kwargs, code)
            if found is not None:
                self._report(name, fn, dname, found, at)

    @staticmethod
    def _round_trip(fn: Any, dec: Any, args: tuple, kwargs: dict, code: Any) -> tuple[int, int, float] | None:
        try:
            bound = inspect.signature(fn).bind(*args, **kwargs)
        except (TypeError, ValueError):
            return None
        bound.apply_defaults()
        rest = _decoder_call(fn, dec, bound)
        if rest is None:
            return None
        x = _tensor(args[0])
        if x is None:
            return None
        zero = torch.zeros_like(code) if isinstance(code, torch.Tensor) else np.zeros_like(code)
        modules = [0]

        def count(module: Any, inputs: Any) -> None:
            modules[0] += 1

        handle = register_module_forward_pre_hook(count)
        try:
            with rerun(None, x.device if isinstance(args[0], torch.Tensor) else None), torch.no_grad(), \
                    contextlib.redirect_stdout(io.StringIO()):
                back = _tensor(dec(code, **rest))
                origin = _tensor(dec(zero, **rest))
        except Exception:  # noqa: BLE001  a decoder that cannot be called on the code alone: nothing proved
            return None
        finally:
            handle.remove()
        if modules[0]:  # a decoder that runs a module (a learned decoder, an autoencoder's): no exact inverse
            return None
        if back is None or origin is None or back.shape != x.shape:
            return None
        with torch.no_grad():
            x64, b64 = x.double().cpu(), back.double().cpu()
            o64 = origin.double().cpu().expand_as(x64) if origin.shape != x.shape else origin.double().cpu()
            kept = torch.isfinite(x64) & torch.isfinite(b64) & torch.isfinite(o64)
            n = int(kept.sum())
            if n < MIN_ELEMENTS:
                return None
            xs, bs, os_ = x64[kept], b64[kept], o64[kept]
            err = (bs - xs).abs()
            scale = xs.abs() + xs.std() + 1e-12
            bad = int((err > TOL * scale).sum())
            away = (xs - os_).abs()
            moved = away > TOL * scale
            if bad < FAIL_SHARE * n or int(moved.sum()) < MIN_ELEMENTS:
                return None
            lost = float((err[moved] / away[moved]).median())
        if lost < LOSS_SHARE:
            return None
        return n - bad, n, lost

    def _report(self, name: str, fn: Any, dname: str, found: tuple[int, int, float], at: str) -> None:
        good, n, lost = found
        code = fn.__code__
        try:
            src, start = inspect.getsourcelines(fn)
        except (OSError, TypeError):
            src, start = [], code.co_firstlineno
        line = short_location(code.co_filename, code.co_firstlineno)
        body = [(start + i, t.strip()) for i, t in enumerate(src) if i > 0 and t.strip()
                and not t.strip().startswith(("#", '"', "'"))]
        if body:  # the last statement before a bare return of a name, else the return itself
            line = short_location(code.co_filename, body[-1][0])
            if len(body) >= 2 and re.fullmatch(r"return \w+", body[-1][1]):
                line = short_location(code.co_filename, body[-2][0])
        self.s.report(
            "inverse-transform-not-inverse",
            f"{dname}() does not undo {name}() (defined at {short_location(code.co_filename, code.co_firstlineno)}, "
            f"called at {at or 'the script'}): decoding what {name}() made of the program's own data gives the data "
            f"back on only {good} of {n} elements, and the typical element loses {lost:.0%} of its distance from "
            f"what {dname}() gives for a zero code. The model is trained to output {name}()'s targets, and "
            f"{dname}() reads its outputs as something else, so every prediction put back through {dname}() is "
            "wrong by construction while the training loss falls normally.",
            fix=f"make {name}() the exact inverse of {dname}(): apply each operation {dname}() undoes, in reverse "
                "order, with true division (not //) and the parentheses the formula needs (y / (v * p), not "
                "y / v * p), and check decode(encode(y)) == y on a few targets",
            where=line, key=f"fn:{name}")

    def remove_hooks(self) -> None:
        self.script.put_back()
        self.calls = []
