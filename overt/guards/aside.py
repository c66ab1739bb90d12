"""The axes window's function mode stands aside while the guards' own code runs (issue 33).

While :mod:`overt.guards.axes` looks at a checked step's code (the first checked steps, the first evaluation
phase) its :class:`~torch.overrides.TorchFunctionMode` sits at the bottom of torch's function-mode stack and
sees every torch call of this thread: the user's, which it is there for, and the guards' own (a tensor's
``shape``, ``dim()``, a reduction of a check), each a Python ``__torch_function__`` that the mode passes on
untouched -- a call made from overt's files is never the user's line.  So the session's hooks
(:func:`overt.guards.never_break.never_break`, :func:`overt.guards.patches.safely`) take the mode off this
thread's stack while they run (:func:`step_aside`) and put it back after (:func:`back`), unless
``singleton-axis`` follows an index it has not seen used yet (it looks at every torch call's arguments
then).

A hook that runs the user's code again (a probe re-running the user's model, the user's metric or decoding
function) must run it as the user's code runs: under the mode.  Such a probe runs it inside
:func:`user_code`, which puts the mode back for that time when a hook of this thread took it off.

A window opens from inside one of the guards' hooks (the forward pre-hook of a checked step, the optimizer
post-hook that arms one, the wrapper of ``model.eval()``): its mode is not pushed there and then -- the checks
that run after the window's in that hook are the guards' own code too -- but held off for this thread
(:func:`opened`), and the hook's wrapper pushes it at its end (:func:`release`).  The forward hooks that checks
place on a model (one-shot output hooks, activation hooks) stand aside like the session's own hooks
(:func:`hook`).

One hook keeps the mode off after it returns: the optimizer pre-hook of a step that runs only torch's own code
(:mod:`overt.guards.optaside`) keeps it (:func:`hold`) until the next of the guards' hooks of this thread (the
optimizer post-hook that follows; should ``step()`` raise, whichever hook of the guards comes next):
:func:`step_aside` hands the held mode to that hook as its own token.
"""

from __future__ import annotations

import contextlib
import threading
from typing import Any, Iterator

import torch

_len = torch._C._len_torch_function_stack
_at = torch._C._get_function_stack_at
_pop = torch._C._pop_torch_function_stack
_push = torch._C._push_on_torch_function_stack
_ident = threading.get_ident

#: the axes window's mode while a window is open (the latest session's), else None
WINDOW: Any = None
#: a session's axes window is open or may open on the checked step now running (its first checked steps): the
#: forward hooks the checks place now stand aside (:func:`hook`); a hint for where to pay a wrapper, never a rule
EARLY = False


def under_the_stack(mode: Any) -> None:
    """Put ``mode`` at the bottom of torch's function-mode stack.  A mode leaves the stack from its top
    (``__exit__`` pops whatever is there), so a mode of the user's entered before the window opens and
    left while it is open would otherwise take this one off instead of its own; below every other mode
    it is never on top when another one leaves (it then sees only what those modes pass on)."""
    above = [_pop() for _ in range(_len())]
    _push(mode)
    for other in reversed(above):
        _push(other)


def off_the_stack(mode: Any) -> None:
    """Take ``mode`` off torch's function-mode stack wherever it is, the others kept in their order."""
    stack = [_pop() for _ in range(_len())]
    for other in reversed(stack):
        if other is not mode:
            _push(other)


def step_aside(mode: Any) -> Any:
    """A hook of the guards begins while ``mode`` (:data:`WINDOW`) is open: take it off this thread's stack
    and return it (the token for :func:`back`), or None when it is not there (another thread, or an
    enclosing hook already took it off) or must see every call (``singleton-axis``'s pending indices)."""
    if mode.held and mode.off_in == _ident():  # held off since a hook before this one (hold): this hook's now
        mode.held = False
        if not mode.check.singleton.pending:
            return mode
        back(mode)
    n = _len()
    if not n or _at(0) is not mode or mode.check.singleton.pending:
        return None
    if n == 1:
        _pop()
    else:
        off_the_stack(mode)
    mode.off_in = _ident()
    return mode


