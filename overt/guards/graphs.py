"""Guards on autograd graphs kept across steps.

Slugs: ``graph-leak``, ``retain-graph-in-loop``.

On checked training forwards a tiny sentinel object is attached as a hook to
the output's ``grad_fn``.  The node owns the sentinel, so the sentinel lives
exactly as long as the graph: alive three optimizer steps later means
something (``losses.append(loss)``, ``total += loss``, a hidden state never
detached) holds the graph.  The sentinel is also called when a backward pass
goes through the node.  After the optimizer step, a graph that backward went
through (at the output node it went through: an output beside the loss's
keeps its saved tensors without any flag) but whose saved tensors are still there was kept by
``backward(retain_graph=True)``, unless a second backward pass went through the same graph within the
step (what the flag is for: a FactorVAE's discriminator loss back through the encoder after the VAE's
loss, which leaves the decoder's part retained); two checked steps in a row like that, or a
graph traversed again after the model ran forward again *and* an optimizer
stepped, is reported as ``retain-graph-in-loop``.
"""

from __future__ import annotations

import gc
import sys
import weakref
from typing import TYPE_CHECKING, Any

import torch

from overt.guards.check import Check
from overt.guards.framesnap import refresh_stack
from overt.guards.watched import output_tensors
from overt.guards.where import user_location

if TYPE_CHECKING:
    from overt.guards.session import GuardSession
    from overt.guards.watched import ModelInfo, OptInfo

_LAG = 3


class _Sentinel:
    __slots__ = ("checks", "info", "step", "forwards", "loc", "fired", "through", "passes", "__weakref__")

    def __init__(self, checks: GraphChecks, info: ModelInfo, loc: str | None):
        self.checks = checks
        self.info = info
        self.step = checks.s.step
        self.forwards = info.forwards
        self.loc = loc
        self.fired = False
        self.through = 0  # bit i: backward went through the i-th watched output's node
        self.passes: set[int] = set()  # the backward passes (autograd graph tasks) that went through

    def __call__(self, *_: Any) -> None:
        self.fired = True
        s = self.checks.s
        if s.closed:
            return None
        if s.step > self.step and self.info.forwards > self.forwards:
            seen = (f"a backward pass at step {s.run_step(s.step)} went through the graph {self.info.name} built "
                    f"at step {s.run_step(self.step)}: graphs are retained and chained across steps")
            try:
                self.checks.report_retained(self.info, self.loc, seen)
            except Exception as exc:  # a guard never breaks backward
                s.check_failed(self.checks, exc)
        return None


class _Through:
    """The hook on one watched output's node: notes that backward went through that node, then calls the
    sentinel (owned by the node, as the sentinel: it holds no node, so the graph's lifetime is unchanged)."""

    __slots__ = ("sentinel", "bit")

    def __init__(self, sentinel: _Sentinel, index: int):
        self.sentinel = sentinel
        self.bit = 1 << index

    def __call__(self, *args: Any) -> None:
        s = self.sentinel
        # which backward pass this is: autograd's graph-task id (one per backward() / autograd.grad call);
        # where torch has none, the same node reached twice is two passes
        task = _graph_task() if _graph_task is not None else -1
        if task < 0:  # no id from torch
            task = -2 if s.through & self.bit else -1
        s.passes.add(task)
        s.through |= self.bit
        return s(*args)


#: the running backward pass's id (torch's autograd engine numbers its graph tasks), or None
_graph_task = getattr(torch._C, "_current_graph_task_id", None)


_RETAIN_WHY = "so memory and step time grow every step."
#: when nothing chains the graphs: the flag keeps each graph's saved tensors until the variables holding it are
#: next assigned (one step of activations more, not a growth), and it hides the error a real second backward
#: through a freed graph would have raised
_KEPT_WHY = ("so each step's activations stay in memory a step longer than needed (nothing here needs a second "
             "backward through them), and the flag would hide the error that a backward through an earlier "
             "step's graph raises.")
_RETAIN_FIX = ("drop retain_graph=True (it is only needed to backward twice through the same graph within a "
               "step) and detach what is carried between steps (e.g. hidden = hidden.detach()).")


