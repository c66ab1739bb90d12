"""Guards on BatchNorm running statistics that do not describe the data they normalise
(slugs ``running-stats-never-computed`` and ``batchnorm-momentum-inverted``).

In eval mode a BatchNorm layer normalises with its running statistics, which stand for the
statistics of the training data at that layer under the weights being evaluated.  Two ways to break
that, each proven before anything is said:

* ``running-stats-never-computed``: on an evaluation forward (eval mode) a BatchNorm layer still holds
  the statistics it was built with (mean 0, variance 1, exactly: also after batches tracked with
  momentum 0, a recomputation with ``momentum = 0.`` instead of ``None``) although its own weight and
  bias have moved from their initial 1 and 0 (they were trained, averaged or loaded), and the inputs
  it receives are far from those statistics on most channels (:data:`FAR_SHARE` of them with a mean
  more than :data:`FAR_Z` running standard deviations away, or a variance more than :data:`FAR_RATIO`
  times off).  An averaged copy whose parameters alone were averaged (SWA by hand, an EMA over
  ``parameters()``), or a checkpoint of the parameters only, is evaluated this way.  An untrained
  model evaluated before training (weight 1, bias 0) is not one.  The statistics are computed on
  the device and read with the guards' deferred reads; the layers of a model are looked at on
  :data:`LOOKS` evaluation forwards at most, each at another optimizer step.  A layer kept in eval mode
  while its model trained (frozen BatchNorm) normalised with the same statistics in training: quiet,
  and so are copies evaluated in a run where such a layer was seen.
* ``batchnorm-momentum-inverted``: a BatchNorm trained (a training forward with gradients, looked at
  once per model on a checked step) with a ``momentum`` above :data:`MAX_MOMENTUM`.  PyTorch's
  momentum is the weight of the newest batch (Keras's is the weight of the old average: 0.99 there
  is 0.01 here), so the running statistics are mostly the last training batch's.  Host attributes
  only.  ``momentum=1`` is no Keras value (in Keras it would never update the average: nobody writes it): in
  PyTorch it keeps the latest batch's statistics, which transductive BatchNorm (MAML) does on purpose.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import torch
from torch import nn
from torch.nn.modules.batchnorm import _BatchNorm

from overt.guards.check import Check
from overt.guards.oneshot import OneShotHook
from overt.guards.where import user_location

if TYPE_CHECKING:
    from overt.guards.watched import ModelInfo

FAR_Z = 1.0  # channel mean this many running standard deviations from the running mean
FAR_RATIO = 4.0  # channel variance this many times above or below the running variance
FAR_SHARE = 0.5  # of the layer's channels
MIN_VALUES = 16  # values per channel in the evaluation batch (samples x positions)
LOOKS = 3  # evaluation forwards looked at per model (at distinct optimizer steps)
MAX_LAYERS = 64  # BatchNorm layers looked at per forward
MAX_MOMENTUM = 0.5
KERAS_NEVER_UPDATES = 1.0  # momentum=1: the latest batch's statistics on purpose (transductive BN)


def _norms(info: ModelInfo) -> list[tuple[str, _BatchNorm]]:
    """The model's BatchNorm layers that keep running statistics, with their names in the model."""
    out = []
    for m in info.bns[:MAX_LAYERS]:
        if m.track_running_stats and m.running_mean is not None and m.running_var is not None:
            out.append((info.sub_names.get(id(m), info.name), m))
    return out


