"""Probe 3, optimizer registration: the optimizer's parameter groups against the model's
trainable parameters -- missing, frozen, duplicated and foreign tensors, and layers kept
in plain Python containers where PyTorch cannot see them."""

from __future__ import annotations

from typing import Any

from torch import nn

from overt.catalog import Severity
from overt.doctor.common import param_layer
from overt.doctor.registry import Probe
from overt.doctor.result import ProbeResult, Verdict
from overt.guards.modes import hidden_containers as _hidden


def hidden_containers(model: nn.Module) -> list[dict[str, Any]]:
    """Layers and parameters kept in plain Python containers (see :func:`overt.guards.modes.hidden_containers`),
    each with ``owner``: the qualified name of the module holding it (the class name for the model itself)."""
    return [{**h, "owner": h["name"] or type(model).__name__} for h in _hidden(model)]


TESTS = ("parameter tensors and counts in the optimizer's groups vs the model's trainable parameters; "
         "frozen, missing (unregistered submodule, plain list) and duplicated parameters")


def optimizer_registration(model: nn.Module, optimizer: Any) -> ProbeResult:
    """Probe 3 on its own (reads only: nothing is changed)."""
    r = ProbeResult("optimizer", "Optimizer registration", TESTS)
    named = list(model.named_parameters())
    trainable = [(n, p) for n, p in named if p.requires_grad]
    frozen = [n for n, p in named if not p.requires_grad]
    names = {id(p): n for n, p in named}
    seen: dict[int, int] = {}
    group_sizes = []
    for group in getattr(optimizer, "param_groups", []):
        group_sizes.append(len(group["params"]))
        for p in group["params"]:
            seen[id(p)] = seen.get(id(p), 0) + 1
    opt_tensors = sum(group_sizes)
    opt_elements = sum(p.numel() for g in getattr(optimizer, "param_groups", []) for p in g["params"])
    model_elements = sum(p.numel() for _, p in trainable)
    r.evidence.update(model_tensors=len(trainable), model_parameters=model_elements, frozen=len(frozen),
                      optimizer_tensors=opt_tensors, optimizer_parameters=opt_elements, groups=group_sizes)
    r.lines.append(f"model: {len(trainable)} trainable tensors ({model_elements:,} parameters), {len(frozen)} frozen")
    r.lines.append(f"optimizer {type(optimizer).__name__}: {len(group_sizes)} group(s) of {group_sizes} tensors "
                   f"({opt_elements:,} parameters)")
    fail, warn = [], []

    hidden = hidden_containers(model)
    for h in hidden:
        r.find("unregistered-submodule",
               f"{h['owner']}.{h['attr']} is a plain Python {h['kind']} holding {h['modules']} module(s)/"
               f"parameter(s) ({h['weights']:,} weights): parameters(), the optimizer, .to(device) and "
               f"state_dict() never see them, so they do not train and are not saved.",
               fix=f"self.{h['attr']} = {h['fix']}([...]).", where=f"{h['owner']}.{h['attr']}")
        fail.append(f"{h['owner']}.{h['attr']} is a plain {h['kind']} of {h['modules']} layer(s)")
    r.evidence["unregistered"] = [f"{h['owner']}.{h['attr']}" for h in hidden]

    missing = [n for n, p in trainable if id(p) not in seen]
    if missing:
        layers = sorted({param_layer(n) for n in missing})
        r.find("params-not-optimized",
               f"{len(missing)} of {len(trainable)} trainable tensors are in no parameter group of the optimizer "
               f"(layers: {', '.join(layers[:8])}{'...' if len(layers) > 8 else ''}): they get gradients but never "
               f"change.", fix="build the optimizer after the model is complete, from model.parameters().",
               where=", ".join(missing[:8]))
        fail.append(f"{len(missing)} trainable tensor(s) not in the optimizer")
    r.evidence["missing"] = missing

    foreign = [p for g in getattr(optimizer, "param_groups", []) for p in g["params"] if id(p) not in names]
    if foreign:
        shapes = ", ".join(str(tuple(p.shape)) for p in foreign[:5])
        r.find("params-not-optimized",
               f"the optimizer holds {len(foreign)} tensor(s) that are not parameters of this model (shapes "
               f"{shapes}): it was built for another model instance (e.g. before the model was re-created or "
               f"deep-copied).", fix="build the optimizer from this model's parameters().",
               where="optimizer param_groups")
        (fail if len(foreign) == opt_tensors else warn).append(f"{len(foreign)} optimizer tensor(s) not in the model")
    dupes = [names.get(i, "?") for i, k in seen.items() if k > 1]
    if dupes:
        r.find("params-not-optimized",
               f"{len(dupes)} tensor(s) appear more than once in the optimizer ({', '.join(dupes[:5])}): they are "
               f"updated twice per step.", fix="list each parameter once.", where="optimizer param_groups")
        fail.append(f"{len(dupes)} tensor(s) listed twice in the optimizer")
    frozen_in_opt = [n for n, p in named if not p.requires_grad and id(p) in seen]
    if frozen_in_opt:
        r.find("params-not-optimized",
               f"{len(frozen_in_opt)} frozen tensor(s) (requires_grad=False) are in the optimizer "
               f"({', '.join(frozen_in_opt[:5])}): they can never learn; if they were meant to train, the freeze "
               f"is the bug.", where=", ".join(frozen_in_opt[:5]), severity=Severity.WARNING)
        warn.append(f"{len(frozen_in_opt)} frozen tensor(s) in the optimizer")
    if frozen:
        r.lines.append(f"frozen (requires_grad=False): {', '.join(frozen[:10])}{'...' if len(frozen) > 10 else ''}")
    if not trainable and not hidden:
        fail.append("the model has no trainable parameters")
    if opt_tensors == 0:
        fail.append("the optimizer holds no parameters")

    if fail:
        r.verdict, r.summary = Verdict.FAIL, "; ".join(fail + warn)
        r.causes += ["layers in a plain list/dict, a missing super().__init__(), a layer added after the optimizer "
                     "was built, or an optimizer built for another model instance"]
        r.fix = r.fix or ("use nn.ModuleList/nn.ModuleDict, and build the optimizer from the finished model's "
                          "parameters()")
    elif warn:
        r.verdict, r.summary = Verdict.WARN, "; ".join(warn)
    else:
        r.summary = (f"all {len(trainable)} trainable tensors ({model_elements:,} parameters) are in the optimizer, "
                     f"each once" + (f"; {len(frozen)} frozen" if frozen else ""))
    return r


# -- the probe, as the doctor runs it -------------------------------------------------------------

def _run(setup: Any) -> ProbeResult:
    return optimizer_registration(setup.model, setup.optimizer)


PROBE = Probe("optimizer", "Optimizer registration", 30, _run)