def back(mode: Any) -> None:
    """The hook that :func:`step_aside` returned ``mode`` for ends: the mode goes back to the bottom of the
    stack unless the window closed meanwhile, or the hook keeps it off past its end (:func:`hold`)."""
    if mode.held:
        return
    mode.off_in = None
    if mode.live and WINDOW is mode:
        if _len():
            under_the_stack(mode)
        else:
            _push(mode)


def hold(mode: Any) -> bool:
    """The hook of this thread that took ``mode`` off (:func:`step_aside`) keeps it off past its own end: the
    next :func:`step_aside` of this thread takes it over (True), or nothing when this thread's hooks did not
    take it off (False)."""
    if mode.off_in != _ident():
        return False
    mode.held = True
    return True


def opened(mode: Any) -> None:
    """The axes window opens now with ``mode``, from inside a hook of the guards: :data:`WINDOW` is ``mode``
    at once, but the mode stays off this thread's stack, held (:func:`hold`) until the hook that opened it
    ends (:func:`release`, from :func:`overt.guards.never_break.never_break` and
    :func:`overt.guards.patches.safely`); were the hook not wrapped, the next hook of the guards of this thread
    takes it over and pushes it at its end, as after an optimizer step that raised.  Pushed at once while
    ``singleton-axis`` follows a pending index (it sees every call then)."""
    global WINDOW
    WINDOW = mode
    if mode.check.singleton.pending:
        if _len():
            under_the_stack(mode)
        else:
            _push(mode)
        return
    mode.off_in = _ident()
    mode.held = True


def release(start: Any) -> None:
    """A hook of the guards that began with ``start`` as :data:`WINDOW` ends: a window opened during it
    (:func:`opened`) and still held by this thread goes on the stack now."""
    mode = WINDOW
    if mode is not None and mode is not start and mode.held and mode.off_in == _ident():
        mode.held = False
        back(mode)


def hook(fn: Any) -> Any:
    """``fn``, a forward hook a check places on a model (the guards' own code), for registering: run with the
    window's mode aside (:func:`step_aside`) when it fires while a window is open.  ``fn`` itself, with no
    wrapper, when no window is open or may open (:data:`EARLY`) as it is placed: the hooks of later checked
    steps pay nothing (the callers on their paths read the two flags inline and do not call this then).  No
    ``functools.wraps``: copying the attributes costs more calls than the hook saves."""
    if WINDOW is None and not EARLY:
        return fn

    def aside_hook(*args: Any) -> Any:
        mode = WINDOW
        token = step_aside(mode) if mode is not None else None
        try:
            return fn(*args)
        finally:
            if token is not None:
                back(token)

    return aside_hook


@contextlib.contextmanager
def user_code() -> Iterator[None]:
    """The user's code runs now from inside a hook (a probe's forward of the user's model, the user's metric
    function): the window's mode, if a hook of this thread took it off, is put back while it runs, so that it
    sees that code as it sees the user's own calls; taken off again after."""
    mode = WINDOW
    if mode is None or mode.off_in is None or mode.off_in != _ident():
        yield
        return
    mode.off_in = None
    under_the_stack(mode)
    try:
        yield
    finally:
        if mode.live and WINDOW is mode:
            off_the_stack(mode)
            mode.off_in = _ident()


def as_user(fn: Any, *args: Any) -> Any:
    """``fn(*args)``, where ``fn`` may run the user's code (``len()`` of a data set or sampler, whose ``__len__``
    is the user's), under :func:`user_code` when a hook of this thread took the window's mode off."""
    mode = WINDOW
    if mode is None or mode.off_in is None:
        return fn(*args)
    with user_code():
        return fn(*args)
