"""The axes window's function mode stands aside while the guards' hooks run, and is back for the user's code
(overt/guards/aside.py; issue 33): on a real small run with the default checks, a check's hook sees no mode on
the stack, the user's code it runs again (:func:`user_code`) sees it, and the user's own forward sees it before
and after the hook; a mode of the user's entered above it keeps its place."""

from __future__ import annotations

import io
from typing import Any

import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode, _get_current_function_mode_stack

from overt.guards import aside
from overt.guards.axes import _IndexMode
from overt.guards.check import Check
from overt.guards.options import GuardOptions
from overt.guards.registry import CHECKS
from overt.guards.session import GuardSession
from tests.conftest import TIMING
from tests.guards.helpers import batches, mlp


def _window() -> list[str]:
    return [type(m).__name__ for m in _get_current_function_mode_stack()]


SEEN: dict[str, list[list[str]]] = {"hook": [], "user code": [], "as user": [], "forward": []}


class _Looks(Check):
    """Notes the mode stack in a hook and in user code run from it, at each checked forward's end."""
    name = "looks"

    def on_forward_end(self, info: Any, output: Any, failed: bool) -> None:
        SEEN["hook"].append(_window())
        with aside.user_code():
            SEEN["user code"].append(_window())
        SEEN["as user"].append(aside.as_user(_window))
        SEEN["hook"].append(_window())


class _Mine(TorchFunctionMode):
    def __torch_function__(self, func: Any, types: Any, args: tuple = (), kwargs: Any = None) -> Any:
        return func(*args, **(kwargs or {}))


class _Net(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.net = mlp()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        SEEN["forward"].append(_window())
        return self.net(x)


def test_the_window_stands_aside_in_hooks_and_is_back_for_user_code():
    for seen in SEEN.values():
        seen.clear()
    depth = torch._C._len_torch_function_stack()
    torch.manual_seed(0)
    # evalscale's and inputreach's probes run _Net's forward again on its first checked step (as user code): left
    # out here, so that SEEN["forward"] holds the user's own forwards only
    checks = tuple(c for c in CHECKS if c.__name__ not in ("EvalScaleChecks", "InputReachChecks"))
    session = GuardSession(GuardOptions(stream=io.StringIO(), ignore=TIMING), auto=True,
                           checks=(*checks, _Looks))
    try:
        model = _Net()
        opt = torch.optim.SGD(model.parameters(), lr=1e-2)
        for k, (xb, yb) in enumerate(batches(32, 4)):
            opt.zero_grad()
            if k == 1:
                with _Mine():  # the user's own mode, above the window's
                    loss = F.cross_entropy(model(xb), yb)
                    after = _window()
            else:
                loss = F.cross_entropy(model(xb), yb)
            loss.backward()
            opt.step()
    finally:
        session.close()
    assert torch._C._len_torch_function_stack() == depth
    assert aside.WINDOW is None
    index = _IndexMode.__name__
    # the first checked steps: the window is open in the user's forward, aside in the hook, back in user code
    assert SEEN["forward"][0] == [index], SEEN
    assert SEEN["hook"][:2] == [[], []], SEEN
    assert SEEN["user code"][0] == SEEN["as user"][0] == [index], SEEN
    # the user's mode above it: the hook takes only the window's off, and puts it back below the user's
    assert SEEN["forward"][1] == [index, "_Mine"], SEEN
    assert SEEN["hook"][2:4] == [["_Mine"], ["_Mine"]], SEEN
    assert SEEN["user code"][1] == SEEN["as user"][1] == [index, "_Mine"], SEEN
    assert after == [index, "_Mine"], after
    # after the window: nothing to stand aside
    assert SEEN["forward"][-1] == [] and SEEN["hook"][-1] == [] and SEEN["user code"][-1] == [], SEEN
