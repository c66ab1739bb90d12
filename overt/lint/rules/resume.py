"""A resume that restores the weights and the epoch but not the optimizer (OVT608 ``partial-resume``)."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from overt.lint.analysis.events import never_runs, ruled_out_by
from overt.lint.analysis.units import function_units, loop_units
from overt.lint.index import FileIndex, dotted, kwarg
from overt.lint.rules.base import Hit, rule

_PROGRESS_WORDS = ("epoch", "step", "iter", "iteration")


def _checkpoints(ix: FileIndex) -> dict[str, ast.Call]:
    """Names assigned the result of ``torch.load(...)``."""
    out = {}
    for call in ix.calls:
        if (ix.qualname(call.func) or "") != "torch.load":
            continue
        parent = ix.parents.get(call)
        if isinstance(parent, ast.Assign) and len(parent.targets) == 1 and isinstance(parent.targets[0], ast.Name):
            out[parent.targets[0].id] = call
    return out


def _key(node: ast.AST, name: str) -> str | None:
    """``"net"`` of ``name["net"]``."""
    if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and node.value.id == name \
            and isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str):
        return node.slice.value
    return None


def _plain_sgd(q: str, call: ast.Call) -> bool:
    """``call`` (of the torch optimizer ``q``) builds SGD without momentum: an optimizer with no state to lose."""
    momentum = kwarg(call, "momentum")
    plain = momentum is None or (isinstance(momentum, ast.Constant) and not momentum.value)
    return q.rsplit(".", 1)[-1] == "SGD" and plain  # ASGD keeps its averages: not plain


def _stateful(ix: FileIndex) -> list[str]:
    """What an uninterrupted run carries besides the weights: the optimizers whose state matters (any but
    plain SGD without momentum) and the learning-rate schedulers."""
    out = []
    for name in ix.optimizers:
        kinds = []
        for v in ix.assigns.get(name, []):
            q = ix.qualname(v.func) or "" if isinstance(v, ast.Call) else ""
            if not (ix.is_torchish(q) and ".optim." in f".{q}." and q.rsplit(".", 1)[-1][:1].isupper()):
                continue  # built elsewhere (a helper, a tuple from a function): not known here
            kinds.append(not _plain_sgd(q, v))
        if kinds and all(kinds):
            out.append(name)
    return sorted(set(out)) + sorted(s for s, call in ix.schedulers.items() if not _positioned(call))


def _positioned(call: ast.Call) -> bool:
    """The scheduler is built at a given point of its schedule (``last_epoch=start_epoch - 1``): its position is
    restored by its constructor, not lost with its state_dict."""
    for kw in call.keywords:
        value = kw.value
        from_start = isinstance(value, ast.UnaryOp) and isinstance(value.op, ast.USub) and \
            isinstance(value.operand, ast.Constant)  # last_epoch=-1: the schedule's first value
        if kw.arg == "last_epoch" and not from_start:
            return True
    return False


def _known_stateless(ix: FileIndex, name: str) -> bool:
    """``name`` is built in this file as plain SGD without momentum."""
    return any(isinstance(v, ast.Call) and ix.is_torchish(q := ix.qualname(v.func) or "") and _plain_sgd(q, v)
               for v in ix.assigns.get(name, []))


def _saved_state_keys(ix: FileIndex, restored: set[str]) -> list[tuple[ast.Constant, str]]:
    """``(key, owner)`` of ``torch.save({key: owner.state_dict(), ...}, ...)`` dict literals where ``owner`` is an
    optimizer or a scheduler with state, restored nowhere in the file: the author keeps that state in the
    checkpoint, so a load that never reads it back was meant to."""
    out = []
    for call in ix.calls:
        if (ix.qualname(call.func) or "") != "torch.save" or not call.args:
            continue
        saved = call.args[0]
        if isinstance(saved, ast.Name):  # `ckpt = {...}; torch.save(ckpt, path)`
            saved = next((v for v in reversed(ix.assigns.get(saved.id, [])) if isinstance(v, ast.Dict)), saved)
        if not isinstance(saved, ast.Dict):
            continue
        for key, value in zip(saved.keys, saved.values):
            if not (isinstance(key, ast.Constant) and isinstance(key.value, str) and isinstance(value, ast.Call)
                    and isinstance(value.func, ast.Attribute) and value.func.attr == "state_dict"):
                continue
            owner = dotted(value.func.value) or ""
            if owner and owner not in restored and (ix.is_optimizer(owner) or ix.is_scheduler(owner)) \
                    and not _known_stateless(ix, owner):
                out.append((key, owner))
    return out


def _built_after(ix: FileIndex, load: ast.Call, scope: ast.AST) -> set[str]:
    """Names bound to a new torch optimizer or scheduler after ``load`` in the same scope."""
    out = set()
    for node in ix.scope_nodes(scope):
        if isinstance(node, ast.Assign) and node.lineno > load.end_lineno and isinstance(node.value, ast.Call):
            q = ix.qualname(node.value.func) or ""
            if ix.is_torchish(q) and (".optim." in f".{q}." or ".lr_scheduler." in f".{q}."):
                out.update(n.id for t in node.targets for n in ast.walk(t) if isinstance(n, ast.Name))
    return out


def _trains_after(ix: FileIndex, load: ast.Call, scope: ast.AST) -> bool:
    """A training loop, or a call of a function that trains, after ``load`` in the same scope."""
    trainers = {f.name for f in function_units(ix)}
    trainers |= {f.name for funcs in ix.functions.values() for f in funcs
                 if any(ix.enclosing_function(lp) is f for lp in loop_units(ix))}
    for node in ix.scope_nodes(scope):
        if getattr(node, "lineno", 0) <= load.end_lineno:
            continue
        if node in loop_units(ix):
            return True
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in trainers:
            return True
    return False


@rule("partial-resume")
def partial_resume(ix: FileIndex) -> Iterator[Hit]:
    if ix.is_test_file or not (loop_units(ix) or function_units(ix)):
        return  # nothing trains on in this file
    stateful_all = _stateful(ix)
    restores = [(dotted(call.func.value) or "", call) for call in ix.calls
                if isinstance(call.func, ast.Attribute) and call.func.attr == "load_state_dict"]
    # `if SAVE_OPTIMIZER:` with SAVE_OPTIMIZER = False restores nothing
    restored_live = {name for name, call in restores if not never_runs(ix, call)}

    def missing(restored: set[str]) -> tuple[list[str], list[tuple[ast.Constant, str]]] | None:
        """What the resume leaves out, given the restores that run; None where an optimizer is restored."""
        # any load_state_dict of an optimizer, or a helper handed one: the author restores it
        if any(ix.is_optimizer(r) or "optim" in r.lower() for r in restored):
            return None
        # a restored scheduler is no longer missing
        return [s for s in stateful_all if s not in restored], _saved_state_keys(ix, restored)

    for ckpt, load in _checkpoints(ix).items():
        # a checkpoint read in a branch a module constant rules out (`if resume_epoch == 0: ... else:` with
        # `resume_epoch = 0`, edited by hand to resume) is judged as the branch reads once the constant is
        # changed: a restore that a constant rules out with it runs with it
        dead = ruled_out_by(ix, load)
        left = missing(restored_live | {name for name, call in restores if dead and
                                        all(any(d is g for g in dead) for d in ruled_out_by(ix, call))})
        if left is None or not (left[0] or left[1]):
            continue
        stateful, saved = left
        scope = ix.enclosing_function(load) or ix.tree
        names = [n for n in ix.scope_nodes(scope) if isinstance(n, ast.Name) and n.id == ckpt]
        at = (load.lineno, load.col_offset)
        # the reads of this binding: after the load, before the name is bound again (to the dict saved next)
        rebound = min(((n.lineno, n.col_offset) for n in names if isinstance(n.ctx, ast.Store)
                       and (n.lineno, n.col_offset) > at and n.lineno > load.end_lineno), default=None)
        uses = [n for n in names if isinstance(n.ctx, ast.Load) and (n.lineno, n.col_offset) > at
                and (rebound is None or (n.lineno, n.col_offset) < rebound)]
        weights, progress = None, None
        for use in uses:
            holder = ix.parents.get(use)
            if isinstance(holder, ast.Subscript) and not isinstance(holder.ctx, ast.Load):
                continue  # `state["optimizer"] = ...`: written, not read
            if not isinstance(holder, ast.Subscript):
                if isinstance(holder, ast.Call) and use in holder.args and not (
                        isinstance(holder.func, ast.Attribute) and holder.func.attr == "load_state_dict"):
                    weights = progress = None
                    break  # handed whole to a helper (which may restore the rest)
                continue
            key = _key(holder, ckpt) or ""
            call = ix.parents.get(holder)
            if isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and \
                    call.func.attr == "load_state_dict" and call.args and call.args[0] is holder:
                if ix.is_scheduler(dotted(call.func.value)):
                    progress = progress or holder  # the schedule's state is the run's progress (its last_epoch)
                else:
                    weights = weights or call
            elif any(w in key.lower() for w in _PROGRESS_WORDS):
                progress = progress or holder
            elif "optim" in key.lower() or "sched" in key.lower():
                weights = progress = None
                break  # the optimizer's entry is read (restored some other way)
        if weights is None:
            continue
        lost, kept = stateful, None
        if progress is None or not stateful:
            # no progress read back: still a resume when this file saves the optimizer's or the scheduler's state
            # into the checkpoint, this load reads none of it back, and training goes on after the load
            if not saved or not _trains_after(ix, load, scope):
                continue
            # an optimizer built afresh after the checkpoint is read (`opt = Adam(..., lr=1e-3)`) may be a deliberate
            # new start; one built before it and never handed the saved state is a forgotten restore
            fresh = _built_after(ix, load, scope)
            saved_here = [(k, o) for k, o in saved if o not in fresh]
            if not saved_here:
                continue
            lost = sorted({owner for _, owner in saved_here})
            kept = saved_here[0][0]
        missing = " and ".join(f"`{s}`" for s in lost)
        cold = any(not ix.is_scheduler(s) for s in lost)  # an optimizer's state is missing
        restarts = "the optimizer restarts without its momentum/moments"
        if any(ix.is_scheduler(s) for s in lost):
            restarts = f"{restarts} and the schedule from its first value" if cold else \
                "the schedule restarts from its first value"
        if kept is None:
            what = f"restores the model's weights and the progress (`{ix.segment(progress)}`, line " \
                   f"{progress.lineno}) from `{ckpt}` but not the state of {missing}, and training goes on"
        else:
            what = f"restores the model's weights from `{ckpt}` but not the state of {missing}, which this file " \
                   f"saves into the checkpoint (`{ix.segment(kept)}`, line {kept.lineno}), and training goes on " \
                   f"after the load"
        yield Hit("partial-resume", weights,
                  f"this resume {what}: {restarts}, so the resumed run computes something other than an "
                  f"uninterrupted one",
                  fix="save optimizer.state_dict() (and scheduler.state_dict()) in the checkpoint and load them "
                      "back with load_state_dict when resuming" if kept is None else
                      f"load the saved state of {missing} back with load_state_dict before training resumes")
