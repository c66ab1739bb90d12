"""Guard on a block named residual whose output does not carry its input (slug ``residual-skip-missing``, issue 33,
the wild corpus's w363).

The premise every residual block satisfies, whatever its branch: ``y = x + F(x)`` (or ``act(x + F(x))``,
``norm(x + F(x))``) carries its input along the identity, so with every weight of the branch switched off
(each weight matrix and its bias zero) the block still returns something of its input -- ``x`` itself, or a
pointwise function or normalisation of it -- which differs from one sample to the next as the inputs do.
A block that returns its branch only (``return out`` where ``return out + x`` was meant: znxlwm/UGATIT-pytorch#32),
adds the branch to itself (``out + out``) or adds another of its intermediate values computes, with its weights
off, the same output for every sample: its input reaches the output only through its weights, and a stack of such
blocks is a plain deep network that trains far slower than the residual network it was written to be.

What is proven, once per model on its first checked training forward (no work on any other step): a submodule
(not the watched model itself, whose forwards the guards follow) whose class is the user's and is named residual
(its class name's words: ``Res``/``Resnet``/``Residual`` with
``Block``/``Layer``/``Unit``, or ``Residual`` alone) and has no child named like a shortcut (``shortcut``,
``downsample``, ``skip``, ``proj``, ``identity``: a projection on the skip path is switched off with the weights,
so the premise cannot be proven) is run once more on its own input, under ``no_grad``, through
``torch.func.functional_call`` with every parameter of two or more dimensions and each bias beside one replaced by
zeros (its own parameters and buffers untouched: buffers are given as copies, torch's random state is put back).
Judged when its input is one floating tensor whose samples (first axis, at least two) differ and whose shape the
output keeps; reported when the probe's output is the same for every sample (its spread at most 1e-5 of the
input's), read with the next checked step.  Silent on blocks with a projection shortcut, on blocks that change
shape, on modules not named residual (the premise is the name's promise), and on residual blocks of every form
(pre-norm, post-norm, an activation after the sum, a learnable scale on the branch).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

from overt.guards import aside
from overt.guards.check import Check
from overt.guards.probeargs import fresh
from overt.guards.putback import RandomState
from overt.guards.where import is_user_file, short_location

if TYPE_CHECKING:
    from overt.guards.watched import ModelInfo

SLUG = "residual-skip-missing"
MAX_BLOCKS = 8  # classes probed per model (one instance each)
MAX_MODELS = 4
SAME = 1e-5  # the probe's spread across samples, relative to its input's, under which its output is one constant

_RESIDUAL = {"res", "resnet", "residual", "resblock", "resnetblock", "residualblock"}
_UNIT = {"block", "layer", "unit"}
_SHORTCUT = {"shortcut", "downsample", "skip", "proj", "projection", "identity", "residual", "res", "down", "sc"}


def _words(name: str) -> list[str]:
    return [w.lower() for w in re.findall(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+", name)]


def _named_residual(cls: type) -> bool:
    words = _words(cls.__name__)
    return "residual" in words or bool(set(words) & _RESIDUAL and set(words) & _UNIT)


def _has_shortcut_child(m: nn.Module) -> bool:
    for name, _ in m.named_modules():
        if name and set(_words(name.replace(".", "_"))) & _SHORTCUT:
            return True
    return False


def _switched_off(m: nn.Module) -> dict[str, torch.Tensor]:
    """Every parameter of ``m`` with the weights (two or more dimensions) and the biases beside them zero."""
    out: dict[str, torch.Tensor] = {}
    for prefix, sub in m.named_modules():
        own = dict(sub.named_parameters(recurse=False))
        weighted = any(p.dim() >= 2 for p in own.values())
        for n, p in own.items():
            key = f"{prefix}.{n}" if prefix else n
            zero = p.dim() >= 2 or (weighted and "bias" in n)
            out[key] = torch.zeros_like(p) if zero else p
    for n, b in m.named_buffers():
        out[n] = b.detach().clone()
    return out


class ResidualSkipChecks(Check):
    name = "residualskip"

    def __init__(self, session: Any):
        super().__init__(session)
        self.looked: set[int] = set()
        self.handles: list[Any] = []
        self.model: ModelInfo | None = None
        self.busy = False
        self.probed: set[type] = set()

    def on_checked_forward(self, info: ModelInfo, args: tuple, light: bool) -> None:
        if self.handles or id(info) in self.looked or len(self.looked) >= MAX_MODELS:
            return
        self.looked.add(id(info))
        blocks, classes = [], set()
        for name, m in info.module.named_modules():
            if m is info.module:
                continue  # the watched model itself: running it again would be one of its own forwards to the guards
            cls = type(m)
            if cls in classes or cls.__module__.startswith("torch.") or not _named_residual(cls):
                continue
            if not any(p.dim() >= 2 for p in m.parameters()) or _has_shortcut_child(m):
                continue
            classes.add(cls)
            blocks.append((name, m))
            if len(blocks) >= MAX_BLOCKS:
                break
        if not blocks:
            return
        self.model = info
        for name, m in blocks:
            self.handles.append(m.register_forward_hook(self._probe(info, name), with_kwargs=True))

    def _probe(self, info: ModelInfo, name: str):
        def hook(module: nn.Module, args: tuple, kwargs: dict, output: Any) -> None:
            if self.busy or type(module) in self.probed or not torch.is_grad_enabled():
                return
            x = args[0] if len(args) == 1 and not kwargs else None
            if not isinstance(x, torch.Tensor) or not x.is_floating_point() or x.dim() < 2 or x.shape[0] < 2:
                return
            if not isinstance(output, torch.Tensor) or output.shape != x.shape:
                return
            self.probed.add(type(module))
            self.busy = True
            rng = RandomState([x.device])
            try:
                with torch.no_grad(), aside.user_code():
                    y = torch.func.functional_call(module, _switched_off(module), (fresh(x),))
            except Exception:
                return
            finally:
                rng.restore()
                self.busy = False
            if not isinstance(y, torch.Tensor) or y.shape != x.shape:
                return
            with torch.no_grad():
                xd, yd = x.detach().float(), y.float()
                vals = torch.stack([(xd - xd[:1]).abs().amax(), (yd - yd[:1]).abs().amax(), yd.abs().amax()])
            self.s.defer(vals, lambda v: self._judge(info, name, module, v))
        return hook

    def _judge(self, info: ModelInfo, name: str, module: nn.Module, v: list[float]) -> None:
        spread_in, spread_out, size = v
        if not spread_in > 0 or not spread_out <= SAME * spread_in:
            return  # (NaN spreads, from a probe dividing by a zeroed weight, are never judged)
        cls = type(module).__name__
        code = getattr(getattr(type(module), "forward", None), "__code__", None)
        line = short_location(code.co_filename, code.co_firstlineno) \
            if code is not None and is_user_file(code.co_filename) else ""
        label = f"{info.name}.{name} ({cls})" if name else cls
        msg = (f"{label} is named a residual block, but its output does not carry its input: with every weight of "
               "its layers switched off (each weight matrix and its bias set to zero) it returns the same value for "
               f"every sample of the batch (spread {spread_out:.3g} across samples whose inputs spread "
               f"{spread_in:.3g}), where a residual block y = x + F(x) returns its input. Its forward"
               f"{f' ({line})' if line else ''} returns the branch without the skip (or adds the branch to another "
               "of its own values): the input reaches the output only through the weights, and a stack of such "
               "blocks trains like a plain deep network, far slower than the residual network it was written to be.")
        fix = ("return the branch plus the block's input (`return out + x`, or `x = x + out` before a final "
               "activation); keep the input in its own name when a sublayer's output is assigned back (`h = f(x); "
               "x = x + h`)")
        self.s.report(SLUG, msg, where=f"{cls}.forward at {line}" if line else label, fix=fix, key=f"res:{cls}")

    def on_forward_end(self, info: ModelInfo, output: Any, failed: bool) -> None:
        if info is self.model:
            self._unhook()
            self.model = None

    def _unhook(self) -> None:
        for h in self.handles:
            h.remove()
        self.handles = []

    def remove_hooks(self) -> None:
        self._unhook()


__all__ = ["ResidualSkipChecks"]
