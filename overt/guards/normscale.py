"""Guard on a normalisation layer written by hand whose output changes with the scale of its input (slug
``normaliser-not-scale-invariant``; issue 33, session 50: a normaliser normalises).

An invariant of every normalisation that divides by its input's own spread (layer, RMS, group, instance,
pixel, scale, L2 and batch normalisation, conditional or adaptive forms included): multiplying the tensor it
normalises by a positive constant does not change its output, whatever its gain and bias (those act after the
division) and whatever other inputs it takes (a conditional layer norm's condition vector), once the input's
spread is far above the ``eps`` added to it.  A divisor that grows as the input's spread to another power than 1
breaks it: ``(variance + eps) ** 2`` where ``** 0.5`` belongs (the output goes as the input's scale to the power
-3), a variance without its square root (-1), a square root taken twice (+1/2), no division at all (+1).  The
layer then amplifies small activations and crushes large ones, and everything after it trains on activations
whose scale follows the data's, with no error.  A second invariant holds for the per-sample normalisers (layer,
RMS, group, instance, pixel, scale, L2): scaling one sample of the batch does not change another's output; one
that does normalises over the batch dimension.

What is looked at: modules whose class is the user's (its ``forward`` is in the user's files) and whose class
name says it normalises (``LayerNorm``, ``T5LayerNorm``, ``RMSNorm``, ``GroupNorm``, ``InstanceNorm1d``,
``BatchNorm``, ``ConditionalLayerNorm``, ``AdaLayerNorm``, ``PixelNorm`` ...; not torch's own layers, tested
upstream; not weight or spectral normalisation, a frozen, fixed, running-statistics or synchronised norm, nor a
pre-/post-norm or add-and-norm block, which are not scale invariant; a batch norm not at all when several ranks run:
it may synchronise its statistics across them).  On a model's first checked training forward each such
module records its first call (every module of its subtree in training mode: batch norms normalise with the
batch's statistics); after the optimizer step it is run again (``no_grad``, as user code; the random generators,
the buffers and the module attributes put back) on that call's arguments with the one floating tensor of the
output's shape (the normalised input; none or several: not judged) scaled so that its smallest typical spread
(over the whole tensor, along its last, first or second dimension: median standard deviations) is 10, 20 and 40.
With ``k1``, ``k2`` the powers of two by which the output's RMS about its mean over dimension 0 (a trained bias,
the same for every sample, would hide the normalised part) grows from one scale to the next, a power law
``|k1 - k2| <`` :data:`SAME_POWER` with ``|k2| >`` :data:`MIN_POWER` is reported: the output goes as the input's
scale to the power ``k`` (a correct layer whose ``eps`` still counts at the smallest scale moves toward
invariance: ``k2`` is nearer 0 than ``k1``, and is not reported).  Per-sample normalisers whose output is invariant
are then run with each sample of dimension 0 scaled by its own factor (between 1 and 10): an output that moves by
more than :data:`MIXED` of its RMS is reported.  Silent: a non-finite output (a half-precision overflow), outputs of
another shape, fewer than :data:`MIN_ELEMENTS` elements, modules that cannot run again on their own, inputs with no
spread.
"""

from __future__ import annotations

import inspect
import math
import re
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

from overt.guards.check import Check
from overt.guards.evalscale import _Contents, _plain
from overt.guards.probeargs import fresh as _copy
from overt.guards.rerun import rerun
from overt.guards.where import is_user_file, short_location
from overt.torchrun import Topology

if TYPE_CHECKING:
    from overt.guards.watched import ModelInfo

SCALES = (10.0, 20.0, 40.0)  # the normalised input's smallest spread at the three probes (each twice the last)
SAME_POWER = 0.25  # |k1 - k2| under which the output's scale follows a power of the input's
MIN_POWER = 0.5  # |k2| above which that power is not 0 (the output changes by 2**0.5 = 1.4x per doubling)
MIXED = 0.3  # relative change of the output when each sample is scaled on its own (per-sample normalisers)
INVARIANT = 0.1  # |k2| under which the layer is scale invariant (the per-sample probe's premise)
MIN_ELEMENTS = 32
MAX_ELEMENTS = 1 << 22  # elements of a recorded input
MAX_MODULES = 16  # normalisers probed per model

# the kind of normalisation the class name ends with: per sample, or over the batch
_KIND = re.compile(r"(layer|rms|group|instance|pixel|scale|channel|l2|ln|gn|batch|bn)_?norm"
                   r"(?:ali[sz]ation|ali[sz]er)?(?:\d*d)?$", re.IGNORECASE)
_NOT = re.compile(r"weight|spectral|frozen|fixed|static|running|power|renorm|pre|post|add|res|block|wrap|sync",
                  re.IGNORECASE)