_SAVED_ATTRS: dict[type, tuple[list[str], bool]] = {}


def _saved_attrs(node: Any) -> tuple[list[str], bool]:
    """The node type's saved-value attributes, and whether they are ``_raw_saved_*`` ones
    (a ``SavedTensor`` whose ``.data`` is None once freed: no exception to raise and catch)."""
    found = _SAVED_ATTRS.get(type(node))
    if found is None:
        names = dir(node)
        raw = [a for a in names if a.startswith("_raw_saved_")]
        plain = [a for a in names if a.startswith("_saved_")]
        found = _SAVED_ATTRS[type(node)] = (raw, True) if raw else (plain, False)
    return found


def _saved_alive(node: Any, limit: int = 16) -> bool | None:
    """Whether the graph under ``node`` still holds its saved tensors (None: nothing saved to look at)."""
    seen = 0
    queue = [node]
    while queue and seen < limit:
        n = queue.pop(0)
        if n is None:
            continue
        seen += 1
        attrs, raw = _saved_attrs(n)
        if raw:
            # SavedTensor.data is None once backward freed it (or for an optional value never
            # set): a node whose saved tensors are all None has been freed
            for attr in attrs:
                try:
                    value = getattr(n, attr, None)
                except RuntimeError:  # a compiled graph's node refuses access once backward freed it
                    return False
                for item in (value if isinstance(value, (list, tuple)) else (value,)):
                    if isinstance(getattr(item, "data", None), torch.Tensor):
                        return True
            if attrs:
                return False
        for attr in attrs:
            try:
                value = getattr(n, attr)
            except RuntimeError:  # freed by backward
                return False
            if isinstance(value, torch.Tensor):
                return True
        queue.extend(f for f, _ in getattr(n, "next_functions", ()))
    return None


