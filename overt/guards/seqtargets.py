"""Guard on sequence targets that are not the next token (slug ``sequence-targets-misaligned``;
issue 33 family 5).

An invariant of next-token training: the prediction made at position ``t`` is scored against
the token right after the last input it sees.  Labels shifted by the caller *and* by the loss
(Hugging Face causal LMs shift ``labels`` themselves) break it one way: position ``t`` is
scored against token ``t + 2``, and the model learns next-next-token prediction.  Targets that
are the inputs themselves (no shift at all) break it the other way: the model sees the token
it is asked to predict, copies it, and learns nothing.

Seen on checked steps, for a watched model whose first argument is a 2-D integer tensor
``(N, T)`` (token ids) and a ``cross_entropy``/``nll_loss`` whose integer targets hold ``N * L``
values (``L <= T``): on the device, how many targets equal the inputs ``s`` positions later
(``s = 0..3``) and which slice of the model's output ``(N, T, V)`` the loss scored (offset
``o``); once per model, after the checked step, a probe (two extra forwards of a few of that
step's sequences in eval mode under ``no_grad``, the model's state, buffers and random generator
put back) changes one input token and records which output positions move.  Everything is read
with the next checked step's values.  The targets are the input shifted by ``k = s - o`` positions relative to the
prediction; reported when exactly one ``s`` matches (98% of the targets, the others under 90%),
exactly one ``o`` matches, and

- ``k >= 2`` for a model proven causal (outputs before the changed token do not move, the
  output at it does): the tokens between are never predicted from their context;
- ``k`` of 0 or -1 (the shift forgotten, or made once the wrong way) for a causal model whose prediction moves
  with its own target token: the model sees the token it is scored against.  A target two or more tokens back is
  a delay or copy task by design (session 51: a recall-the-token-three-back task, the twin of wild case w336):
  silent.

Otherwise -- targets that are not the inputs (classes, tags, another sequence), ambiguous
periodic data, a model not proven causal (a bidirectional encoder, an autoencoder whose every
output sees every input through its bottleneck: what a prediction may see is not known), a
probe that fails -- silent.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from overt.guards.check import Check
from overt.guards.losses import ignore_index_of
from overt.guards.oneshot import OneShotHook
from overt.guards.padding import token_ids
from overt.guards.positions import Trace, culprit, named_culprit, traced_pair
from overt.guards.watched import output_tensors
from overt.guards.where import user_location

if TYPE_CHECKING:
    from overt.guards.session import GuardSession
    from overt.guards.watched import ModelInfo, OptInfo

SHIFTS = 4  # target offsets s = 0..3 tried
MATCH = 0.98  # share of the targets equal to the shifted inputs
OTHERS = 0.9  # every other offset stays below this
MIN_TARGETS = 32
PROBE_ROWS = 4  # sequences run again by the probe
TRIES = 8  # checked forwards looked at per model


def _logits(output: Any, n: int, t: int) -> torch.Tensor | None:
    for out in output_tensors(output):
        if out.is_floating_point() and out.dim() == 3 and out.shape[0] == n and out.shape[1] == t:
            return out.detach()
    return None


class _Forward:
    """One checked forward of a token model: its ids, call site, and the losses scored in it."""

    def __init__(self, info: ModelInfo, ids: torch.Tensor, site: str | None):
        self.info = info
        self.ids = ids
        self.site = site
        self.logits: torch.Tensor | None = None
        self.call: tuple[tuple, dict] | None = None  # (args, kwargs) of the forward, until the probe ran
        self.pending: list[tuple[str, str, torch.Tensor, torch.Tensor, int]] = []


class SequenceTargetChecks(Check):
    name = "seqtargets"

    def __init__(self, session: GuardSession):
        super().__init__(session)
        self.current: _Forward | None = None  # the forward in progress
        self.last: _Forward | None = None  # the latest finished one
        self.tries: dict[int, int] = {}
        self.probes: dict[int, tuple[torch.Tensor, Trace | None] | None] = {}  # id(ModelInfo) -> the probe's result
        self.staged: list[tuple[_Forward, str, str, torch.Tensor, int, int]] = []  # waiting for the probe
        self.hook = OneShotHook()
        self.running = False
        self.done: set[str] = set()

    def on_checked_forward(self, info: ModelInfo, args: tuple, light: bool) -> None:
        if self.running or self.hook.pending:
            return
        ids = token_ids(args)
        n = self.tries.get(id(info), 0)
        if ids is None or n >= TRIES or self.s.reporter.has("sequence-targets-misaligned", info.name):
            return
        self.tries[id(info)] = n + 1
        self.current = _Forward(info, ids, user_location(5))
        self.hook.place(info.module, self._after(self.current), with_kwargs=True)

    def _after(self, fwd: _Forward):
        def hook(module: Any, args: tuple, kwargs: dict, output: Any) -> None:
            if not self.hook.fired():
                self.current = None
                return
            try:
                self._finish(fwd, args, kwargs, output)
            except Exception as exc:  # a guard never breaks the user's forward
                self.s.check_failed(self, exc)
            finally:
                self.current = None

        return hook

    def _finish(self, fwd: _Forward, args: tuple, kwargs: dict, output: Any) -> None:
        n, t = fwd.ids.shape
        fwd.logits = _logits(output, n, t)
        if fwd.logits is None:
            return
        if id(fwd.info) not in self.probes:
            fwd.call = (args, kwargs)  # for the probe, after the step
        self.last = fwd
        for loss in fwd.pending:
            self._stage(fwd, *loss)
        fwd.pending = []

    def after_checked_step(self, oi: OptInfo) -> None:
        """The probe runs here, between steps: no forward in progress, no other check's one-shot
        hooks armed (dead-unit hooks on ReLUs, say), so its extra forwards are seen by nothing."""
        self._flush()

    def end_of_run(self) -> None:
        self._flush()

    def _flush(self) -> None:
        """Probe (once per model) and queue the staged judgments; drop every reference to the
        step's tensors (a language model's logits can be gigabytes)."""
        staged, self.staged = self.staged, []
        if self.last is not None:
            self.last.logits = None
        self.last = None
        for fwd, name, loc, value, offsets, step in staged:
            fwd.logits = None
            key = id(fwd.info)
            if key not in self.probes and fwd.call is not None:
                self.probes[key] = self._probe(fwd, *fwd.call)
            fwd.call = None
            probe = self.probes.get(key)
            if probe is not None:
                values, trace = probe
                self.s.defer(torch.cat((value, values.to(value.device))),
                             self._judge(fwd, name, loc, offsets, step, trace))

    def _probe(self, fwd: _Forward, args: tuple, kwargs: dict) -> tuple[torch.Tensor, Trace | None] | None:
        """Which output positions move when the input token at the middle position changes (eval
        mode, ``no_grad``, a few sequences, the model put back): a device tensor of per-position
        differences, the output's scale, the position changed and the submodule calls' flags of
        :func:`overt.guards.positions.compare` (with the trace that names them), or None."""
        info, ids = fwd.info, fwd.ids
        rows = min(PROBE_ROWS, ids.shape[0])
        n, t = ids.shape
        p = t // 2
        changed = ids[:rows].clone()
        changed[:, p] = ids.roll(1, 0)[:rows, p]
        changed[:, p] = torch.where(changed[:, p] == ids[:rows, p], ids[:rows, p - 1], changed[:, p])
        self.running = True
        try:
            pair = traced_pair(info, ids[:rows], changed, args, kwargs, n, rows, rows, t, p)
        finally:
            self.running = False
        if pair is None:
            return None
        a, b = _logits(pair[0], rows, t), _logits(pair[1], rows, t)
        flags, trace_b = pair[2], pair[3]
        if a is None or b is None:
            return None
        moved = (a.float() - b.float()).abs().amax(dim=(0, 2))
        head = torch.cat((moved, a.float().abs().amax()[None], torch.tensor([float(p)], device=moved.device)))
        if flags is None:
            return head, None
        return torch.cat((head, flags.to(head.device).float())), trace_b

    def on_checked_loss(self, name: str, inp: Any, target: Any, args: tuple, kwargs: dict) -> None:
        if self.running or name not in ("cross_entropy", "nll_loss") or not inp.is_floating_point():
            return
        fwd = self.current or self.last
        if fwd is None or target.is_floating_point() or target.dtype == torch.bool:
            return
        n, t = fwd.ids.shape
        m = target.numel()
        if m < MIN_TARGETS or m % n:
            return
        length = m // n
        if not t - SHIFTS < length <= t:
            return
        v = inp.shape[-1] if inp.dim() == 2 else inp.shape[1]
        if inp.dim() == 2 and inp.shape[0] == m:
            pred = inp.detach().reshape(n, length, v)
        elif inp.dim() == 3 and inp.shape[0] == n and inp.shape[2] == length:
            pred = inp.detach().transpose(1, 2)
        else:
            return
        loc = self.s.losses.site() or f"F.{name}"
        if loc in self.done:
            return
        ii = ignore_index_of(args, kwargs)
        tgt = target.detach().reshape(n, length)
        counts = []
        for s in range(SHIFTS):
            width = min(length, t - s)
            a, b = tgt[:, :width], fwd.ids[:, s:s + width]
            valid = a != ii
            counts += [((a == b) & valid).sum(), valid.sum()]
        stats = torch.stack(counts).float()
        if fwd is self.current:
            fwd.pending.append((name, loc, pred, stats, self.s.step))
        else:
            self._stage(fwd, name, loc, pred, stats, self.s.step)

    def _stage(self, fwd: _Forward, name: str, loc: str, pred: torch.Tensor, stats: torch.Tensor, step: int) -> None:
        """The loss's offsets against the forward's output (device values), kept until the probe."""
        logits = fwd.logits
        if logits is None or pred.shape[2] != logits.shape[2]:
            return
        length, t = pred.shape[1], logits.shape[1]
        diffs = torch.stack([(pred.float() - logits[:, o:o + length].float()).abs().amax()
                             for o in range(t - length + 1)])
        self.staged.append((fwd, name, loc, torch.cat((stats.to(diffs.device), diffs)), t - length + 1, step))

    def _judge(self, fwd: _Forward, name: str, loc: str, offsets: int, step: int, trace: Trace | None):
        def callback(vals: list[float]) -> None:
            if loc in self.done:
                return
            stats, diffs, probe = vals[:2 * SHIFTS], vals[2 * SHIFTS:2 * SHIFTS + offsets], vals[2 * SHIFTS + offsets:]
            fracs = [stats[2 * s] / stats[2 * s + 1] if stats[2 * s + 1] >= MIN_TARGETS else 0.0
                     for s in range(SHIFTS)]
            matched = [s for s, f in enumerate(fracs) if f >= MATCH]
            if len(matched) != 1 or any(f >= OTHERS for s, f in enumerate(fracs) if s != matched[0]):
                return
            exact = [o for o, d in enumerate(diffs) if d <= 1e-6 * max(1.0, probe[fwd.ids.shape[1]])]
            if len(exact) != 1:
                return
            self.done.add(loc)
            k = matched[0] - exact[0]
            t = fwd.ids.shape[1]
            moved, scale, p, flags = probe[:t], probe[t], int(probe[t + 1]), probe[t + 2:]
            tol = 1e-4 * scale + 1e-6
            changed = [d > tol for d in moved]
            causal = changed[p] and not any(changed[:p])
            if k >= 1 and changed[p - k] and trace is not None:
                leak = culprit(flags, trace)
                if leak is not None:  # not through a summary of the sequence (an autoencoder's bottleneck)
                    self._report_future(fwd, name, loc, k, step, *leak)
                return
            if not causal:
                return  # an encoder-decoder or bidirectional model: what an output sees is not proven
            if k in (0, -1) and changed[p - k]:
                # no shift, or one shift the wrong way; a target two or more tokens back is a delay or copy task
                # by design (recall the token k back): no slip of a shift gives it, and the model is meant to see it
                self._report(fwd, name, loc, k, step, leak=True)
            elif k >= 2:
                self._report(fwd, name, loc, k, step, leak=False)

        return callback

    def _report(self, fwd: _Forward, name: str, loc: str, k: int, step: int, *, leak: bool) -> None:
        info = fwd.info
        call = f" (called at {fwd.site})" if fwd.site else ""
        if leak:
            what = "the inputs themselves" if k == 0 else f"the inputs {-k} position(s) back"
            msg = (f"the targets of F.{name} at {loc} are {what} at the position of each prediction, and the "
                   f"output of {info.name}{call} at a position changes with the very token it is scored against: "
                   "the model sees its own target, copies it, and learns nothing about what comes next.")
            fix = ("score position t against token t+1 of a causal model: targets = ids[:, 1:] with "
                   "logits[:, :-1] (once), or a causal mask / a unidirectional model; Hugging Face causal LMs take "
                   "labels=input_ids and shift them themselves.")
        else:
            msg = (f"the targets of F.{name} at {loc} are the inputs of {info.name}{call} shifted by {k} positions "
                   f"relative to the predictions: the output at position t is scored against token t+{k}, so the "
                   f"model learns to predict {k} tokens ahead and the next token is never its target. Labels "
                   "shifted twice (by the caller and again by the model or the loss) do this.")
            fix = ("shift the labels once: pass labels=input_ids to a model whose loss shifts them (Hugging Face "
                   "causal LMs do), or shift them yourself and score logits[:, t] against ids[:, t+1].")
        self.s.report("sequence-targets-misaligned", msg, where=f"F.{name} call at {loc}", fix=fix,
                      key=info.name, step=step)

    def _report_future(self, fwd: _Forward, name: str, loc: str, k: int, step: int, module: str,
                       site: str | None) -> None:
        info = fwd.info
        call = f" (called at {fwd.site})" if fwd.site else ""
        target = "the next token" if k == 1 else f"token t+{k}"
        source, where = named_culprit(info, module, site, fwd.site)
        msg = (f"the output of {info.name}{call} at position t is scored by F.{name} at {loc} against {target} of "
               f"its input, and it changes when that token changes: {source} lets each position see later ones. "
               "The model reads the answer instead of predicting it: the training loss falls while the model "
               "cannot predict a token it has not seen (generation, where only the prefix exists, fails).")
        fix = ("make every position see only itself and earlier positions: a causal mask "
               "(nn.TransformerEncoder(x, mask=nn.Transformer.generate_square_subsequent_mask(T), is_causal=True), "
               "F.scaled_dot_product_attention(q, k, v, is_causal=True), attn_mask=torch.triu(..., 1) for "
               "nn.MultiheadAttention), a unidirectional RNN (bidirectional=False), or left-only padding in "
               "convolutions.")
        self.s.report("causal-mask-missing", msg, where=where, fix=fix, key=info.name, step=step)

    def remove_hooks(self) -> None:
        self.hook.remove()
