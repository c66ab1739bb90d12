"""Guard on return, advantage and value-target functions that do not follow their recursion (slug
``targets-off-recursion``; issue 33, session 49).

The premise, true of every correct actor-critic, policy-gradient or value-learning program: a function named
after what it computes (``gae``, ``compute_returns``, ``compute_value_targets`` ...) returns, on the rewards,
values and episode-end flags it is called with, the values the recursion of that quantity gives
(:mod:`overt.guards.returndefs`, which also lists the accepted conventions).  Nothing else is assumed of the
program: the check reads the function's own arguments and its own result, whatever the code inside looks like.

How: on a checked training step, the script's module-level functions (``__main__``) whose name claims a return,
an advantage or a value target are wrapped in its namespace (a dict size compared, nothing else).  A call made
while the next optimizer step is a checked one (``session.armed``, a function of the step count) copies its
arguments, lets the call run, and recomputes the recursion on the copies; every other call passes straight
through.  A function is looked at on at most eight checked calls: three that agree with a convention end it, so
does a call whose arguments the definition cannot read (five of them); two that agree with none, and none that
agreed, are reported.  The original function is put back in the namespace once the look ends.
"""

from __future__ import annotations

import functools
import inspect
import types
from typing import Any

import torch

from overt.guards import returndefs
from overt.guards.check import Check
from overt.guards.metricprobe import _defined, _inner, _words, _writes_globals
from overt.guards.scriptspace import script_grown
from overt.guards.where import short_location, user_location

AGREE, DIFFER, UNKNOWN, LOOKS = 3, 2, 5, 8
_OURS = __file__.rsplit("/", 1)[0] + "/"


def _user_fn(fn: Any) -> Any:
    """The script's own function under the wrappers of other guards (the metric probe wraps a function of three
    parameters as a possible span extraction): its code is what is read here."""
    while isinstance(fn, types.FunctionType) and fn.__code__.co_filename.startswith(_OURS) \
            and getattr(fn, "__wrapped__", None) is not None:
        fn = fn.__wrapped__
    return fn


def _copy(v: Any) -> Any:
    if isinstance(v, torch.Tensor):
        return v.detach().clone()
    if hasattr(v, "copy") and hasattr(v, "dtype") and hasattr(v, "shape"):  # a numpy array
        return v.copy()
    if isinstance(v, list):
        return [_copy(x) for x in v]
    return v


class _State:
    __slots__ = ("fn", "user", "wrapper", "agree", "differ", "unknown", "looks", "done", "first")

    def __init__(self, fn: Any):
        self.fn, self.wrapper = fn, None  # what the namespace held (called through), and our wrapper
        self.user = _user_fn(fn)  # the script's own function (read: its name, parameters, code)
        self.agree = self.differ = self.unknown = self.looks = 0
        self.done = False
        self.first: tuple[str, str, str] | None = None


class ReturnRecursionChecks(Check):
    name = "return_recursion"

    def __init__(self, session: Any):
        super().__init__(session)
        self.namespace: dict | None = None
        self.seen = -1
        self.states: dict[str, _State] = {}

    def on_checked_forward(self, info: Any, args: tuple, light: bool) -> None:
        found = script_grown(self.namespace, self.seen)
        if found is None:
            return
        self.namespace, filename = found
        self.seen = len(self.namespace)
        for name, fn in list(self.namespace.items()):
            if name in self.states or not isinstance(fn, types.FunctionType):
                continue
            user = _user_fn(fn)
            if _defined(user) != filename or returndefs.definition_of(_words(user.__name__)) is None \
                    or _writes_globals(_inner(user).__code__):
                continue
            state = _State(fn)
            state.wrapper = self._wrapper(name, fn, state)
            self.states[name] = state
            self.namespace[name] = state.wrapper

    def _wrapper(self, name: str, fn: Any, state: _State) -> Any:
        signature = inspect.signature(state.user)
        words = _words(state.user.__name__)

        @functools.wraps(state.user)
        def recursion(*args: Any, **kwargs: Any) -> Any:
            if state.done or not self.s.armed:
                return fn(*args, **kwargs)
            try:
                seen = tuple(_copy(v) for v in args), {k: _copy(v) for k, v in kwargs.items()}
            except Exception:  # noqa: BLE001  arguments we cannot copy: no look
                return fn(*args, **kwargs)
            result = fn(*args, **kwargs)
            try:
                self._look(name, state, signature, words, seen, result, user_location(2))
            except Exception as exc:  # noqa: BLE001  a guard never breaks the user's call
                state.done = True
                self.s.check_failed(self, exc)
            if state.done:
                self._put_back(name, state)
            return result

        return recursion

    def _look(self, name: str, state: _State, signature: inspect.Signature, words: frozenset[str],
              seen: tuple[tuple, dict], result: Any, loc: str | None) -> None:
        state.looks += 1
        try:
            bound = signature.bind(*seen[0], **seen[1])
        except TypeError:
            state.done = True
            return
        bound.apply_defaults()
        with torch.no_grad():
            found = returndefs.check(_inner(state.user), name, dict(bound.arguments), result, words)
        if found is None:
            state.unknown += 1
        elif found[0] == "agree":
            state.agree += 1
        else:
            state.differ += 1
            if state.first is None:
                state.first = (found[1], found[2], f"the call at {loc}" if loc else "a checked call")
        if state.differ >= DIFFER and not state.agree:
            self._report(name, state)
            state.done = True
        elif state.agree >= AGREE or state.unknown >= UNKNOWN or state.looks >= LOOKS:
            state.done = True

    def _report(self, name: str, state: _State) -> None:
        message, fix, at = state.first
        code = _inner(state.user).__code__
        defined = short_location(code.co_filename, code.co_firstlineno)
        self.s.report(
            "targets-off-recursion",
            f"the function {name}() defined at {defined} does not compute the returns or advantages it is named for "
            f"({at}, and {state.differ - 1} more checked call(s) alike): {message} Targets off their recursion "
            "train the critic towards other values and weight the policy's actions by another signal, while the "
            "losses fall as usual and nothing fails.",
            fix=fix, where=f"{name}() at {defined}", key=f"recursion:{defined}")

    def _put_back(self, name: str, state: _State) -> None:
        if self.namespace is not None and self.namespace.get(name) is state.wrapper:
            self.namespace[name] = state.fn

    def remove_hooks(self) -> None:
        for name, state in self.states.items():  # the script's own function, whichever guard's hooks go first
            if self.namespace is not None and self.namespace.get(name) is state.wrapper:
                self.namespace[name] = state.user
        self.states = {}