class GraphChecks(Check):
    name = "graphs"

    def __init__(self, session: GuardSession):
        super().__init__(session)
        self.watch_next: set[int] = set()  # id(ModelInfo): watch the output of this checked forward
        self.live: list[tuple[weakref.ref, int, str]] = []
        self.current: dict[int, tuple[Any, _Sentinel, ModelInfo]] = {}
        self.strikes: dict[str, int] = {}
        self.overlap: dict[tuple[int, int], bool] = {}  # (model, optimizer) -> shares parameters

    def on_checked_forward(self, info: ModelInfo, args: tuple, light: bool) -> None:
        if not light:
            self.watch_next.add(id(info))

    def on_forward_end(self, info: ModelInfo, output: Any, failed: bool) -> None:
        if not failed and id(info) in self.watch_next:
            self.watch_next.discard(id(info))
            self.watch_output(info, output)

    def after_checked_step(self, oi: OptInfo) -> None:
        self.step_post(oi)
        self.check_alive()

    def report_retained(self, info: ModelInfo, loc: str | None, seen: str, why: str = _RETAIN_WHY) -> None:
        self.s.report("retain-graph-in-loop", f"{seen}, {why}", fix=_RETAIN_FIX,
                      where=f"{info.name} output" + (f" at {loc}" if loc else ""), key=info.name)

    def step_post(self, oi: OptInfo) -> None:
        """After a checked step: graphs that backward went through but kept their saved tensors."""
        if not self.current:
            return
        for key in list(self.current):
            info = self.current[key][2]
            pair = (id(info), id(oi))
            overlap = self.overlap.get(pair)
            if overlap is None:
                param_ids = {id(p) for p in oi.params}
                overlap = self.overlap[pair] = any(id(p) in param_ids for p in info.module.parameters())
            if not overlap:
                continue
            nodes, sentinel, _ = self.current.pop(key)
            if not sentinel.fired:
                continue
            if len(sentinel.passes) > 1:
                # two backward passes went through this graph within the step: the first needed
                # retain_graph=True for the second (whatever part of the graph the second did not reach,
                # e.g. a decoder beside the encoder it went back through, stays until its variables go)
                self.strikes[info.name] = 0
                continue
            # only the outputs backward went through: an output beside the loss's (a model that returns
            # probabilities and logits, the loss taken on the logits) keeps its saved tensors with no
            # retain_graph at all, since no backward ever ran through it to free them
            through = [n for i, n in enumerate(nodes) if sentinel.through >> i & 1]
            kept, loc = any(_saved_alive(n) for n in through), sentinel.loc
            if kept:
                # the check's own reference to the node keeps the graph alive: kept means kept by the
                # program too (a variable, a list) -- let go of it and see whether the graph outlives that
                # (the sentinel hangs on the graph's nodes: it lives exactly as long as the graph)
                ref = weakref.ref(sentinel)
                del nodes, through, sentinel
                if ref() is not None:
                    refresh_stack(sys._getframe(1))  # nor is a stale snapshot of a frame's locals (framesnap)
                    gc.collect()  # garbage in a cycle (a frame that held it) is not kept by the program
                kept = ref() is not None
            if kept:
                n = self.strikes[info.name] = self.strikes.get(info.name, 0) + 1
                if n >= 2:
                    self.report_retained(info, loc,
                                         f"after backward and {n} checked optimizer steps in a row, the graph "
                                         f"of {info.name}'s output still held its saved tensors: "
                                         "backward(retain_graph=True) keeps every step's graph and its saved "
                                         "tensors", _KEPT_WHY)
            else:
                self.strikes[info.name] = 0

    def watch_output(self, info: ModelInfo, output: Any) -> None:
        nodes = [t.grad_fn for t in output_tensors(output) if t.grad_fn is not None]
        if not nodes:
            return
        # this call's own site (a model called in two places, a rollout and an update, is named where the
        # graph that was kept was built); only the outputs of checked forwards are watched
        loc = user_location(4) or ""
        sentinel = _Sentinel(self, info, loc)
        nodes = nodes[:4]
        for i, node in enumerate(nodes):
            node.register_hook(_Through(sentinel, i))
        self.live.append((weakref.ref(sentinel), self.s.step, info.name))
        self.current[id(info)] = (nodes, sentinel, info)

    def check_alive(self) -> None:
        if not self.live:
            return
        if "graph-leak" not in self.s.options.ignore and any(
                ref() is not None and self.s.step - step >= _LAG and not self.s.reporter.has("graph-leak", name)
                for ref, step, name in self.live):
            # alive by reference count: garbage in a reference cycle is not a leak -- it goes at the next
            # cyclic collection (dynamo's tracer keeps the frame it compiles, locals included, in such a
            # cycle: the output of a forward compiled with a graph break read as kept for three steps); nor
            # is a value that only a stale snapshot of a running function's locals still holds (``locals()``
            # or a guard that read ``frame.f_locals`` steps ago keeps the loop variable of then: fresh10's
            # minimalrl-sac, its acting output held from step 100 to 206 by main()'s snapshot)
            refresh_stack(sys._getframe(1))
            gc.collect()
        # a leak keeps graph after graph: one graph alive from an old step is also what a variable that
        # holds the last output until it is next assigned gives (PPO's rollout `prob`, held while the
        # optimizer steps K epochs over the batch): bounded, so only graphs of two earlier steps alive
        # together show that memory grows (the latest step's own graphs are alive at any check)
        earlier = {step for ref, step, _ in self.live if ref() is not None and step < self.s.step - 1}
        keep = []
        for ref, step, name in self.live:
            sentinel = ref()
            if sentinel is None:
                continue
            if self.s.step - step >= _LAG and len(earlier) >= 2:
                self.s.report(
                    "graph-leak",
                    f"the autograd graph of {name}'s output from step {self.s.run_step(step)} is still alive at step "
                    f"{self.s.run_step(self.s.step)}: something keeps a graph-carrying tensor across steps (e.g. "
                    "losses.append(loss), total += loss, outputs kept for metrics), so memory grows "
                    "until the run dies.",
                    fix="keep numbers with loss.item() or tensors with "
                    ".detach().",
                    where=f"{name} output" + (f" at {sentinel.loc}" if sentinel.loc else ""),
                    key=name,
                )
                continue
            keep.append((ref, step, name))
        self.live = keep
