"""Guard on a model that sees the later steps of its input it is trained to predict (slug
``causal-mask-missing`` for series of values; :mod:`overt.guards.seqtargets` covers token ids).

An invariant of every model trained to predict later steps of its own input -- a next-value
forecaster, a causal convolution or TCN, a WaveNet, an RNN or a transformer trained with teacher
forcing on a series: the prediction scored against step ``t + k`` does not depend on step ``t + k``
or later.  Whatever lets it (a convolution padded on both sides or on the wrong one, an attention
without a causal mask, a bidirectional RNN, a centred window, an MLP across the whole window), the
model learns to copy the value it is asked to predict, the training loss falls to almost nothing,
and once only the past is known -- forecasting, generation -- it is far off (lucidrains/magvit2-
pytorch#27's time downsampling padded too little on the left; pytorch/tutorials#2478's encoder
without a mask).

Seen on checked steps, for a watched model whose first argument is a floating tensor and a
regression loss (``mse_loss``, ``l1_loss``, ``smooth_l1_loss``, ``huber_loss``) whose input and
target have the input's number of axes:

1. on the device, along each axis ``d`` on which the target and the model's input may be the same
   series (every other axis of equal size): whether the target equals the input ``s`` steps later
   (``s = 0..3``, over at least :data:`MIN_STEPS` steps), and which slice of the model's output
   along ``d`` the loss scored (offset ``o``); read with the next checked step.  When exactly one
   axis and shift match, exactly one offset, and the lead ``k = s - o`` is at least 1 (the output
   at ``i`` is scored against input step ``i + k``),
2. once per model, after a checked step, a probe: two extra forwards of that forward's batch (eval
   mode, ``no_grad``, the model's buffers, attributes and random generators put back) that differ
   in input step ``p`` alone, every submodule call traced (:mod:`overt.guards.positions`); read
   with the next checked step.

Reported when the output scored against step ``p`` moves with it, naming the submodule call that
first let a position see a later one.  Otherwise -- a target that is no shift of the input (another
series, a horizon after the window, the input itself: an autoencoder), periodic or constant data
where several shifts match, a leak through a summary of the whole sequence (an encoder's state
handed to a decoder, where nothing is proven), a probe that fails -- silent.  A model trained on
ids is :mod:`overt.guards.seqtargets`' (an integer input is never looked at here).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from overt.guards.check import Check
from overt.guards.oneshot import OneShotHook
from overt.guards.positions import Trace, culprit, named_culprit, traced_pair
from overt.guards.watched import output_tensors
from overt.guards.where import user_location

if TYPE_CHECKING:
    from overt.guards.session import GuardSession
    from overt.guards.watched import ModelInfo, OptInfo

LOSSES = frozenset({"mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss"})
SHIFTS = 4  # target shifts s = 0..3 tried
MIN_STEPS = 4  # steps of the series compared
MAX_OFFSETS = 8  # slices of the output tried
PROBE_ROWS = 8  # samples run again by the probe (when the batch is not the series' axis)
TRIES = 8  # checked forwards looked at per model


class _Forward:
    """One checked forward of a model with a floating input: what the loss and the probe need."""

    def __init__(self, info: ModelInfo, x: torch.Tensor, site: str | None, step: int):
        self.info, self.x, self.site, self.step = info, x, site, step
        self.outputs: list[torch.Tensor] = []
        self.call: tuple[tuple, dict] | None = None  # (args, kwargs) of the forward, until judged


class _Candidate:
    """One (axis, output) pair the loss may align: what the device values will say about it."""

    def __init__(self, axis: int, out: int, offsets: int):
        self.axis, self.out, self.offsets = axis, out, offsets


class ForecastChecks(Check):
    name = "forecast"

    def __init__(self, session: GuardSession):
        super().__init__(session)
        self.current: _Forward | None = None  # the forward in progress
        self.last: _Forward | None = None  # the latest finished one
        self.tries: dict[int, int] = {}
        self.waiting: set[int] = set()  # id(ModelInfo) of the models whose match is being read
        self.probed: set[int] = set()
        self.regression: set[int] = set()  # id(ModelInfo) of the models whose output a regression loss scored
        self.wanted: list[tuple[_Forward, str, str, int, int, int]] = []  # fwd, loss, loc, axis, k, output
        self.hook = OneShotHook()
        self.running = False
        self.done: set[str] = set()

    def on_checked_forward(self, info: ModelInfo, args: tuple, light: bool) -> None:
        if self.running or self.hook.pending:
            return
        x = args[0] if args and isinstance(args[0], torch.Tensor) else None
        key = id(info)
        if x is None or x.dim() < 2 or not x.is_floating_point() or x.is_complex() or x.device.type == "meta":
            return
        n = self.tries.get(key, 0)
        if n >= TRIES or key in self.waiting or key in self.probed \
                or self.s.reporter.has("causal-mask-missing", info.name):
            return
        self.tries[key] = n + 1
        self.current = _Forward(info, x.detach(), user_location(5), self.s.step)
        self.hook.place(info.module, self._after(self.current), with_kwargs=True)

    def _after(self, fwd: _Forward):
        def hook(module: Any, args: tuple, kwargs: dict, output: Any) -> None:
            if not self.hook.fired():
                self.current = None
                return
            try:
                fwd.outputs = [o.detach() for o in output_tensors(output) if o.is_floating_point()]
                fwd.call = (args, kwargs)
                self.last = fwd
            except Exception as exc:  # a guard never breaks the user's forward
                self.s.check_failed(self, exc)
            finally:
                self.current = None

        return hook

    def on_checked_loss(self, name: str, inp: Any, target: Any, args: tuple, kwargs: dict) -> None:
        fwd = self.last
        if self.running or name not in LOSSES or fwd is None or fwd.step != self.s.step or fwd.call is None:
            return
        self.regression.add(id(fwd.info))
        if not isinstance(target, torch.Tensor) or not target.is_floating_point() or not inp.is_floating_point():
            return
        x = fwd.x
        if target.shape != inp.shape or target.dim() != x.dim() or target.device != x.device:
            return
        loc = self.s.losses.site() or f"F.{name}"
        if loc in self.done or id(fwd.info) in self.waiting:
            return
        values, cands = self._match(x, inp.detach(), target.detach(), fwd.outputs)
        fwd.outputs = []  # the device values hold what is needed
        if not cands:
            return
        self.last = None  # one loss per forward is looked at
        self.waiting.add(id(fwd.info))
        self.s.defer(torch.stack(values).float(), self._matched(fwd, name, loc, cands))

    @staticmethod
    def _match(x: torch.Tensor, pred: torch.Tensor, target: torch.Tensor,
               outputs: list[torch.Tensor]) -> tuple[list[torch.Tensor], list[_Candidate]]:
        """Device values, per candidate axis: whether the target is the input ``s`` steps later (per
        ``s``), the target's spread, and the largest difference between the loss's input and each
        slice of the output."""
        values: list[torch.Tensor] = []
        cands: list[_Candidate] = []
        for d in range(x.dim()):
            if any(x.shape[i] != target.shape[i] for i in range(x.dim()) if i != d):
                continue
            tx, ty = x.shape[d], target.shape[d]
            out = next((i for i, o in enumerate(outputs) if o.dim() == pred.dim() and o.device == pred.device
                        and o.shape[d] >= ty and all(o.shape[j] == pred.shape[j] for j in range(o.dim()) if j != d)),
                       None)
            if out is None or outputs[out].shape[d] - ty + 1 > MAX_OFFSETS or min(ty, tx - 1) < MIN_STEPS:
                continue
            o = outputs[out]
            for s in range(SHIFTS):
                w = min(ty, tx - s)
                if w < MIN_STEPS:
                    values.append(torch.zeros((), dtype=torch.bool, device=x.device))
                    continue
                values.append((target.narrow(d, 0, w) == x.narrow(d, s, w)).all())
            values.append(target.amax() - target.amin())
            for off in range(o.shape[d] - ty + 1):
                values.append((pred.float() - o.narrow(d, off, ty).float()).abs().amax())
            values.append(o.abs().amax().float())
            cands.append(_Candidate(d, out, o.shape[d] - ty + 1))
        return [v.float().reshape(()) for v in values], cands

    def _matched(self, fwd: _Forward, name: str, loc: str, cands: list[_Candidate]):
        def callback(vals: list[float]) -> None:
            self.waiting.discard(id(fwd.info))
            found = []
            i = 0
            for c in cands:
                shifts, spread = vals[i:i + SHIFTS], vals[i + SHIFTS]
                diffs, scale = vals[i + SHIFTS + 1:i + SHIFTS + 1 + c.offsets], vals[i + SHIFTS + 1 + c.offsets]
                i += SHIFTS + 2 + c.offsets
                matched = [s for s, v in enumerate(shifts) if v]
                exact = [o for o, v in enumerate(diffs) if v <= 1e-6 * max(1.0, scale)]
                if spread > 0 and matched and exact:
                    found.append((c, matched, exact))
            if len(found) != 1 or len(found[0][1]) != 1 or len(found[0][2]) != 1:
                fwd.call = None  # no shift of the input, or no single one: nothing to probe
                return
            c, (s,), (o,) = found[0]
            if s - o < 1 or loc in self.done:
                fwd.call = None
                return
            self.wanted.append((fwd, name, loc, c.axis, s - o, c.out))

        return callback

    def after_checked_step(self, oi: OptInfo) -> None:
        """The probe runs here, between steps: no forward in progress, no other check's one-shot
        hooks armed, so its extra forwards are seen by nothing.  A model whose checked step scored
        no regression loss (a classifier) is not looked at again."""
        last = self.last
        if last is not None and id(last.info) not in self.regression:
            self.tries[id(last.info)] = TRIES
        self._flush()

    def end_of_run(self) -> None:
        self._flush()

    def _flush(self) -> None:
        wanted, self.wanted = self.wanted, []
        for fwd, name, loc, axis, k, out in wanted:
            call, fwd.call = fwd.call, None
            key = id(fwd.info)
            if call is None or key in self.probed:
                continue
            self.probed.add(key)
            probe = self._probe(fwd, call, axis, k, out)
            if probe is not None:
                values, trace, p = probe
                self.s.defer(values, self._judge(fwd, name, loc, k, p, trace))
        self.last = None

    def _probe(self, fwd: _Forward, call: tuple[tuple, dict], axis: int, k: int,
               out: int) -> tuple[torch.Tensor, Trace, int] | None:
        """Per position of the scored output along ``axis``, how far it moves when input step ``p``
        changes; the output's scale; the flags of :func:`overt.guards.positions.compare` -- one
        device tensor -- with the trace that names the calls, and ``p``; or None."""
        args, kwargs = call
        info, x = fwd.info, fwd.x
        n, t = x.shape[0], x.shape[axis]
        p = t // 2
        if p - k < 0:
            return None
        rows = n if axis == 0 else min(PROBE_ROWS, n)  # a series along the first axis: not cut
        batch = x.shape[1] if axis == 0 else rows  # (steps, batch, ...): a sequence-first RNN's layout

        base = x[:rows]
        changed = base.clone()
        changed.narrow(axis, p, 1).add_(base.abs().amax() + 1.0)
        self.running = True
        try:
            pair = traced_pair(info, base, changed, args, kwargs, n, rows, batch, t, p)
        finally:
            self.running = False
        if pair is None:
            return None
        a, b = output_tensors(pair[0]), output_tensors(pair[1])
        flags, trace_b = pair[2], pair[3]
        a = [o for o in a if o.is_floating_point()]
        b = [o for o in b if o.is_floating_point()]
        if flags is None or out >= len(a) or len(a) != len(b) or a[out].shape != b[out].shape:
            return None
        ya, yb = a[out].float(), b[out].float()
        if ya.dim() <= axis or p - k >= ya.shape[axis]:
            return None
        moved = (ya - yb).abs().movedim(axis, 0).reshape(ya.shape[axis], -1).amax(1)
        values = torch.cat((moved, ya.abs().amax()[None], flags.to(moved.device).float()))
        return values, trace_b, p

    def _judge(self, fwd: _Forward, name: str, loc: str, k: int, p: int, trace: Trace):
        def callback(vals: list[float]) -> None:
            if loc in self.done:
                return
            length = len(vals) - 1 - 4 * len(trace.calls)
            moved, scale, flags = vals[:length], vals[length], vals[length + 1:]
            if moved[p - k] <= 1e-4 * scale + 1e-6:
                return  # the prediction of step p does not see step p: causal
            leak = culprit(flags, trace)
            if leak is None:  # through a summary of the whole sequence: what it may see is not proven
                return
            self.done.add(loc)
            self._report(fwd, name, loc, k, *leak)

        return callback

    def _report(self, fwd: _Forward, name: str, loc: str, k: int, module: str, site: str | None) -> None:
        info = fwd.info
        call = f" (called at {fwd.site})" if fwd.site else ""
        source, where = named_culprit(info, module, site, fwd.site)
        later = "the next step" if k == 1 else f"step t+{k}"
        msg = (f"the output of {info.name}{call} at step t is scored by F.{name} at {loc} against {later} of its own "
               f"input, and it changes when that step of the input changes: {source} lets each step see later ones. "
               "The model reads the value it is asked to predict instead of forecasting it: the training loss falls "
               "while a forecast from the past alone (where the future is not known) is far off.")
        fix = ("make every output see only its own and earlier input steps: pad convolutions on the left only "
               "(F.pad(x, ((kernel_size - 1) * dilation, 0))) or chomp the right padding, a causal mask for attention "
               "(is_causal=True, nn.Transformer.generate_square_subsequent_mask(T)), a unidirectional RNN "
               "(bidirectional=False), a window that ends at step t.")
        self.s.report("causal-mask-missing", msg, where=where, fix=fix, key=info.name, step=fwd.step)

    def remove_hooks(self) -> None:
        self.hook.remove()
