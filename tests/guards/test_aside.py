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


OPENING: dict[str, list[list[str]]] = {"after axes": [], "one-shot hook": [], "hook": [], "forward": []}


class _AfterAxes(Check):
    """Runs after the axes check in the hook that opens the window (the first checked forward's pre-hook), and
    places a one-shot output hook and a plain forward hook of its own (through :func:`aside.hook`)."""
    name = "after_axes"

    def __init__(self, session: Any):
        super().__init__(session)
        from overt.guards.oneshot import OneShotHook

        self.once = OneShotHook()
        self.handle: Any = None

    def on_checked_forward(self, info: Any, args: tuple, light: bool) -> None:
        OPENING["after axes"].append(_window())

        def once(*_: Any) -> None:
            if self.once.fired():
                OPENING["one-shot hook"].append(_window())

        def every(*_: Any) -> None:
            OPENING["hook"].append(_window())

        self.once.place(info.module, once)
        if self.handle is None:
            self.handle = info.module.register_forward_hook(aside.hook(every))

    def remove_hooks(self) -> None:
        self.once.remove()
        if self.handle is not None:
            self.handle.remove()


class _Forward(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.net = mlp()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        OPENING["forward"].append(_window())
        return self.net(x)


def test_the_window_goes_on_the_stack_when_the_hook_that_opens_it_ends():
    """The window opens in the first checked forward's pre-hook: the checks after ``axes`` in that hook, the
    one-shot output hooks and the forward hooks the checks place (aside.hook) run without the mode; the user's
    forward that follows runs under it, from the first step on; the findings are those of the default checks."""
    for seen in OPENING.values():
        seen.clear()
    depth = torch._C._len_torch_function_stack()
    torch.manual_seed(0)
    # (the probes that run the user's forward again, under a mode of their own, are left out: their extra forward
    # would be counted as a window step's)
    checks = tuple(c for c in CHECKS if c.__name__ not in ("EvalScaleChecks", "InputReachChecks"))
    session = GuardSession(GuardOptions(stream=io.StringIO(), ignore=TIMING), auto=True,
                           checks=(*checks, _AfterAxes))
    try:
        model = _Forward()
        opt = torch.optim.SGD(model.parameters(), lr=1e-2)
        for xb, yb in batches(32, 4):
            opt.zero_grad()
            loss = F.cross_entropy(model(xb), yb)
            loss.backward()
            opt.step()
    finally:
        session.close()
    assert torch._C._len_torch_function_stack() == depth
    assert aside.WINDOW is None
    index = _IndexMode.__name__
    assert OPENING["after axes"][0] == [] and OPENING["one-shot hook"][0] == [] and OPENING["hook"][0] == [], OPENING
    assert OPENING["forward"][:3] == [[index]] * 3, OPENING  # the user's forward of each window step
    assert OPENING["forward"][-1] == [], OPENING  # after the window


def test_a_window_opened_outside_any_hook_is_pushed_by_the_next_hook():
    """:func:`aside.opened` holds the mode off for the hook that opened it; should nothing wrap that hook, the next
    hook of the guards of the thread takes it over and puts it on the stack at its end (as after a raised step)."""
    depth = torch._C._len_torch_function_stack()

    class _Singles:
        pending: list = []

    class _Check:
        singleton = _Singles()

    mode = _IndexMode.__new__(_IndexMode)
    TorchFunctionMode.__init__(mode)
    mode.check, mode.live, mode.off_in, mode.held = _Check(), True, None, False
    try:
        aside.opened(mode)
        assert aside.WINDOW is mode and mode.held and torch._C._len_torch_function_stack() == depth
        token = aside.step_aside(mode)  # the next hook of the guards: takes it over
        assert token is mode and not mode.held
        aside.back(token)  # and puts it on the stack at its end
        assert _get_current_function_mode_stack()[0] is mode
    finally:
        mode.live = False
        aside.off_the_stack(mode)
        aside.WINDOW = None
    assert torch._C._len_torch_function_stack() == depth