def norm_kind(m: nn.Module) -> str | None:
    """``"sample"`` or ``"batch"`` for a module whose class is the user's and whose name says it normalises
    its input by the input's own spread; None otherwise."""
    cls = type(m)
    code = getattr(getattr(cls, "forward", None), "__code__", None)
    if code is None or not is_user_file(code.co_filename):
        return None
    found = _KIND.search(cls.__name__)
    if found is None or _NOT.search(cls.__name__[:found.start()]):
        return None
    if found.group(1).lower() in ("batch", "bn"):
        # across ranks a batch norm may synchronise its statistics: a probe on one rank's schedule is no place for that
        return None if Topology.of_group().world_size > 1 else "batch"
    return "sample"


def _target(args: tuple, kwargs: dict, shape: torch.Size) -> tuple[str, Any] | None:
    """Where the normalised input is among the call's arguments: the one floating tensor of the output's shape."""
    hits = [("a", i) for i, a in enumerate(args)
            if isinstance(a, torch.Tensor) and a.is_floating_point() and a.shape == shape]
    hits += [("k", k) for k, v in kwargs.items()
             if isinstance(v, torch.Tensor) and v.is_floating_point() and v.shape == shape]
    return hits[0] if len(hits) == 1 else None


def _with(args: tuple, kwargs: dict, where: tuple[str, Any], x: torch.Tensor) -> tuple[tuple, dict]:
    args, kwargs = _copy(args), _copy(kwargs)
    if where[0] == "a":
        args = args[:where[1]] + (x,) + args[where[1] + 1:]
    else:
        kwargs[where[1]] = x
    return args, kwargs


def _spread(x: torch.Tensor) -> float | None:
    """The smallest of the input's typical spreads over the axes a normaliser may reduce (the whole tensor, the
    last dimension, the first, the second): scaled up to :data:`SCALES`, no ``eps`` counts on any of them."""
    x = x.detach().double()
    if x.dim() < 1 or x.shape[-1] < 2:
        return None
    found = [x.std(), x.std(-1).median()]
    if x.dim() > 1:
        found += [x.std(0).median()] if x.shape[0] > 1 else []
        found += [x.std(1).median()] if x.dim() > 2 and x.shape[1] > 1 else []
    values = [float(v) for v in found]
    if not all(math.isfinite(v) and v > 0 for v in values):
        return None
    return min(values)


def _rms(t: torch.Tensor) -> float:
    return float(t.double().pow(2).mean().sqrt())


def _divisor_line(cls: type) -> str | None:
    """The line of ``cls.forward`` that most looks like the divisor's computation (an ``eps`` with a root or a
    power), else the ``def`` line."""
    try:
        path = inspect.getsourcefile(cls.forward)
        src, start = inspect.getsourcelines(cls.forward)
    except (OSError, TypeError):
        return None
    if not path:
        return None
    best, at = 0, start
    for i, text in enumerate(src):
        code = text.split("#")[0]
        score = (2 * bool(re.search(r"eps", code, re.IGNORECASE)) + 2 * bool(re.search(r"sqrt|rsqrt", code))
                 + bool(re.search(r"\bstd\b|\bvar", code)) + bool(re.search(r"\*\*|\.pow\(|/", code)))
        if score > best:
            best, at = score, start + i
    return short_location(path, at)


