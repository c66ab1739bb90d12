"""Guards at the model boundary: train/eval/no_grad modes, tiny BatchNorm batches,
unregistered submodules, and input device/dtype.

Slugs: ``train-mode-in-eval``, ``eval-mode-in-train``, ``graph-in-eval``,
``batchnorm-tiny-batch``, ``unregistered-submodule``, ``unregistered-tensor``, ``device-mismatch``,
``dtype-mismatch``, ``non-finite`` (inputs).
"""

from __future__ import annotations

import math
import weakref
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

from overt.guards.check import Check
from overt.guards.evalrepeat import fingerprint, first_tensor
from overt.guards.watched import _DROPOUT, output_tensors
from overt.guards.where import class_location, user_location
from overt.guards.tensorattrs import harmless_attributes
from overt.text import first_names

if TYPE_CHECKING:
    from overt.guards.session import GuardSession
    from overt.guards.watched import ModelInfo, OptInfo


MC_LOOKS = 512  # inputs of one no_grad phase fingerprinted to tell Monte Carlo sampling from an evaluation

_CONTAINER_FIX = {"list": "nn.ModuleList", "tuple": "nn.ModuleList", "set": "nn.ModuleList", "dict": "nn.ModuleDict"}


def hidden_containers(model: nn.Module) -> list[dict[str, Any]]:
    """Attributes of ``model`` or its submodules that are plain list/tuple/dict/set holding modules or
    parameters: invisible to ``parameters()``, ``.to()`` and ``state_dict()``.  One dict per attribute:
    ``name`` (the submodule's qualified name, "" for ``model``), ``module``, ``attr``, ``kind``,
    ``modules`` (how many), ``weights`` (their elements) and ``fix`` (the container to use)."""
    found = []
    # without super().__init__() there is no module registry to walk: look at the object itself
    registry = "_modules" in vars(model)
    pairs = list(model.named_modules()) if registry else [("", model)]
    # a plain list may also hold layers registered another way (pyGAT keeps its attention heads in a
    # list and add_module()s each one): those are seen by parameters(), .to() and state_dict()
    seen = {id(m) for _, m in pairs} | ({id(p) for p in model.parameters()} if registry else set())
    for name, module in pairs:
        for attr, value in vars(module).items():
            if attr.startswith("_") or not isinstance(value, (list, tuple, dict, set)):
                continue
            items = list(value.values()) if isinstance(value, dict) else list(value)
            hidden = [v for v in items if isinstance(v, (nn.Module, nn.Parameter)) and id(v) not in seen]
            if not hidden:
                continue
            weights = sum(p.numel() for v in hidden for p in (v.parameters() if isinstance(v, nn.Module) else [v]))
            kind = type(value).__name__
            fix = _CONTAINER_FIX.get(kind, "nn.ModuleList")
            if all(isinstance(v, nn.Parameter) for v in hidden):
                fix = "nn.ParameterDict" if kind == "dict" else "nn.ParameterList"
            found.append({"name": name, "module": module, "attr": attr, "kind": kind, "modules": len(hidden),
                          "weights": weights, "fix": fix})
    return found


def _attribute_where(owner: str, attr: str, module: nn.Module) -> str:
    """``Net.blocks (Net defined at model.py:12)``."""
    loc = class_location(module)
    return f"{owner}.{attr}" + (f" ({type(module).__name__} defined at {loc})" if loc else "")


