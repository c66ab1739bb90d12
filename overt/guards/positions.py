"""Where a sequence model lets a position see later ones: the submodule calls of a probe forward,
traced (used by :mod:`overt.guards.seqtargets` and :mod:`overt.guards.forecast` for
``causal-mask-missing``).

The probe runs a model twice on a few sequences that differ in one token (position ``p``).  While
it runs, a global forward hook fingerprints every submodule call's tensors: a tensor with a
position axis (``(rows, t, ...)`` batch-first, ``(t, rows, ...)`` sequence-first, ``(rows, c, t)``
a convolution's; a padded axis a little longer than ``t`` too) per position
(sum and sum of magnitudes over the other axes), any other tensor (a per-sequence summary: a
hidden state, a pooled vector) as a whole.  Comparing the two traces says, per call, whether an
output changed *before* ``p`` (later tokens leaked into earlier positions), whether a positional
input changed before ``p`` (the leak came in from outside the call), and whether a summary input
changed (the call was handed a digest of the whole sequence: an autoencoder's bottleneck, which a
decoder may legitimately see).  The first call whose output changed before ``p`` made the leak
when its own inputs changed only at ``p`` or later; one handed a changed summary is a bottleneck,
and nothing is concluded.  Fingerprints are device tensors: nothing is read here.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.nn.modules import module as _module

from overt.guards.aside import user_code
from overt.guards.independence import module_forward
from overt.guards.putback import ModelState
from overt.guards.where import user_location

_MAX_CALLS = 4096  # submodule calls traced per forward


def _tensors(value: Any, depth: int = 0) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value] if value.is_floating_point() else []
    if depth < 2 and isinstance(value, (list, tuple)):
        return [t for v in value for t in _tensors(v, depth + 1)]
    if depth < 2 and isinstance(value, dict):
        return [t for v in value.values() for t in _tensors(v, depth + 1)]
    return []


def _position_axis(shape: torch.Size, rows: int, t: int) -> int | None:
    """The axis of a traced tensor that holds the sequence's positions, or None (a summary).  An axis
    a little longer than the sequence is a padded one (a convolution's input padded on either side, a
    TCN's output before its chomp): its first ``p`` entries hold nothing of position ``p`` or later
    however it was padded, so comparing them stays a proof."""
    def fits(n: int) -> bool:
        return t <= n <= t + max(4, t // 4)

    if len(shape) < 2 or rows == t:
        return None
    if shape[0] == rows and fits(shape[1]):
        return 1
    if fits(shape[0]) and shape[1] == rows:
        return 0
    if len(shape) == 4 and shape[0] == rows and shape[2] == t:  # attention's (batch, heads, time, dim)
        return 2
    if len(shape) == 3 and shape[0] == rows and fits(shape[2]):  # a convolution's (batch, channels, time)
        return 2
    return None


def _fingerprint(x: torch.Tensor, rows: int, t: int) -> tuple[str, torch.Tensor]:
    x = x.detach().float()
    axis = _position_axis(x.shape, rows, t)
    if axis is not None:
        per = x.movedim(axis, 0).reshape(x.shape[axis], -1)
        return "pos", torch.stack((per.sum(1), per.abs().sum(1)), 1)
    return "sum", torch.stack((x.sum(), x.abs().sum()))[None]


#: the traces being recorded (a probe's forward): the attention wrappers add their calls to them
TRACING: list[Trace] = []
ATTENTION = -1  # the "module" id of an ``F.scaled_dot_product_attention`` call


class Trace:
    """One probe forward's submodule calls (and functional attention calls), in the order they finish."""

    def __init__(self, root: torch.nn.Module, rows: int, t: int, locate: bool):
        self.rows, self.t, self.locate = rows, t, locate
        self.names = {id(m): n for n, m in root.named_modules() if n}
        self.calls: list[tuple[int, list[tuple[str, torch.Tensor]], list[tuple[str, torch.Tensor]]]] = []
        self.where: list[str | None] = []
        self._handle: Any = None

    def __enter__(self) -> Trace:
        def hook(module: Any, args: tuple, kwargs: dict, output: Any) -> None:
            if id(module) not in self.names or len(self.calls) >= _MAX_CALLS:
                return
            ins = [_fingerprint(x, self.rows, self.t) for x in _tensors((args, kwargs))]
            outs = [_fingerprint(x, self.rows, self.t) for x in _tensors(output)]
            self.calls.append((id(module), ins, outs))
            if self.locate:
                self.where.append(user_location(2))

        self._handle = _module.register_module_forward_hook(hook, with_kwargs=True)
        TRACING.append(self)
        return self

    def __exit__(self, *exc: Any) -> None:
        self._handle.remove()
        if self in TRACING:
            TRACING.remove(self)

    def attention(self, args: tuple, output: Any) -> None:
        """An ``F.scaled_dot_product_attention(q, k, v, ...)`` call made during the traced forward."""
        if len(self.calls) >= _MAX_CALLS:
            return
        ins = [_fingerprint(x, self.rows, self.t) for x in _tensors(args[:3])]
        outs = [_fingerprint(x, self.rows, self.t) for x in _tensors(output)]
        self.calls.append((ATTENTION, ins, outs))
        if self.locate:
            self.where.append(user_location(3))


def _changed(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return (a - b).abs() > 1e-4 * a.abs().amax().clamp(min=1e-6) + 1e-6


def compare(a: Trace, b: Trace, p: int) -> torch.Tensor | None:
    """Per call of the two traces: (output changed before ``p``, positional input changed before
    ``p``, summary input changed, summary output changed), flattened, as a device tensor; None
    when the traces differ."""
    if len(a.calls) != len(b.calls) or not a.calls:
        return None
    flags = []
    for (ma, ia, oa), (mb, ib, ob) in zip(a.calls, b.calls):
        if ma != mb or len(ia) != len(ib) or len(oa) != len(ob):
            return None
        if any(x.shape != y.shape for (_, x), (_, y) in zip(ia + oa, ib + ob)):
            return None
        groups = (
            [_changed(x[:p], y[:p]).any() for (k, x), (_, y) in zip(oa, ob) if k == "pos"],
            [_changed(x[:p], y[:p]).any() for (k, x), (_, y) in zip(ia, ib) if k == "pos"],
            [_changed(x, y).any() for (k, x), (_, y) in zip(ia, ib) if k == "sum"],
            [_changed(x, y).any() for (k, x), (_, y) in zip(oa, ob) if k == "sum"],
        )
        flags.append([torch.stack(v).any() if v else None for v in groups])
    device = next((f.device for row in flags for f in row if f is not None), torch.device("cpu"))
    false = torch.zeros((), dtype=torch.bool, device=device)
    return torch.stack([f.to(device) if f is not None else false for row in flags for f in row])


def culprit(flags: list[float], trace: Trace) -> tuple[str, str | None] | None:
    """The call that mixed later positions into earlier ones, from :func:`compare`'s values read on
    the host: ``(module name, its call site)``; ``("", None)`` when the leak came from the model's
    own code between submodules (or it has none); None for a bottleneck (a summary of the sequence
    handed on), where nothing is concluded."""
    digest = False  # an earlier call handed out a summary of the sequence that saw the changed token
    for i in range(len(flags) // 4):
        out_early, in_early, summary_in, summary_out = flags[4 * i:4 * i + 4]
        if out_early:
            if summary_in or (in_early and digest):
                return None
            if in_early:
                return "", None
            module_id = trace.calls[i][0]
            where = trace.where[i] if i < len(trace.where) else None
            if module_id == ATTENTION:
                return "F.scaled_dot_product_attention", where
            return trace.names.get(module_id, ""), where
        digest = digest or bool(summary_out)
    return None if digest else ("", None)


def named_culprit(info: Any, module: str, site: str | None, called_at: str | None) -> tuple[str, str]:
    """``(source, where)`` of a finding naming what :func:`culprit` found in the model ``info``: a functional
    attention call, a submodule (its class and call site), or the model's own forward (``called_at``)."""
    if module == "F.scaled_dot_product_attention":
        return ("F.scaled_dot_product_attention" + (f" at {site}" if site else "") + f" in {info.name}",
                "F.scaled_dot_product_attention" + (f" call at {site}" if site else ""))
    if module:
        sub = info.module.get_submodule(module)
        return (f"{info.name}.{module} ({type(sub).__name__}" + (f", called at {site})" if site else ")"),
                f"{info.name}.{module}" + (f" call at {site}" if site else ""))
    return (f"the forward of {info.name} (its own code between layers)",
            f"forward of {info.name}" + (f" called at {called_at}" if called_at else ""))


def traced_pair(info: Any, first: torch.Tensor, second: torch.Tensor, args: tuple, kwargs: dict, n: int,
                rows: int, batch: int, t: int, p: int) -> tuple[Any, Any, torch.Tensor | None, Trace] | None:
    """Two forwards of a watched model (``info``), on ``first`` and then ``second`` as its first argument and
    the first ``rows`` of the other arguments' ``n`` samples, in eval mode under ``no_grad``, each traced
    (``batch`` samples of ``t`` positions, changed at ``p``); the modules' modes, buffers, attributes and
    random generators put back.  ``(output a, output b, flags of compare, trace b)``, or None when the
    model cannot run so."""
    def cut(value: Any) -> Any:
        return value[:rows] if isinstance(value, torch.Tensor) and value.dim() and value.shape[0] == n else value

    module = info.module
    saved = ModelState(module, info.param_device)
    modes = [(m, m.training) for m in module.modules()]
    try:
        for m, _ in modes:
            m.training = False
        rest = tuple(cut(a) for a in args[1:])
        kw = {key: cut(v) for key, v in kwargs.items()}
        with torch.no_grad(), user_code():  # the user's model runs again: as the user's code runs
            forward = module_forward(info)
            with Trace(module, batch, t, locate=False) as trace_a:
                a = forward(first, *rest, **kw)
            saved.restore_rng()
            with Trace(module, batch, t, locate=True) as trace_b:
                b = forward(second, *rest, **kw)
            return a, b, compare(trace_a, trace_b, p), trace_b
    except Exception:  # noqa: BLE001  a model the probe cannot run: nothing proven
        return None
    finally:
        for m, mode in modes:
            m.training = mode
        saved.restore()
        saved.restore_rng()