class NormScaleChecks(Check):
    name = "normscale"

    def __init__(self, session: Any):
        super().__init__(session)
        self.done: set[int] = set()  # id(model) looked at
        self.handles: list[Any] = []
        self.calls: dict[int, tuple[nn.Module, str, tuple, dict, torch.Size]] = {}
        self.model: ModelInfo | None = None
        self.pending: ModelInfo | None = None

    def on_checked_forward(self, info: ModelInfo, args: tuple, light: bool) -> None:
        if id(info.module) in self.done or self.handles:
            return
        self.done.add(id(info.module))
        mods = [(m, k) for m in info.module.modules() if (k := norm_kind(m)) is not None][:MAX_MODULES]
        if not mods:
            return
        self.model = info
        for m, kind in mods:
            self.handles.append(m.register_forward_hook(self._recorder(kind), with_kwargs=True))

    def _recorder(self, kind: str):
        def hook(module: nn.Module, args: tuple, kwargs: dict, output: Any) -> None:
            if id(module) in self.calls or not torch.is_grad_enabled():
                return
            if not isinstance(output, torch.Tensor) or not output.is_floating_point() \
                    or not MIN_ELEMENTS <= output.numel() <= MAX_ELEMENTS:
                return
            if not all(m.training for m in module.modules()) or not _plain(args) or not _plain(kwargs):
                return
            if _target(args, kwargs, output.shape) is None:
                return
            self.calls[id(module)] = (module, kind, _copy(args), _copy(kwargs), output.shape)
        return hook

    def on_forward_end(self, info: ModelInfo, output: Any, failed: bool) -> None:
        if info is not self.model:
            return
        self._unhook()
        self.model = None
        if failed:
            self.calls = {}
        else:
            self.pending = info

    def after_checked_step(self, oi: Any) -> None:
        info, self.pending = self.pending, None
        calls, self.calls = self.calls, {}
        if info is None:
            return
        for module, kind, args, kwargs, shape in calls.values():
            found = self._probe(module, kind, args, kwargs, shape, info)
            if found is not None:
                self._report(info, module, *found)

    def _run(self, module: nn.Module, args: tuple, kwargs: dict, where: tuple[str, Any],
             x: torch.Tensor, shape: torch.Size) -> torch.Tensor | None:
        a, k = _with(args, kwargs, where, x)
        out = module.forward(*a, **k)
        if not isinstance(out, torch.Tensor) or out.shape != shape or not bool(torch.isfinite(out).all()):
            return None
        return out

    def _probe(self, module: nn.Module, kind: str, args: tuple, kwargs: dict, shape: torch.Size,
               info: ModelInfo) -> tuple[str, float, float] | None:
        where = _target(args, kwargs, shape)
        if where is None:
            return None
        x = args[where[1]] if where[0] == "a" else kwargs[where[1]]
        spread = _spread(x)
        if spread is None:
            return None
        contents = _Contents(module)
        flags = [(m, m.training) for m in module.modules()]
        try:
            with rerun(module, info.param_device) as saved, torch.no_grad():
                for m, _ in flags:  # as recorded: every module of the subtree in training mode
                    m.training = True
                outs = []
                for s in SCALES:
                    y = self._run(module, args, kwargs, where, x * (s / spread), shape)
                    saved.restore_rng()
                    if y is None:
                        return None
                    outs.append(y)
                rms = [_rms(y - y.mean(0, keepdim=True)) for y in outs]  # the bias (constant over samples) aside
                if min(rms) <= 0 or not all(math.isfinite(r) for r in rms):
                    return None
                p1, p2 = math.log2(rms[1] / rms[0]), math.log2(rms[2] / rms[1])
                if abs(p1 - p2) < SAME_POWER and abs(p2) > MIN_POWER:
                    return ("scale", (p1 + p2) / 2, 0.0)
                if kind != "sample" or abs(p2) > INVARIANT or len(shape) < 2 or shape[0] < 2:
                    return None
                factors = torch.logspace(0, 1, shape[0], dtype=x.dtype, device=x.device)
                factors = factors[torch.randperm(shape[0], generator=torch.Generator().manual_seed(0)).to(x.device)]
                each = factors.reshape(-1, *([1] * (len(shape) - 1)))
                y = self._run(module, args, kwargs, where, x * (SCALES[1] / spread) * each, shape)
                saved.restore_rng()
                if y is None:
                    return None
                moved = _rms(y - outs[1]) / rms[1]
                return ("mixed", 0.0, moved) if moved > MIXED else None
        except Exception:  # noqa: BLE001  a module that cannot run again on its own: nothing to judge
            return None
        finally:
            for m, flag in flags:
                m.training = flag
            contents.restore()

    def _report(self, info: ModelInfo, module: nn.Module, what: str, power: float, moved: float) -> None:
        cls = type(module).__name__
        name = info.label(module)
        line = _divisor_line(type(module)) or ""
        at = f", computed at {line}" if line else ""  # the divisor's line
        stats = f" (its statistics at {line})" if line else ""
        if what == "scale":
            div = 1 - power
            self.s.report(
                "normaliser-not-scale-invariant",
                f"{name} ({cls}) is a normalisation layer by its name, but its output changes with its input's "
                f"scale: run again on its own input of a training step, scaled twice and four times, its output "
                f"grew {2 ** power:.3g}x each time the input doubled, as the input's scale to the power "
                f"{power:+.2f} (a normaliser's output does not depend on its input's scale: power 0). It divides "
                f"by something that grows as the input's spread to the power {div:.2f} (a standard deviation or "
                f"RMS grows as power 1, a variance as 2, a squared variance as 4, a square root of the standard "
                f"deviation as 0.5){at}. The layer does not normalise: it amplifies small activations and crushes "
                "large ones, and the layers after it train on activations whose scale follows the data's.",
                fix="divide the centred input by its standard deviation, torch.sqrt(variance + eps) (or multiply by "
                    "torch.rsqrt(variance + eps)); RMS norm: by torch.sqrt(mean(x**2) + eps); or use nn.LayerNorm, "
                    "nn.RMSNorm, nn.GroupNorm",
                where=line or name, key=f"{info.name}:{cls}")
        else:
            self.s.report(
                "normaliser-not-scale-invariant",
                f"{name} ({cls}) normalises each sample by its name, but one sample's output depends on the scale of "
                f"the other samples of the batch: run again on its own input of a training step with each sample "
                f"(dimension 0) scaled by its own factor between 1 and 10, its output moved by {moved:.0%} of its "
                f"RMS, while scaling the whole input leaves it unchanged{stats}. It computes its statistics over the "
                "batch dimension, not within each sample: every prediction depends on the rest of its batch, and "
                "evaluation batches of another size or make-up give other outputs.",
                fix="reduce over the normalised dimensions of each sample (layer/RMS norm: dim=-1, keepdim=True; "
                    "group/instance norm: the channel group and spatial dimensions), not over dimension 0",
                where=line or name, key=f"{info.name}:{cls}")

    def _unhook(self) -> None:
        for h in self.handles:
            h.remove()
        self.handles = []

    def remove_hooks(self) -> None:
        self._unhook()
        self.calls.clear()