class _Modes:
    """This check's state for one watched model."""

    __slots__ = ("max_batch", "scanned", "suspects", "post_eval", "nograd_pending", "eval_grad_step", "eval_out",
                 "mc_look", "mc_first", "mc_printing", "mc_prints", "mc_suspect")

    def __init__(self) -> None:
        self.max_batch = 0  # the largest training batch seen
        self.scanned = False  # looked for unregistered submodules
        self.suspects: list[tuple[str, str, str]] = []  # (slug, message, where): reported if the forward fails
        self.post_eval = False  # watch the output of this eval-mode forward
        self.nograd_pending: tuple[int, str] | None = None  # (step, location) of a no_grad forward in train mode
        self.eval_grad_step: int | None = None  # step of the last grad-enabled eval-mode forward
        self.eval_out: dict[str, Any] | None = None  # that forward: step, whether backward reached it, location
        self.mc_look = False  # this no_grad forward in training mode has only Dropout active: its input is looked at
        self.mc_first: Any = None  # weak reference to the phase's first such input (fingerprinted only if a second comes)
        self.mc_printing = False  # a second such forward came in this phase: inputs are fingerprinted
        self.mc_prints: list[tuple[tuple[int, ...], torch.Tensor]] = []  # (shape, fingerprint) of this phase's inputs
        self.mc_suspect: tuple[str, list[nn.Module]] | None = None  # (location, active) judged at the phase's end