class NormStatsChecks(Check):
    name = "normstats"

    def __init__(self, session: Any):
        super().__init__(session)
        self.looks: dict[int, list[int]] = {}  # id(ModelInfo) -> the steps looked at
        self.momentum_seen: set[int] = set()  # id(ModelInfo) whose momenta were read
        self.trained: set[int] = set()  # id(ModelInfo) with a checked training forward
        self.frozen: set[int] = set()  # id(BatchNorm) in eval mode in a checked training forward
        self.hook = OneShotHook()
        self.handles: list[Any] = []
        self.where: str | None = None

    # -- momentum: on a checked training forward --------------------------------------------
    def on_checked_forward(self, info: ModelInfo, args: tuple, light: bool) -> None:
        if not info.bns:
            return
        self.trained.add(id(info))
        # a BatchNorm kept in eval mode while its model trains normalises with its running statistics in
        # training too: its weights learned for them, whatever they are
        self.frozen.update(id(m) for m in info.bns if not m.training)
        if id(info) in self.momentum_seen:
            return
        self.momentum_seen.add(id(info))
        bad = [(name, m) for name, m in _norms(info)
               if m.training and isinstance(m.momentum, float) and MAX_MOMENTUM < m.momentum < KERAS_NEVER_UPDATES]
        if not bad:
            return
        name, m = bad[0]
        layer = name
        others = f" (and {len(bad) - 1} more BatchNorm layers)" if len(bad) > 1 else ""
        self.s.report(
            "batchnorm-momentum-inverted",
            f"{type(m).__name__} {layer}{others} is trained with momentum={m.momentum:g}: in PyTorch the momentum "
            f"is the weight of the newest batch in the running statistics (Keras's and TensorFlow's is the weight of "
            f"the old average), so its running mean and variance are {m.momentum:.0%} the last training batch's. "
            "Evaluation then normalises every input with the statistics of whichever batch came last (a small "
            "last batch, a batch of one class) instead of the training data's, and its metrics move with it.",
            fix=f"pass momentum={1 - m.momentum:.2g} (1 minus the Keras value; PyTorch's default is 0.1), or "
            "momentum=None for a cumulative average.",
            where=layer, key=info.name,
        )

    # -- statistics never computed: on an evaluation forward ----------------------------------
    def on_eval_forward(self, info: ModelInfo, args: tuple) -> None:
        self._arm(info)

    def on_no_grad_forward(self, info: ModelInfo) -> None:
        self._arm(info)

    def eval_looks_left(self, info: ModelInfo) -> bool:
        steps = self.looks.get(id(info), [])
        return bool(info.bns) and len(steps) < LOOKS and self.s.step not in steps \
            and not self.s.reporter.has("running-stats-never-computed", info.name)

    def _arm(self, info: ModelInfo) -> None:
        self.hook.clear_stale()
        if self.hook.pending or info.module.training or not info.bns:
            return
        steps = self.looks.setdefault(id(info), [])
        if len(steps) >= LOOKS or self.s.step in steps \
                or self.s.reporter.has("running-stats-never-computed", info.name):
            return
        layers = [(n, m) for n, m in _norms(info) if not m.training]
        if not layers:
            return
        steps.append(self.s.step)
        self.where = user_location(2)
        for name, m in layers:
            self.handles.append(m.register_forward_pre_hook(self._layer(info, name)))
        self.hook.place(info.module, self._after)

    def _after(self, module: nn.Module, args: tuple, output: Any) -> None:
        self.hook.fired()
        self._unhook()

    def _unhook(self) -> None:
        for h in self.handles:
            h.remove()
        self.handles = []

    def _layer(self, info: ModelInfo, name: str):
        step = self.s.step
        where = self.where

        def pre(m: _BatchNorm, args: tuple) -> None:
            x = args[0] if args else None
            if not isinstance(x, torch.Tensor) or not x.is_floating_point() or x.dim() < 2 or m.training:
                return
            if x.numel() // max(x.shape[1], 1) < MIN_VALUES or x.shape[1] != m.running_mean.numel():
                return
            with torch.no_grad():
                dims = [d for d in range(x.dim()) if d != 1]
                xf = x.detach().float()
                var, mean = torch.var_mean(xf, dim=dims, correction=0)
                rv = m.running_var.detach().float() + m.eps
                rm = m.running_mean.detach().float()
                z = (mean - rm).abs() / rv.sqrt()
                ratio = (var + 1e-12) / rv
                far = (z > FAR_Z) | (ratio > FAR_RATIO) | (ratio < 1 / FAR_RATIO)
                # the initial values exactly, whatever num_batches_tracked says: batches tracked with momentum 0
                # (a recomputation with momentum=0. instead of None) leave them there too
                init = (rm == 0).all() & (m.running_var == 1).all()
                tracked = (m.num_batches_tracked.float() if m.num_batches_tracked is not None
                           else torch.zeros((), device=x.device))
                if m.weight is not None and m.bias is not None:
                    moved = (m.weight.detach() != 1).any() | (m.bias.detach() != 0).any()
                else:
                    moved = torch.tensor(step > 0, device=x.device)
                value = torch.stack([far.float().mean(), init.float(), moved.float(),
                                     z.median(), ratio.log().abs().median(), tracked.to(x.device)])
            self.s.defer(value, lambda v: self._judge(info, name, m, v, where))

        return pre

    def _judge(self, info: ModelInfo, name: str, m: _BatchNorm, v: list[float], where: str | None) -> None:
        far, init, moved, z, log_ratio, tracked = v
        if far < FAR_SHARE or not init or not moved or id(m) in self.frozen:
            return
        if self.frozen and id(info) not in self.trained:
            return  # a copy of a model trained with frozen BatchNorm layers: its statistics may be the trained ones
        layer = name
        averaged = type(info.module).__name__ == "AveragedModel"
        channels = m.running_mean.numel()
        far_text = (f"on {far:.0%} of its {channels} channels the evaluation batch is far from them (median channel "
                    f"mean {z:.1f} standard deviations off, variance {math.exp(log_ratio):.1f}x off), so every layer "
                    "after it sees activations unlike any it was trained on and the evaluated metrics are those of a "
                    "broken model.")
        at = f"{layer} (evaluated at {where})" if where else layer
        if tracked >= 1:
            # batches were tracked and the statistics are still exactly 0 and 1: each batch's weight in the
            # running average is the momentum, and it was 0
            self.s.report(
                "running-stats-never-computed",
                f"{type(m).__name__} {layer} has tracked {int(tracked)} training batches "
                f"(num_batches_tracked), yet its running mean and variance are still exactly their "
                f"initial 0 and 1: those batches were averaged in with momentum 0, the weight PyTorch gives each new "
                f"batch, so the recomputation of the statistics computed nothing. Its weight and bias were trained"
                f"{' (an averaged model)' if averaged else ''}, and evaluation normalises with statistics that are "
                f"not the data's: {far_text} momentum=None (a cumulative average) and momentum=0. are not the same "
                "thing.",
                fix="recompute with momentum=None (what torch.optim.swa_utils.update_bn does: reset_running_stats(), "
                "momentum=None, a pass over the training data in train mode under no_grad, then the momentum put "
                "back), or call update_bn(train_loader, model) itself.",
                where=at, key=info.name,
            )
            return
        self.s.report(
            "running-stats-never-computed",
            f"{type(m).__name__} {layer} normalises evaluation inputs with the running statistics it was built "
            f"with (mean 0, variance 1, no batch ever tracked) while its weight and bias were trained"
            f"{' (an averaged model)' if averaged else ''}: {far_text} A copy whose parameters alone were averaged or "
            "copied (SWA or an EMA over parameters(), a checkpoint of named_parameters()) leaves the BatchNorm "
            "buffers at their initial values.",
            fix="recompute the statistics for the evaluated weights before evaluating: "
            "torch.optim.swa_utils.update_bn(train_loader, model) for an averaged model; or carry the buffers "
            "with the parameters (an EMA over state_dict() values, AveragedModel(..., use_buffers=True), saving and "
            "loading model.state_dict()).",
            where=at, key=info.name,
        )

    def remove_hooks(self) -> None:
        self.hook.remove()
        self._unhook()
