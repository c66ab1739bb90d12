"""Guard on a recurrent module stepped through a sequence without its state (slug ``recurrent-state-not-carried``;
issue 33, session 50).

The premise, true of every program that runs a recurrent module one time step per call: the state a step returns
is what the next step starts from.  A loop that gives every step the very same state tensor -- the initial one,
an encoder's summary -- and drops the state each call returns has no memory: each step sees its own input and the
initial state, whatever came before it in the sequence (pytorch/examples#88: ``output, h = self.rnn(emb_t,
hidden)`` with ``h`` never carried).  It trains and decodes with no error, as a worse model.

What is observed, on a watched model's first :data:`LOOKS` checked training forwards and nothing else: torch's own
recurrent modules in it (``nn.RNNCell``/``GRUCell``/``LSTMCell``, and ``nn.RNN``/``GRU``/``LSTM`` given one time
step per call) get a forward hook for that forward.  A call's state is the tensor it was given (``hx``; the pair
for an LSTM), known by its Python identity and version counter; a call's returned state is known the same way.
The finding needs, in one forward: :data:`MIN_CALLS` or more one-step calls of one module, from one line of the
user's code, given the identical state object (same tensor, not written in between) with distinct input tensors
of one shape; no call of that module in the forward given a state that one of its calls returned (a carry
somewhere: beam or tree expansions that branch from one state and then go on from the branches); and the inputs
of the first and the last of those calls differing in value (one read, deferred to the next checked step: no
synchronisation in the forward).

Silent: calls over whole sequences (more than one time step per call: independent sequences of one encoder),
bidirectional modules, a state of None (the zero state by default) unless every call of the loop is given none and
their inputs are the successive time slices of one tensor (views of one storage, offsets a constant stride apart:
``rnn(x[:, t:t + 1])`` over ``t`` -- session 51), user-defined cells (their state argument is not known), forwards in eval mode or without
gradients, a state carried as any other tensor (a function of the returned one: detached, dropped out, projected,
updated in place -- its object or version differs).  Where the premise cannot be told from the values: a cell used
on purpose as a gated layer applied to independent items from one shared state (one step per item) is read as a
loop that lost its memory; no such program is known to the project.

Cost: hooks only on the looked-at forwards, Python identities and shapes on the host, and one deferred read of
one boolean per finding candidate.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from overt.guards.check import Check
from overt.guards.oneshot import OneShotHook
from overt.guards.where import user_location

LOOKS = 2  # checked training forwards looked at per model
MIN_CALLS = 3  # one-step calls given the same state, in one forward, before a loop without memory is claimed
MAX_MODULES = 16
MAX_CALLS = 512  # calls (and returned states) held per module and forward: a bound on what one look keeps alive


def _key(state: Any) -> tuple | None:
    """Identity and version of a state (a tensor, or a tuple of tensors); None when it is no such thing."""
    if isinstance(state, torch.Tensor):
        return ((id(state), state._version),)
    if isinstance(state, (tuple, list)) and state and all(isinstance(t, torch.Tensor) for t in state):
        return tuple((id(t), t._version) for t in state)
    return None


def _returned(module: nn.Module, output: Any) -> list[torch.Tensor]:
    """The state tensors a call returned."""
    if isinstance(module, nn.RNNCellBase):
        items = output if isinstance(output, (tuple, list)) else (output,)
    elif isinstance(output, (tuple, list)) and len(output) == 2:
        items = output[1] if isinstance(output[1], (tuple, list)) else (output[1],)
    else:
        return []
    return [t for t in items if isinstance(t, torch.Tensor)]


def _one_step(module: nn.Module, x: torch.Tensor) -> bool:
    if isinstance(module, nn.RNNCellBase):
        return True
    if getattr(module, "bidirectional", False) or x.dim() not in (2, 3):
        return False
    if x.dim() == 2:  # unbatched (L, H_in)
        return x.shape[0] == 1
    return x.shape[1 if module.batch_first else 0] == 1


class _Call:
    __slots__ = ("x", "state", "key", "loc")

    def __init__(self, x: torch.Tensor, state: Any, key: tuple, loc: str | None):
        self.x, self.state, self.key, self.loc = x, state, key, loc  # the tensors are held: their ids stay theirs


class _Forward:
    """The calls of one recurrent module during one looked-at forward."""

    __slots__ = ("calls", "stateless", "returned", "carried", "kept")

    def __init__(self):
        self.calls: list[_Call] = []
        self.stateless: list[_Call] = []  # one-step calls given no state (None: the zero state)
        self.returned: set[int] = set()  # ids of the state tensors its calls returned
        self.carried: set[int] = set()  # parts of the state (0: h, 1: an LSTM's c) a call was given as returned
        self.kept: list[torch.Tensor] = []  # the returned tensors, held so that their ids are not reused


class StateCarryChecks(Check):
    name = "statecarry"

    def __init__(self, session: Any):
        super().__init__(session)
        self.looks: dict[int, int] = {}
        self.finished: set[int] = set()  # models looked at LOOKS times, or with no recurrent module
        self.handles: dict[int, list[Any]] = {}
        self.ends: dict[int, OneShotHook] = {}  # model id -> the hook at the end of the forward looked at
        self.forwards: dict[int, dict[int, _Forward]] = {}  # model id -> module id -> its calls
        self.modules: dict[int, dict[int, nn.Module]] = {}
        self.done: set[str] = set()

    def on_checked_forward(self, info: Any, args: tuple, light: bool) -> None:
        key = id(info.module)
        if key in self.finished or key in self.handles:
            return
        self.looks[key] = self.looks.get(key, 0) + 1
        if self.looks[key] >= LOOKS:
            self.finished.add(key)
        found = [m for m in info.module.modules() if isinstance(m, (nn.RNNCellBase, nn.RNNBase))][:MAX_MODULES]
        if not found:
            self.finished.add(key)  # no recurrent module: nothing to look at again
            return
        self.forwards[key] = {id(m): _Forward() for m in found}
        self.modules[key] = {id(m): m for m in found}
        self.handles[key] = [m.register_forward_hook(self._hook(info, m), with_kwargs=True) for m in found]
        end = self.ends.setdefault(key, OneShotHook())
        end.place(info.module, lambda module, a, output, _info=info, _end=end: self._end(_info, _end))

    def _end(self, info: Any, end: OneShotHook) -> None:
        """The end of the forward looked at (its own one-shot hook: no hook on every checked forward's end)."""
        failed = not end.fired()
        key = id(info.module)
        for h in self.handles.pop(key, ()):
            h.remove()
        forwards = self.forwards.pop(key, {})
        modules = self.modules.pop(key, {})
        if failed:
            return
        for mid, fw in forwards.items():
            try:
                self._judge(info, modules[mid], fw)
            except Exception as exc:  # noqa: BLE001  a guard never breaks the run
                self.s.check_failed(self, exc)

    def remove_hooks(self) -> None:
        for handles in self.handles.values():
            for h in handles:
                h.remove()
        for end in self.ends.values():
            end.remove()
        self.handles, self.forwards, self.modules, self.ends = {}, {}, {}, {}

    def _hook(self, info: Any, m: nn.Module):
        def hook(module: nn.Module, args: tuple, kwargs: dict, output: Any) -> None:
            try:
                self._record(info, m, args, kwargs, output)
            except Exception as exc:  # noqa: BLE001  a guard never breaks the user's forward
                self.s.check_failed(self, exc)
        return hook

    def _record(self, info: Any, m: nn.Module, args: tuple, kwargs: dict, output: Any) -> None:
        fw = self.forwards.get(id(info.module), {}).get(id(m))
        if fw is None or not torch.is_grad_enabled() or not m.training or len(fw.kept) >= MAX_CALLS:
            return
        x = args[0] if args else kwargs.get("input")
        state = args[1] if len(args) > 1 else kwargs.get("hx")
        if isinstance(x, torch.Tensor) and state is not None:
            items = state if isinstance(state, (tuple, list)) else (state,)
            fw.carried.update(i for i, t in enumerate(items) if isinstance(t, torch.Tensor) and id(t) in fw.returned)
            key = _key(state)
            if key is not None and _one_step(m, x):
                fw.calls.append(_Call(x, state, key, user_location(2)))
        elif isinstance(x, torch.Tensor) and _one_step(m, x):
            fw.stateless.append(_Call(x, None, (), user_location(2)))
        for t in _returned(m, output):
            fw.returned.add(id(t))
            fw.kept.append(t)

    def _judge(self, info: Any, m: nn.Module, fw: _Forward) -> None:
        if not fw.calls and not fw.carried and len(fw.stateless) >= MIN_CALLS:
            self._judge_stateless(info, m, fw)
        if len(fw.calls) < MIN_CALLS:
            return
        parts = min(len(c.key) for c in fw.calls)
        best: list[_Call] = []
        part = 0
        for i in range(parts):
            if i in fw.carried:
                continue  # this part of the state is carried (a returned tensor given to a later call)
            groups: dict[tuple, list[_Call]] = {}
            for c in fw.calls:
                groups.setdefault((c.key[i], c.loc), []).append(c)
            calls = max(groups.values(), key=len)
            if len(calls) > len(best):
                best, part = calls, i
        calls = best
        loc = calls[0].loc if calls else None
        if len(calls) < MIN_CALLS or loc is None or f"{id(m)}:{loc}" in self.done:
            return
        xs = [c.x for c in calls]
        if len({id(x) for x in xs}) != len(xs) or len({tuple(x.shape) for x in xs}) != 1:
            return  # one input given again, or inputs of different shapes: not the steps of one sequence
        first, last = xs[0].detach(), xs[-1].detach()
        differ = (first != last).any().reshape(1).float()
        label, n = info.label(m), len(calls)
        kind = type(m).__name__
        state = calls[0].state
        if isinstance(state, torch.Tensor) or not fw.carried:
            shapes = list(state.shape) if isinstance(state, torch.Tensor) else [list(t.shape) for t in state]
            what = (f"the very same state {shapes} while the state each call returned was never passed to a later "
                    "call: the loop has no memory. Each step starts from the initial state and sees only its own "
                    "input, not what came before it in the sequence, so the model trains and predicts as a worse "
                    "one-step model with no error.")
        else:
            name = ("h", "c")[part] if isinstance(m, (nn.LSTMCell, nn.LSTM)) and part < 2 else f"part {part + 1}"
            what = (f"the very same {name} {list(state[part].shape)} (part {part + 1} of its state; the other part is "
                    f"carried) while the {name} each call returned was never passed to a later call: that part of "
                    "the state restarts at every step, so what it holds (an LSTM's cell state is its long-term "
                    "memory) never reaches the next step, with no error.")
        self.done.add(f"{id(m)}:{loc}")

        def callback(values: list[float]) -> None:
            if not values[0]:
                return  # the same input values at every step: nothing says these are the steps of a sequence
            self.s.report(
                "recurrent-state-not-carried",
                f"{info.name}'s {kind} {label} was called {n} times, one time step per call, at {loc} within one "
                f"training forward, and every call was given {what}",
                fix="carry the state the step returns into the next step: `h = cell(x_t, h)` (GRUCell/RNNCell), "
                    "`h, c = cell(x_t, (h, c))` (LSTMCell), `out, h = rnn(x_t, h)` (nn.GRU/LSTM/RNN), or run the "
                    "module once over the whole sequence",
                where=loc, key=f"state:{label}:{loc}")

        self.s.defer(differ, callback)

    def _judge_stateless(self, info: Any, m: nn.Module, fw: _Forward) -> None:
        """Calls given no state at all, in a forward where no call was given one: the steps of one sequence only
        when their inputs are the successive time slices of one tensor (views of one storage at offsets a constant
        stride apart, ``x[:, t]`` in a loop over ``t``); inputs made afresh per call (independent items, a decoder
        fed its own predictions) prove nothing here."""
        groups: dict[str | None, list[_Call]] = {}
        for c in fw.stateless:
            groups.setdefault(c.loc, []).append(c)
        loc, calls = max(groups.items(), key=lambda kv: len(kv[1]))
        if len(calls) < MIN_CALLS or loc is None or f"{id(m)}:{loc}" in self.done:
            return
        xs = [c.x for c in calls]
        if len({(tuple(x.shape), x.stride(), x.dtype) for x in xs}) != 1 or \
                len({x.untyped_storage().data_ptr() for x in xs}) != 1 or xs[0]._base is None:
            return
        offsets = [x.storage_offset() for x in xs]
        gaps = {b - a for a, b in zip(offsets, offsets[1:])}
        if len(gaps) != 1 or next(iter(gaps)) <= 0:
            return  # not successive slices of one tensor, taken in order
        first, last = xs[0].detach(), xs[-1].detach()
        differ = (first != last).any().reshape(1).float()
        label, n, kind = info.label(m), len(calls), type(m).__name__
        self.done.add(f"{id(m)}:{loc}")

        def callback(values: list[float]) -> None:
            if not values[0]:
                return
            self.s.report(
                "recurrent-state-not-carried",
                f"{info.name}'s {kind} {label} was called {n} times at {loc} within one training forward, each call "
                f"on the next time step of one input tensor (successive slices of it) and none given a state: every "
                "step starts from the zero state and the state each call returned is dropped, so the loop has no "
                "memory -- each step sees only its own input, not what came before it in the sequence, and the "
                "model trains and predicts as a worse one-step model with no error.",
                fix="carry the state the step returns into the next step: `h = cell(x_t, h)` (GRUCell/RNNCell), "
                    "`h, c = cell(x_t, (h, c))` (LSTMCell), `out, h = rnn(x_t, h)` (nn.GRU/LSTM/RNN), or run the "
                    "module once over the whole sequence",
                where=loc, key=f"state:{label}:{loc}")

        self.s.defer(differ, callback)