class ModeChecks(Check):
    name = "modes"

    def __init__(self, session: GuardSession):
        super().__init__(session)
        self.per_model: dict[int, _Modes] = {}  # id(ModelInfo) -> this check's state for it
        self.eval_grad_models: list[ModelInfo] = []
        self.twice: list[ModelInfo] = []  # run twice under no_grad in training mode this step, held by no optimizer

    def _of(self, info: ModelInfo) -> _Modes:
        st = self.per_model.get(id(info))
        if st is None:
            st = self.per_model[id(info)] = _Modes()
        return st

    # -- the hooks -----------------------------------------------------------------
    def on_train_forward(self, info: ModelInfo, args: tuple) -> None:
        if info.bns:
            self.tiny_batch(info, args)

    def on_checked_forward(self, info: ModelInfo, args: tuple, light: bool) -> None:
        if not self._of(info).scanned:
            self.scan_unregistered(info)
        self.boundary(info, args)

    def on_eval_forward(self, info: ModelInfo, args: tuple) -> None:
        self.grad_forward_in_eval(info, args)

    def on_no_grad_forward(self, info: ModelInfo) -> None:
        if info.dropbn:
            self.no_grad_forward(info)

    def eval_looks_left(self, info: ModelInfo) -> bool:
        if info.module.training:  # under no_grad: train-mode-in-eval is two such forwards in a row
            return bool(info.dropbn) and not self.s.reporter.has("train-mode-in-eval", info.name)
        return torch.is_grad_enabled()  # eval mode with gradients on: graph-in-eval, eval-mode-in-train

    def on_forward_end(self, info: ModelInfo, output: Any, failed: bool) -> None:
        st = self.per_model.get(id(info))
        if st is None:
            return
        if st.suspects:
            suspects, st.suspects = st.suspects, []
            if failed:  # the forward raised: say which input caused it
                for slug, message, fix, where in suspects:
                    self.s.report(slug, message, where, key=where, fix=fix)
        if st.post_eval and not failed:
            st.post_eval = False
            self.watch_eval_output(info, output)

    def on_eval_input(self, info: ModelInfo, args: tuple) -> None:
        st = self.per_model.get(id(info))
        if st is None or not st.mc_look:
            return
        st.mc_look = False
        x = first_tensor(args)
        if x is None:
            return
        if not st.mc_printing:  # the phase's first forward: no device work unless a second one follows
            try:
                st.mc_first = weakref.ref(x)
            except TypeError:
                st.mc_first = None
            return
        first = st.mc_first() if st.mc_first is not None else None
        st.mc_first = None
        for t in (first, x):
            printed = fingerprint(t) if t is not None and len(st.mc_prints) < MC_LOOKS else None
            if printed is not None:
                st.mc_prints.append((tuple(t.shape), printed))

    def on_step(self, oi: OptInfo) -> None:
        self.judge_sampling()
        self.judge_twice()
        self.check_eval_mode_step(oi)

    def on_crash(self, error: BaseException) -> None:
        for info in self.s.models.values():
            st = self.per_model.get(id(info))
            if st is not None and st.suspects:
                for slug, message, fix, where in st.suspects:
                    self.s.report(slug, message, where, key=where, fix=fix)
                st.suspects = []

    # -- train-mode-in-eval ------------------------------------------------------
    def no_grad_forward(self, info: ModelInfo) -> None:
        """Forward under no_grad/inference_mode: Dropout/BatchNorm should be in eval mode.
        One such forward followed by an optimizer step is a training-time use (a GAN's
        generator, a teacher); two in a row with no step between is an evaluation -- of a model an optimizer
        holds.  Two of a model no optimizer holds, in a step an optimizer step ends, are a teacher's or a frozen
        encoder's training-time use (:meth:`judge_twice`; frozen-model-in-train-mode's to name)."""
        st = self._of(info)
        active = [m for m in info.dropbn if m.training]
        dropout_only = all(isinstance(m, _DROPOUT) for m in active)
        if active and not info.module.training and dropout_only:
            active = []  # model.eval() and then its Dropout layers switched on by hand: Monte Carlo dropout, deliberate
        if not active:
            st.nograd_pending = None
            return
        pending = st.nograd_pending
        again = pending is not None and pending[0] == self.s.step
        if not again:  # a new no_grad phase
            st.mc_prints, st.mc_first, st.mc_printing = [], None, False
        st.mc_look = dropout_only
        st.mc_printing = again and dropout_only
        if again:
            if self._trained(info):
                self._suspect(info, active, pending[1])
            elif info not in self.twice:
                # no known optimizer holds it (a teacher run on two views, or the optimizer is not known until
                # its first step): judged at the next optimizer step (on_step), or at the end of the run
                self.twice.append(info)
                self.s.watch_steps(self, True)
        elif pending is None or pending[0] != self.s.step:
            st.nograd_pending = (self.s.step, user_location(3) or "")

    def _trained(self, info: ModelInfo) -> bool:
        """Whether a known optimizer holds one of ``info``'s parameters (host lookups only)."""
        held = {id(p) for oi in self.s.optimizers.values() for p in oi.params}
        return any(id(p) in held for p in info.module.parameters())

    def judge_twice(self) -> None:
        """At an optimizer step, the models run twice under no_grad in training mode during this step: one an
        optimizer holds was evaluated in training mode (train-mode-in-eval); one no optimizer holds (a teacher,
        a frozen encoder, an EMA target) fed the training, which is frozen-model-in-train-mode's to judge."""
        twice, self.twice = self.twice, []
        for info in twice:
            st = self._of(info)
            pending = st.nograd_pending
            active = [m for m in info.dropbn if m.training]
            if pending is not None and pending[0] == self.s.step and active and self._trained(info):
                self._suspect(info, active, pending[1])
                self._judge_sampling(info, st)

    def judge_sampling(self) -> None:
        """At the end of a no_grad phase (an optimizer step, the end of the run): judge the suspects whose
        active layers were all Dropout (:meth:`_suspect`)."""
        for info in self.s.models.values():
            st = self.per_model.get(id(info))
            if st is not None and st.mc_suspect is not None:
                self._judge_sampling(info, st)

    def _judge_sampling(self, info: ModelInfo, st: _Modes) -> None:
        """Monte Carlo dropout in training mode (``model.train()`` under ``no_grad``, each input passed several
        times to sample the dropout masks, as BALD does) feeds the same input values again within one phase; an
        evaluation left in training mode feeds each batch once.  Report unless two of the phase's fingerprinted
        inputs of one shape are equal (read with the deferred values: no host read here)."""
        suspect, prints = st.mc_suspect, st.mc_prints
        st.mc_suspect, st.mc_prints, st.mc_first = None, [], None
        if suspect is None:
            return
        loc, active = suspect
        groups: dict[tuple[int, ...], list[torch.Tensor]] = {}
        for shape, printed in prints:
            groups.setdefault(shape, []).append(printed)
        repeats = []
        with torch.no_grad():
            for same in groups.values():
                if len(same) >= 2:
                    p = torch.stack(same)
                    eq = (p[:, None, :] == p[None, :, :]).all(-1)
                    eq.fill_diagonal_(False)
                    repeats.append(eq.any())
        if not repeats:
            self._report_train_mode(info, active, loc)
            return

        def judge(vals: list[float]) -> None:
            if not any(v > 0.5 for v in vals):
                self._report_train_mode(info, active, loc)

        self.s.defer(torch.stack([r.to(repeats[0].device) for r in repeats]).to(torch.float32), judge)

    def _suspect(self, info: ModelInfo, active: list[nn.Module], loc: str) -> None:
        """A trained model evaluated in training mode: reported now, unless its active layers are all Dropout and
        the phase's first input is still known -- Monte Carlo sampling or a forgotten ``model.eval()``, told apart
        at the phase's end (:meth:`_judge_sampling`)."""
        st = self._of(info)
        if all(isinstance(m, _DROPOUT) for m in active) and (st.mc_first is not None or st.mc_prints):
            if st.mc_suspect is None:
                st.mc_suspect = (loc, active)
                self.s.watch_steps(self, True)
            return
        self._report_train_mode(info, active, loc)

    def _report_train_mode(self, info: ModelInfo, active: list[nn.Module], loc: str) -> None:
        names = first_names([f"{info.label(m)} ({type(m).__name__})" for m in active], 4)
        self.s.report(
            "train-mode-in-eval",
            f"{info.name} ran forward under no_grad/inference_mode while {len(active)} Dropout/BatchNorm "
            f"module(s) were in training mode: {names}. Dropout stays active and BatchNorm uses "
            "and updates batch statistics, so evaluation metrics are noisy and the running statistics "
            "drift.",
            fix="call model.eval() before evaluating and .train() before training "
            "again.",
            where=f"{info.name} forward at {loc}" if loc else info.name,
            key=info.name,
        )

    # -- eval-mode-in-train / graph-in-eval --------------------------------------
    def grad_forward_in_eval(self, info: ModelInfo, args: tuple) -> None:
        """Forward with grad enabled while the model is in eval mode."""
        st = self._of(info)
        prev = st.eval_out
        if prev is not None and not prev["reached"] and prev["step"] == self.s.step:
            self._report_graph_in_eval(info, prev)
        st.eval_out = {"step": self.s.step, "reached": False, "loc": None}
        if self.s.armed or info.forwards <= 3 or prev is None:
            st.eval_out["loc"] = user_location(3)
        st.post_eval = True
        if info.dropbn:
            st.eval_grad_step = self.s.step
            if info not in self.eval_grad_models:
                self.eval_grad_models.append(info)
                self.s.watch_steps(self, True)

    def watch_eval_output(self, info: ModelInfo, output: Any) -> None:
        record = self._of(info).eval_out
        if record is None:
            return
        tensors = output_tensors(output)
        nodes = [t.grad_fn for t in tensors if t.grad_fn is not None]
        if not nodes:
            record["reached"] = True  # nothing to keep: no graph was built
            return

        def reached(*_: Any) -> None:
            record["reached"] = True

        for node in nodes[:4]:
            node.register_prehook(lambda grad_outputs: reached())

    def _report_graph_in_eval(self, info: ModelInfo, record: dict[str, Any]) -> None:
        loc = record.get("loc")
        self.s.report(
            "graph-in-eval",
            f"{info.name} ran forward in eval mode with gradients enabled, and the output never "
            "reached a backward pass: autograd built and kept a graph for nothing, costing memory "
            "and time.",
            fix="wrap evaluation in `with torch.no_grad():` (or torch.inference_mode()).",
            where=f"{info.name} forward at {loc}" if loc else info.name,
            key=info.name,
        )

    def check_eval_mode_step(self, oi: OptInfo) -> None:
        """At an optimizer step: a model with Dropout/BatchNorm whose training forward ran in eval mode."""
        keep = []
        params = None
        for info in self.eval_grad_models:
            st = self._of(info)
            if st.eval_grad_step != self.s.step:
                continue
            if params is None:
                params = {id(p) for p in oi.params}
            if any(id(p) in params for p in info.module.parameters()) and st.eval_out and st.eval_out["reached"]:
                frozen = [m for m in info.dropbn if not m.training]
                names = first_names([f"{info.label(m)} ({type(m).__name__})" for m in frozen], 4)
                loc = st.eval_out.get("loc") if st.eval_out else None
                self.s.report(
                    "eval-mode-in-train",
                    f"{oi.name} stepped on {info.name}'s parameters after a forward in eval mode: "
                    f"{len(frozen)} Dropout/BatchNorm module(s) were in eval mode ({names}), so dropout "
                    "is off and BatchNorm statistics are frozen while training.",
                    fix="call "
                    "model.train() at the start of each training epoch (after validation).",
                    where=f"{info.name} forward at {loc}" if loc else info.name,
                    key=info.name,
                )
            else:
                keep.append(info)
        self.eval_grad_models = keep
        if not keep and not self.twice and not any(st.mc_suspect for st in self.per_model.values()):
            self.s.watch_steps(self, False)

    # -- batchnorm-tiny-batch ----------------------------------------------------
    def tiny_batch(self, info: ModelInfo, args: tuple) -> None:
        x = args[0] if args else None
        if not isinstance(x, torch.Tensor) or x.dim() == 0:
            return
        n = x.shape[0]
        st = self._of(info)
        if n > st.max_batch:
            st.max_batch = n
            return
        if n == 1 or (n < 4 and 2 * n <= st.max_batch):
            active = [m for m in info.bns if m.training]
            if active:
                self.s.report(
                    "batchnorm-tiny-batch",
                    f"a training batch of {n} sample(s) (earlier batches had {st.max_batch}) reached "
                    f"{len(active)} BatchNorm module(s) in training mode, e.g. {info.label(active[0])}: "
                    f"statistics from {n} sample(s) are noise (a batch of 1 raises an error).",
                    fix="drop_last=True for the training DataLoader (drop_last=true in overt's engine), or a "
                    "batch size that divides the data.",
                    where=f"{info.name}, {self.s.batch_where() or 'training batch'}",
                    key=info.name,
                )

    # -- unregistered-submodule --------------------------------------------------
    def scan_unregistered(self, info: ModelInfo) -> None:
        self._of(info).scanned = True
        for h in hidden_containers(info.module):
            owner = f"{info.name}.{h['name']}" if h["name"] else info.name
            self.s.report(
                "unregistered-submodule",
                f"{owner}.{h['attr']} is a plain Python {h['kind']} holding {h['modules']} "
                f"module(s)/parameter(s) ({h['weights']} weights): they are invisible to "
                "parameters(), the optimizer, .to(device) and state_dict(), so they never train "
                "and are not saved.",
                fix=f"self.{h['attr']} = {h['fix']}(...).",
                where=_attribute_where(owner, h["attr"], h["module"]), key=f"{owner}.{h['attr']}",
            )
        for name, m in info.module.named_modules():
            self.plain_tensors(info, name, m)

    # -- unregistered-tensor -----------------------------------------------------
    def plain_tensors(self, info: ModelInfo, name: str, m: nn.Module) -> None:
        """Tensors assigned as plain attributes of a user's module (PyTorch's own modules keep
        theirs on purpose): they belong in a buffer.  A module whose class overrides ``_apply`` (what
        ``.to()``, ``.cuda()`` and ``.half()`` call) moves what it chooses -- a torchmetrics ``Metric``
        moves its ``add_state`` tensors there and keeps them out of ``state_dict`` on purpose -- so
        "model.to(device) leaves it where it is" is not known of its attributes: quiet.  So is an attribute
        the class's source proves harmless (``tensorattrs``: read only while building, or a shape-only
        constant its own methods move to their device)."""
        if type(m).__module__.startswith("torch.") or type(m)._apply is not nn.Module._apply:
            return
        quiet = None
        for attr, value in vars(m).items():
            if attr.startswith("_") or not isinstance(value, torch.Tensor) or isinstance(value, nn.Parameter):
                continue
            if quiet is None:
                quiet = harmless_attributes(type(m))
            if attr in quiet:
                continue
            owner = f"{info.name}.{name}" if name else info.name
            shape = "x".join(map(str, value.shape)) or "scalar"
            self.s.report(
                "unregistered-tensor",
                f"{owner}.{attr} is a plain tensor attribute ({shape} {str(value.dtype).replace('torch.', '')} on "
                f"{value.device}), not a buffer: model.to(device) leaves it where it is (a device mismatch on "
                "the GPU), and state_dict() and checkpoints do not save it.",
                fix=f"self.register_buffer({attr!r}, tensor) (persistent=False if it must not be saved), "
                "or nn.Parameter if it should train.",
                where=_attribute_where(owner, attr, m), key=f"tensor:{owner}.{attr}",
            )

    # -- device / dtype at the model boundary -------------------------------------
    def boundary(self, info: ModelInfo, args: tuple) -> None:
        if info.param_device is None:
            return
        suspects = []
        loc = None
        for i, x in enumerate(args[:4]):
            if not isinstance(x, torch.Tensor):
                continue
            if x.device != info.param_device:
                loc = loc or user_location(4) or ""
                suspects.append((
                    "device-mismatch",
                    f"input {i} of {info.name} is on {x.device} but its parameters are on "
                    f"{info.param_device}.",
                    "move the batch with `x = x.to(device)` (assign the "
                    "result: tensors do not move in place) or move the model with model.to(device).",
                    f"{info.name} input {i} at {loc}",
                ))
            if x.is_floating_point():
                if x.dtype != info.param_dtype and not _autocast():
                    loc = loc or user_location(4) or ""
                    suspects.append((
                        "dtype-mismatch",
                        f"input {i} of {info.name} is {x.dtype} but its parameters are "
                        f"{info.param_dtype}.",
                        f"convert the data once, e.g. "
                        f"torch.tensor(array, dtype={info.param_dtype}) or x.to({info.param_dtype}).",
                        f"{info.name} input {i} at {loc}",
                    ))
                if x.numel():  # NaN and inf show in the extremes: one reduction, judged at flush
                    v = x.detach()
                    # an additive attention mask holds only 0 and -inf (nn.Transformer's causal mask): not data
                    additive = ((v == 0) | (v == float("-inf"))).all().to(v.dtype)
                    self.s.defer(torch.stack((*torch.aminmax(v), additive)), self._nonfinite_input(info, i))
            elif x.dtype != torch.bool and not info.has_embedding:
                loc = loc or user_location(4) or ""
                suspects.append((
                    "dtype-mismatch",
                    f"input {i} of {info.name} is {x.dtype} (integer features) but the model has no "
                    f"embedding layer and its parameters are {info.param_dtype}.",
                    "convert features with x.float() (and scale them), or use nn.Embedding for ids.",
                    f"{info.name} input {i} at {loc}",
                ))
        self._of(info).suspects = suspects

    def _nonfinite_input(self, info: ModelInfo, i: int):
        step = self.s.step
        where = f"{info.name} input {i}, {self.s.batch_where() or 'training batch'}"

        def callback(vals: list[float]) -> None:
            if not (math.isfinite(vals[0]) and math.isfinite(vals[1])) and not vals[2]:
                self.s.stop("non-finite",
                            f"input {i} of {info.name} contains NaN or inf at step "
                            f"{self.s.run_step(step)}: every weight "
                            "it touches becomes NaN.",
                            fix="clean the data (check for missing values, "
                            "division by zero in preprocessing) or filter such samples.",
                            where=where, key=f"input:{info.name}", can_stop=self.s.can_stop)
        return callback

    # -- end of run ----------------------------------------------------------------
    def end_of_run(self) -> None:
        for info in self.s.models.values():
            st = self._of(info)
            pending = st.nograd_pending
            if pending is not None and pending[0] == self.s.step:
                active = [m for m in info.dropbn if m.training]
                if active:
                    self._suspect(info, active, pending[1])
            self._judge_sampling(info, st)
            rec = st.eval_out
            if rec is not None and not rec["reached"] and rec["step"] == self.s.step:
                self._report_graph_in_eval(info, rec)


def _autocast() -> bool:
    return torch.is_autocast_enabled() if hasattr(torch, "is_autocast_enabled") else False
