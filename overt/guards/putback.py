"""What a probe's extra calls of the user's code may move, saved before and put back after: buffers, a model's
whole state (:class:`ModelState`: torch's random generators, buffers, module attributes), and the host's random
generators (Python's and NumPy's).

Every buffer is put back, whatever its version counter says: ``batch_norm`` updates ``running_mean`` and
``running_var`` in place without bumping their versions.  The copy goes through ``.data`` so the user's buffers
keep the version counters they had (autograd sees no write)."""

from __future__ import annotations

import random
import sys
from collections.abc import Iterable
from typing import Any

import torch
from torch import nn


def save_buffers(modules: Iterable[nn.Module]) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Each distinct buffer of ``modules`` (and their children) with a copy of its values."""
    seen: set[int] = set()
    saved = []
    for m in modules:
        for b in m.buffers():
            if id(b) not in seen:
                seen.add(id(b))
                saved.append((b, b.detach().clone()))
    return saved


def restore_buffers(saved: list[tuple[torch.Tensor, torch.Tensor]]) -> None:
    """Write the saved values back into their buffers."""
    with torch.no_grad():
        for b, copy in saved:
            b.data.copy_(copy)


def save_host_random() -> tuple[Any, Any]:
    """Python's and NumPy's global random states (NumPy's only when it is imported: None otherwise); user code
    run again by a probe may draw from either."""
    np = sys.modules.get("numpy")
    return random.getstate(), (np.random.get_state() if np is not None else None)


def restore_host_random(state: tuple[Any, Any]) -> None:
    """Put back what :func:`save_host_random` saved."""
    random.setstate(state[0])
    if state[1] is not None:
        sys.modules["numpy"].random.set_state(state[1])



class RandomState:
    """Every global random generator a probe that runs user code may draw from, saved now and put back by
    :meth:`restore`: torch's CPU generator, the CUDA generators of ``devices``, Python's and NumPy's."""

    def __init__(self, devices: Iterable[torch.device] = ()):
        self.cpu = torch.get_rng_state()
        self.cuda = [(d, torch.cuda.get_rng_state(d)) for d in dict.fromkeys(devices) if d.type == "cuda"]
        self.host = save_host_random()

    def restore(self) -> None:
        torch.set_rng_state(self.cpu)
        for device, state in self.cuda:
            torch.cuda.set_rng_state(state, device)
        restore_host_random(self.host)

class ModelState:
    """What a forward may change in a model, put back after a probe's extra forwards: torch's random
    generators (the CPU's and the model's CUDA device's), the buffers (their values) and each module's
    attributes."""

    def __init__(self, root: nn.Module, device: torch.device | None):
        self.cpu_rng = torch.get_rng_state()
        self.cuda = device is not None and device.type == "cuda"
        self.cuda_rng = torch.cuda.get_rng_state(device) if self.cuda else None
        self.device = device
        self.attrs = [(m, dict(vars(m))) for m in root.modules()]
        self.buffers = save_buffers([root])

    def restore_rng(self) -> None:
        torch.set_rng_state(self.cpu_rng)
        if self.cuda:
            torch.cuda.set_rng_state(self.cuda_rng, self.device)

    def restore(self) -> None:
        for m, attrs in self.attrs:
            current = vars(m)
            for key in [k for k in current if k not in attrs]:
                del current[key]
            for key, value in attrs.items():
                if current.get(key) is not value:
                    current[key] = value
        restore_buffers(self.buffers)
