"""``strategy=ddp`` and ``strategy=fsdp``: wrap the model on every rank with PyTorch's own parallelism.

- ``ddp``: :class:`torch.nn.parallel.DistributedDataParallel` (``device_ids=[LOCAL_RANK]`` on CUDA).
  The engine keeps the user's module as ``trainer.model`` (checkpoints and weights have no
  ``module.`` prefix) and runs the forward through the DDP wrapper.
- ``fsdp``: FSDP2, :func:`torch.distributed.fsdp.fully_shard` on each submodule whose class
  name (or qualified name) is in ``fsdp_wrap`` -- by default every direct child that holds
  parameters -- then on the root.  ``precision`` becomes a :class:`MixedPrecisionPolicy`
  (``bf16``: parameters and compute in bfloat16, gradients reduced in float32).  FSDP2
  replaces the parameters by sharded DTensors, so the optimizer's parameter groups are
  re-pointed at them (same optimizer object and hyper-parameters, so a scheduler built on it
  keeps working); the optimizer must have no state yet.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from overt.errors import ConfigError
from overt.torchrun import Topology

STRATEGIES = ("auto", "ddp", "fsdp", "none")


def resolve_strategy(strategy: str, world_size: int) -> str:
    """``auto`` -> ``ddp`` with more than one process, ``none`` otherwise."""
    if strategy not in STRATEGIES:
        raise ConfigError(f"unknown strategy {strategy!r}", fix=f"use one of: {', '.join(STRATEGIES)}")
    if strategy == "auto":
        return "ddp" if world_size > 1 else "none"
    if strategy in ("ddp", "fsdp") and world_size < 2:
        return "none"  # one process: nothing to replicate or shard
    return strategy


def wrap_ddp(model: nn.Module, device: torch.device) -> nn.Module:
    """The DDP wrapper that runs the forward (gradients averaged over ranks in backward)."""
    ids = [device.index] if device.type == "cuda" else None
    return nn.parallel.DistributedDataParallel(model, device_ids=ids)


def mixed_precision(precision: str) -> Any:
    """FSDP2's MixedPrecisionPolicy for a resolved ``precision`` (None for fp32)."""
    from torch.distributed.fsdp import MixedPrecisionPolicy

    if precision == "fp32":
        return None
    if precision == "bf16":
        return MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    raise ConfigError(f"precision={precision} is not supported with strategy=fsdp",
                      why="fp16 needs a sharded gradient scaler, which overt does not wire up yet",
                      fix="use precision=bf16 (same speed, no loss scaling) or fp32 with strategy=fsdp")


def fsdp_units(model: nn.Module, wrap: list[str]) -> list[tuple[str, nn.Module]]:
    """Submodules that become their own FSDP unit: those whose class name or qualified name is in
    ``wrap``; by default every direct child that holds parameters."""
    if not wrap:
        return [(name, child) for name, child in model.named_children()
                if next(child.parameters(), None) is not None]
    units = [(name, m) for name, m in model.named_modules()
             if name and (type(m).__name__ in wrap or name in wrap)]
    if not units:
        raise ConfigError(f"fsdp_wrap={wrap} matches no submodule of {type(model).__name__}",
                          fix="name submodule classes (e.g. TransformerBlock) or qualified names (e.g. layers.0)")
    return sorted(units, key=lambda item: -item[0].count("."))  # inner units first: fully_shard goes bottom-up


def shard_fsdp(model: nn.Module, optimizer: torch.optim.Optimizer, device: torch.device, precision: str,
               wrap: list[str]) -> nn.Module:
    """``fully_shard`` the units, then the root; re-point ``optimizer`` at the sharded parameters."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    if optimizer.state:
        raise ConfigError("strategy=fsdp needs an optimizer that has not stepped yet",
                          why="FSDP2 replaces the parameters; existing optimizer state would be lost")
    names = {id(p): name for name, p in model.named_parameters()}
    policy = mixed_precision(precision)
    kwargs: dict[str, Any] = {"mesh": init_device_mesh(device.type, (Topology.of_group().world_size,))}
    if policy is not None:
        kwargs["mp_policy"] = policy
    for _, unit in fsdp_units(model, wrap):
        fully_shard(unit, **kwargs)
    fully_shard(model, **kwargs)
    new = dict(model.named_parameters())
    for group in optimizer.param_groups:
        params = []
        for p in group["params"]:
            name = names.get(id(p))
            if name is None:
                raise ConfigError("the optimizer holds a parameter that is not in the model",
                                  why="FSDP2 can only shard the model's own parameters",
                                  fix="build the optimizer from model.parameters()")
            params.append(new[name])
        group["params"] = params
    return model
