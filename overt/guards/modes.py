"""Guards at the model boundary: train/eval/no_grad modes, tiny BatchNorm batches,
unregistered submodules, and input device/dtype.

Slugs: ``train-mode-in-eval``, ``eval-mode-in-train``, ``graph-in-eval``,
``batchnorm-tiny-batch``, ``unregistered-submodule``, ``device-mismatch``,
``dtype-mismatch``, ``non-finite`` (inputs).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

from overt.guards.where import class_location, user_location

if TYPE_CHECKING:
    from overt.guards.session import GuardSession, OptInfo

_DROPOUT = (nn.Dropout, nn.Dropout1d, nn.Dropout2d, nn.Dropout3d, nn.AlphaDropout, nn.FeatureAlphaDropout)
_BN = (nn.modules.batchnorm._BatchNorm,)
_EMBED = (nn.Embedding, nn.EmbeddingBag)


class ModelInfo:
    """What the session knows about one watched root module."""

    def __init__(self, module: nn.Module, name: str):
        self.module = module
        self.name = name
        named = list(module.named_modules())  # one walk of the module tree
        mods = [m for _, m in named]
        self.dropbn = [m for m in mods
                       if (isinstance(m, _DROPOUT) and getattr(m, "p", 0) > 0) or isinstance(m, _BN)]
        self.bns = [m for m in self.dropbn if isinstance(m, _BN) and m.track_running_stats is not None]
        self.relus = [m for m in mods if isinstance(m, nn.ReLU)]
        self.sub_names = {id(m): (f"{name}.{n}" if n else name) for n, m in reversed(named)}
        self.has_embedding = any(isinstance(m, _EMBED) for m in mods)
        p = next((p for p in module.parameters() if p.is_floating_point()), None)
        self.param_dtype = p.dtype if p is not None else None
        self.param_device = p.device if p is not None else None
        self.forwards = 0
        self.max_batch = 0
        self.scanned = False
        self.suspects: list[tuple[str, str, str]] = []
        self.post_graph = False
        self.post_eval = False
        self.act_handles: list[Any] = []
        self.post_handle: Any = None
        self.pre_handle: Any = None
        self.fwd_left = 0  # forwards still to look at outside checked steps
        self.nograd_pending: tuple[int, str] | None = None
        self.eval_grad_step: int | None = None
        self.eval_out: dict[str, Any] | None = None
        self.call_loc: str | None = None

    def label(self, m: nn.Module) -> str:
        return self.sub_names.get(id(m), type(m).__name__)


class ModeChecks:
    def __init__(self, session: GuardSession):
        self.s = session
        self.eval_grad_models: list[ModelInfo] = []

    # -- train-mode-in-eval ------------------------------------------------------
    def no_grad_forward(self, info: ModelInfo) -> None:
        """Forward under no_grad/inference_mode: Dropout/BatchNorm should be in eval mode.
        One such forward followed by an optimizer step is a training-time use (a GAN's
        generator, a teacher); two in a row with no step between is an evaluation."""
        active = [m for m in info.dropbn if m.training]
        if not active:
            info.nograd_pending = None
            return
        pending = info.nograd_pending
        if pending is not None and pending[0] == self.s.step:
            self._report_train_mode(info, active, pending[1])
        elif pending is None or pending[0] != self.s.step:
            info.nograd_pending = (self.s.step, user_location(3) or "")

    def _report_train_mode(self, info: ModelInfo, active: list[nn.Module], loc: str) -> None:
        names = ", ".join(f"{info.label(m)} ({type(m).__name__})" for m in active[:4])
        more = f" and {len(active) - 4} more" if len(active) > 4 else ""
        self.s.report(
            "train-mode-in-eval",
            f"{info.name} ran forward under no_grad/inference_mode while {len(active)} Dropout/BatchNorm "
            f"module(s) were in training mode: {names}{more}. Dropout stays active and BatchNorm uses "
            f"and updates batch statistics, so evaluation metrics are noisy and the running statistics "
            f"drift. Fix: call model.eval() before evaluating and .train() before training "
            f"again.",
            where=f"{info.name} forward at {loc}" if loc else info.name,
            key=info.name,
        )

    # -- eval-mode-in-train / graph-in-eval --------------------------------------
    def grad_forward_in_eval(self, info: ModelInfo, args: tuple) -> None:
        """Forward with grad enabled while the model is in eval mode."""
        prev = info.eval_out
        if prev is not None and not prev["reached"] and prev["step"] == self.s.step:
            self._report_graph_in_eval(info, prev)
        info.eval_out = {"step": self.s.step, "reached": False, "loc": None}
        if self.s.armed or info.forwards <= 3 or prev is None:
            info.eval_out["loc"] = user_location(3)
        info.post_eval = True
        if info.dropbn:
            info.eval_grad_step = self.s.step
            if info not in self.eval_grad_models:
                self.eval_grad_models.append(info)

    def watch_eval_output(self, info: ModelInfo, output: Any) -> None:
        record = info.eval_out
        if record is None:
            return
        tensors = _tensors(output)
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
            f"reached a backward pass: autograd built and kept a graph for nothing, costing memory "
            f"and time. Fix: wrap evaluation in `with torch.no_grad():` (or torch.inference_mode()).",
            where=f"{info.name} forward at {loc}" if loc else info.name,
            key=info.name,
        )

    def check_eval_mode_step(self, oi: OptInfo) -> None:
        """At an optimizer step: a model with Dropout/BatchNorm whose training forward ran in eval mode."""
        keep = []
        params = None
        for info in self.eval_grad_models:
            if info.eval_grad_step != self.s.step:
                continue
            if params is None:
                params = {id(p) for p in oi.params}
            if any(id(p) in params for p in info.module.parameters()) and info.eval_out and info.eval_out["reached"]:
                frozen = [m for m in info.dropbn if not m.training]
                names = ", ".join(f"{info.label(m)} ({type(m).__name__})" for m in frozen[:4])
                loc = info.eval_out.get("loc") if info.eval_out else None
                self.s.report(
                    "eval-mode-in-train",
                    f"{oi.name} stepped on {info.name}'s parameters after a forward in eval mode: "
                    f"{len(frozen)} Dropout/BatchNorm module(s) were in eval mode ({names}), so dropout "
                    f"is off and BatchNorm statistics are frozen while training. Fix: call "
                    f"model.train() at the start of each training epoch (after validation).",
                    where=f"{info.name} forward at {loc}" if loc else info.name,
                    key=info.name,
                )
            else:
                keep.append(info)
        self.eval_grad_models = keep

    # -- batchnorm-tiny-batch ----------------------------------------------------
    def tiny_batch(self, info: ModelInfo, args: tuple) -> None:
        x = args[0] if args else None
        if not isinstance(x, torch.Tensor) or x.dim() == 0:
            return
        n = x.shape[0]
        if n > info.max_batch:
            info.max_batch = n
            return
        if n == 1 or (n < 4 and 2 * n <= info.max_batch):
            active = [m for m in info.bns if m.training]
            if active:
                self.s.report(
                    "batchnorm-tiny-batch",
                    f"a training batch of {n} sample(s) (earlier batches had {info.max_batch}) reached "
                    f"{len(active)} BatchNorm module(s) in training mode, e.g. {info.label(active[0])}: "
                    f"statistics from {n} sample(s) are noise (a batch of 1 raises an error). Fix: "
                    f"DataLoader(..., drop_last=True) for training, or a batch size that divides the data.",
                    where=f"{info.name}, {self.s.batch_where() or 'training batch'}",
                    key=info.name,
                )

    # -- unregistered-submodule --------------------------------------------------
    def scan_unregistered(self, info: ModelInfo) -> None:
        info.scanned = True
        for name, m in info.module.named_modules():
            for attr, value in vars(m).items():
                if attr.startswith("_") or not isinstance(value, (list, tuple, dict, set)):
                    continue
                items = list(value.values()) if isinstance(value, dict) else list(value)
                hidden = [v for v in items if isinstance(v, (nn.Module, nn.Parameter))]
                if not hidden:
                    continue
                n_params = sum(p.numel() for v in hidden
                               for p in (v.parameters() if isinstance(v, nn.Module) else [v]))
                owner = f"{info.name}.{name}" if name else info.name
                kind = type(value).__name__
                fix = {"list": "nn.ModuleList", "tuple": "nn.ModuleList", "set": "nn.ModuleList",
                       "dict": "nn.ModuleDict"}[kind]
                if all(isinstance(v, nn.Parameter) for v in hidden):
                    fix = "nn.ParameterList" if kind != "dict" else "nn.ParameterDict"
                loc = class_location(m)
                self.s.report(
                    "unregistered-submodule",
                    f"{owner}.{attr} is a plain Python {kind} holding {len(hidden)} "
                    f"module(s)/parameter(s) ({n_params} weights): they are invisible to "
                    f"parameters(), the optimizer, .to(device) and state_dict(), so they never train "
                    f"and are not saved. Fix: self.{attr} = {fix}(...).",
                    where=f"{owner}.{attr}" + (f" ({type(m).__name__} defined at {loc})" if loc else ""),
                    key=f"{owner}.{attr}",
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
                    f"{info.param_device}. Fix: move the batch with `x = x.to(device)` (assign the "
                    f"result: tensors do not move in place) or move the model with model.to(device).",
                    f"{info.name} input {i} at {loc}",
                ))
            if x.is_floating_point():
                if x.dtype != info.param_dtype and not _autocast():
                    loc = loc or user_location(4) or ""
                    suspects.append((
                        "dtype-mismatch",
                        f"input {i} of {info.name} is {x.dtype} but its parameters are "
                        f"{info.param_dtype}. Fix: convert the data once, e.g. "
                        f"torch.tensor(array, dtype={info.param_dtype}) or x.to({info.param_dtype}).",
                        f"{info.name} input {i} at {loc}",
                    ))
                if x.numel():  # NaN and inf show in the extremes: one reduction, judged at flush
                    self.s.defer(torch.stack(torch.aminmax(x.detach())), self._nonfinite_input(info, i))
            elif x.dtype != torch.bool and not info.has_embedding:
                loc = loc or user_location(4) or ""
                suspects.append((
                    "dtype-mismatch",
                    f"input {i} of {info.name} is {x.dtype} (integer features) but the model has no "
                    f"embedding layer and its parameters are {info.param_dtype}. Fix: convert features "
                    f"with x.float() (and scale them), or use nn.Embedding for ids.",
                    f"{info.name} input {i} at {loc}",
                ))
        info.suspects = suspects

    def _nonfinite_input(self, info: ModelInfo, i: int):
        step = self.s.step
        where = f"{info.name} input {i}, {self.s.batch_where() or 'training batch'}"

        def callback(vals: list[float]) -> None:
            if not (math.isfinite(vals[0]) and math.isfinite(vals[1])):
                self.s.stop("non-finite",
                            f"input {i} of {info.name} contains NaN or inf at step {step}: every weight "
                            f"it touches becomes NaN. Fix: clean the data (check for missing values, "
                            f"division by zero in preprocessing) or filter such samples.",
                            where, key=f"input:{info.name}", can_stop=self.s.can_stop)
        return callback

    # -- end of run ----------------------------------------------------------------
    def end_of_run(self) -> None:
        for info in self.s.models.values():
            pending = info.nograd_pending
            if pending is not None and pending[0] == self.s.step:
                active = [m for m in info.dropbn if m.training]
                if active:
                    self._report_train_mode(info, active, pending[1])
            rec = info.eval_out
            if rec is not None and not rec["reached"] and rec["step"] == self.s.step:
                self._report_graph_in_eval(info, rec)


def _autocast() -> bool:
    return torch.is_autocast_enabled() if hasattr(torch, "is_autocast_enabled") else False


def _tensors(output: Any) -> list[torch.Tensor]:
    if isinstance(output, torch.Tensor):
        return [output]
    if isinstance(output, (list, tuple)):
        return [t for t in output[:8] if isinstance(t, torch.Tensor)]
    if isinstance(output, dict):
        return [t for t in list(output.values())[:8] if isinstance(t, torch.Tensor)]
    return []
