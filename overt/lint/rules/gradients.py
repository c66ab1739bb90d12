"""Rules about gradients and the optimizer step (OVT1xx)."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from overt.lint.analysis.events import Event, events, function_events
from overt.lint.analysis.frameworks import framework_fix
from overt.lint.analysis.units import function_units, loop_units
from overt.lint.analysis.values import values_for
from overt.lint.index import FileIndex, dotted, kwarg, names_in, tokens
from overt.lint.rules.base import Hit, rule
from overt.lint.rules.frameworks import configure_optimizers_cadence, hf_compute_loss_unscaled

# --------------------------------------------------------------------------- units


def _is_known_reset(ev: Event) -> bool:
    return ev.kind == "reset" and not ev.info.get("unknown")


# --------------------------------------------------------------------------- stale-gradients


def _stale_in(ix: FileIndex, evs: list[Event]) -> Event | None:
    """The step whose gradients are never reset in ``evs``, or None."""
    steps = [e for e in evs if e.kind == "step"]
    resets = [e for e in evs if e.kind == "reset"]
    if not steps or any(_distributed_autograd(ix, e) for e in evs if e.kind == "backward"):
        return None
    if not resets:
        return steps[0]
    # several optimizers (GAN): each stepped optimizer needs its own reset when
    # every reset names an optimizer.
    if all(_is_known_reset(r) and not r.nested and ix.is_optimizer(r.target) for r in resets):
        reset_targets = {r.target for r in resets}
        for s in steps:
            if s.target and ix.is_optimizer(s.target) and s.target not in reset_targets:
                return s
    return None


def _distributed_autograd(ix: FileIndex, ev: Event) -> bool:
    """``dist_autograd.backward(context_id, [loss])``: gradients live in a fresh context per step (and a
    DistributedOptimizer has no zero_grad), so there is nothing to reset."""
    node = ev.node
    if not isinstance(node, ast.Call):
        return False
    q = ix.qualname(node.func) or ""
    return "dist_autograd" in q or q.startswith("torch.distributed.autograd")


@rule("stale-gradients")
def stale_gradients(ix: FileIndex) -> Iterator[Hit]:
    """One finding per missing reset: where the step happens in a helper the loop calls, it is reported
    once, at the call site, naming the helper (not again inside the helper)."""
    reported: set[int] = set()  # step calls already reported through a call site
    for loop in loop_units(ix):
        bad = _stale_in(ix, events(ix, loop))
        if bad is not None:
            reported.add(id(bad.node))
            opt = bad.target or "optimizer"
            uncalled = next((n for n in ix.scope_nodes(loop) if isinstance(n, ast.Expr)
                             and isinstance(n.value, ast.Attribute) and n.value.attr == "zero_grad"), None)
            if uncalled is not None:
                text = ix.segment(uncalled.value)
                yield Hit("stale-gradients", bad.site,
                          f"`{text}` (line {uncalled.lineno}) is written without parentheses, so it never runs and "
                          f"every step applies the sum of all earlier gradients", fix=f"write `{text}()`")
                continue
            helper = ""
            if bad.nested and isinstance(bad.site, ast.Call):
                helper = (f" (through {dotted(bad.site.func) or 'a helper'}(), whose {opt}.step() is at line "
                          f"{bad.node.lineno})")
            yield Hit("stale-gradients", bad.site,
                      f"this loop calls backward() and {opt}.step(){helper} but never resets the gradients, so every "
                      f"step applies the sum of all earlier gradients", fix=framework_fix(
                          ix, bad.site, f"call {opt}.zero_grad() once per step (before backward() or after step())",
                          accelerate=f"call {opt}.zero_grad() once per step, after {opt}.step() (inside `with "
                                     f"accelerator.accumulate(model):` the prepared optimizer skips it between "
                                     f"accumulation steps itself)"))
    for func in function_units(ix):
        evs = function_events(ix, func)
        bad = _stale_in(ix, evs)
        if bad is None or id(bad.node) in reported:
            continue
        sites = ix.call_sites(func)
        looped = [s for s in sites if ix.enclosing_loops(s)]
        stale = func.name == "training_step" or (looped and any(
            _stale_in(ix, events(ix, ix.enclosing_loops(s)[0])) is not None for s in looped))
        if stale:
            opt = bad.target or "optimizer"
            yield Hit("stale-gradients", bad.site,
                      f"{func.name}() calls backward() and {opt}.step() once per call but nothing resets the "
                      f"gradients between calls", fix=framework_fix(
                          ix, func, f"call {opt}.zero_grad() in it before backward()",
                          lightning=f"call {opt}.zero_grad() in {func.name}() before self.manual_backward(loss): under "
                                    f"manual optimisation Lightning does not reset gradients for you"))


# --------------------------------------------------------------------------- zero-grad-misplaced


_JUMPS = (ast.Continue, ast.Break, ast.Return, ast.Raise)


def _on_exit_path(ix: FileIndex, node: ast.AST, step: ast.AST) -> bool:
    """Is ``node`` in a block that ends with continue/break/return/raise and does not hold ``step``?
    (``if not finite: optimizer.zero_grad(); continue`` skips the step: legal.)"""
    cur = ix.statement_of(node)
    while True:
        parent = ix.parents.get(cur)
        if parent is None or isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Module,
                                                 ast.For, ast.AsyncFor, ast.While)):
            return False
        for _, value in ast.iter_fields(parent):
            if isinstance(value, list) and any(v is cur for v in value):
                if value and isinstance(value[-1], _JUMPS) and not any(
                        step is n for stmt in value for n in ast.walk(stmt)):
                    return True
        cur = parent


def _copies_into_grad(ix: FileIndex, node: ast.AST, depth: int, seen: frozenset[int] = frozenset()) -> bool:
    """``node`` writes saved values into gradients (``p.grad.copy_(buf)``, ``p.grad.data.copy_(buf)``), itself or
    in the in-file helper it calls (``depth`` deep)."""
    for n in ast.walk(node):
        if not isinstance(n, ast.Call):
            continue
        if isinstance(n.func, ast.Attribute) and n.func.attr == "copy_":
            recv = n.func.value
            if isinstance(recv, ast.Attribute) and recv.attr == "data":
                recv = recv.value
            if isinstance(recv, ast.Attribute) and recv.attr == "grad":
                return True
        if depth > 0:
            callee = ix.callee(n)
            if callee is not None and id(callee) not in seen and \
                    any(_copies_into_grad(ix, stmt, depth - 1, seen | {id(callee)}) for stmt in callee.body):
                return True
    return False


def _grads_copied_back(ix: FileIndex, reset: ast.AST, step: ast.AST) -> bool:
    """Between ``reset`` and ``step`` (the same scope, in this order, the copy on every path between them: a
    statement of the block holding the reset), the gradients are written back from a saved copy (a backup
    taken before the reset, as gradient-surgery methods do): the step does not see them zeroed."""
    scope = ix.enclosing_function(reset)
    if scope is not ix.enclosing_function(step):
        return False
    at, end = (reset.lineno, reset.col_offset), (step.lineno, step.col_offset)
    holder = next((a for a in [reset, *ix.ancestors(reset)] if isinstance(a, ast.stmt)), None)
    block = next((v for _, v in ast.iter_fields(ix.parents.get(holder)) if isinstance(v, list)
                  and any(x is holder for x in v)), None) if holder is not None else None
    if block is None:
        return False
    for stmt in block[block.index(holder) + 1:]:
        if (stmt.lineno, stmt.col_offset) >= end:
            break
        if isinstance(stmt, ast.Expr) and _copies_into_grad(ix, stmt, depth=2):
            return True
    return False


def _misplaced(ix: FileIndex, evs: list[Event], cyclic: bool) -> Iterator[tuple[Event, bool]]:
    seq = [e for e in evs if e.kind in ("backward", "step", "reset")]
    optimizers = {e.target for e in seq if e.kind == "step"}
    for j, s in enumerate(seq):
        if s.kind != "step":
            continue
        back = [i for i in range(j) if seq[i].kind == "backward"]
        if back:
            between = seq[back[-1] + 1: j]
            wrapped = False
        elif cyclic:
            later = [i for i in range(j + 1, len(seq)) if seq[i].kind == "backward"]
            if not later:
                continue
            between = seq[later[-1] + 1:] + seq[:j]
            wrapped = True
        else:
            continue
        for r in between:
            if r.kind != "reset" or r.info.get("unknown") or _on_exit_path(ix, r.site, s.site):
                continue
            if not wrapped and _grads_copied_back(ix, r.site, s.site):
                continue  # `p.grad.copy_(saved)` after the reset: the step sees the gradients put back
            if r.target == s.target or (len(optimizers) == 1 and not ix.is_optimizer(r.target)):
                yield r, wrapped
                break


def _unconditional(ix: FileIndex, node: ast.AST, loop: ast.AST) -> bool:
    """Does ``node`` run in every iteration of ``loop`` (no branch, inner loop, try or with between)?"""
    for anc in ix.ancestors(node):
        if anc is loop:
            return True
        if isinstance(anc, (ast.If, ast.IfExp, ast.For, ast.AsyncFor, ast.While, ast.Try, ast.Match,
                            ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.BoolOp)):
            return False
    return False


def _innermost_loop(ix: FileIndex, node: ast.AST) -> ast.AST | None:
    return next((a for a in ix.ancestors(node) if isinstance(a, (ast.For, ast.AsyncFor, ast.While))), None)


def _window_resets(ix: FileIndex, loop: ast.AST) -> Iterator[Event]:
    """Resets that discard an accumulation window: the step runs only under a ``%`` window test while the
    reset runs in every iteration (and so after the backward of every micro-batch whose step is skipped).
    A step whose window runs its own backward() before it is no accumulation (a GAN's generator updated
    every n_critic iterations): the every-iteration backward() feeds another optimizer's step, and the
    reset only clears what it left behind."""
    evs = [e for e in events(ix, loop, depth=0) if _innermost_loop(ix, e.node) is loop]
    steps = [e for e in evs if e.kind == "step" and _under_mod_if(ix, e.node, loop)
             and not _window_backward(ix, evs, e, loop)]
    if not steps:
        return
    backs = [e for e in evs if e.kind == "backward" and _unconditional(ix, e.node, loop)]
    if not backs:
        return
    for r in evs:
        if r.kind != "reset" or r.info.get("unknown") or not _unconditional(ix, r.node, loop) \
                or _on_exit_path(ix, r.node, steps[0].node):
            continue
        if r.target == steps[0].target or (len({s.target for s in steps}) == 1 and not ix.is_optimizer(r.target)):
            yield r


def _window_backward(ix: FileIndex, evs: list[Event], step: Event, loop: ast.AST) -> bool:
    """Does the ``%`` window holding ``step`` run a backward() of its own before it?"""
    window = _under_mod_if(ix, step.node, loop)
    at = (step.node.lineno, step.node.col_offset)
    return any(e.kind == "backward" and (e.node.lineno, e.node.col_offset) < at
               and any(a is window for a in ix.ancestors(e.node)) for e in evs)


@rule("zero-grad-misplaced")
def zero_grad_misplaced(ix: FileIndex) -> Iterator[Hit]:
    seen: set[int] = set()
    for loop in loop_units(ix):
        for reset in _window_resets(ix, loop):
            if id(reset.site) not in seen:
                seen.add(id(reset.site))
                yield Hit("zero-grad-misplaced", reset.site,
                          "the gradients are reset in every iteration but step() runs only once per accumulation "
                          "window (the `%` test), so each reset throws away the micro-batches accumulated since the "
                          "last step and every step uses only the last one",
                          fix="reset the gradients right after step(), inside the same window test")
    units = [(lp, events(ix, lp), True) for lp in loop_units(ix)]
    units += [(f, function_events(ix, f), False) for f in function_units(ix)]
    for _, evs, cyclic in units:
        for reset, wrapped in _misplaced(ix, evs, cyclic):
            if id(reset.site) in seen:
                continue
            seen.add(id(reset.site))
            if wrapped:
                msg = ("step() runs before backward() in each iteration, right after the gradients were reset, "
                       "so the optimizer steps on zero or missing gradients")
                fix = "order the loop as zero_grad(), backward(), step()"
            else:
                msg = ("gradients are reset between backward() and step(), so the optimizer steps on zero or "
                       "missing gradients")
                fix = "move the reset before backward() or after step()"
            yield Hit("zero-grad-misplaced", reset.site, msg, fix=fix)


# --------------------------------------------------------------------------- accumulation-unscaled


def _under_mod_if(ix: FileIndex, node: ast.AST, stop: ast.AST) -> ast.If | None:
    for anc in ix.ancestors(node):
        if anc is stop:
            return None
        if isinstance(anc, ast.If) and any(
                isinstance(n, ast.BinOp) and isinstance(n.op, ast.Mod) for n in ast.walk(anc.test)):
            return anc
    return None


def _scales(expr: ast.AST) -> bool:
    return any(isinstance(n, ast.BinOp) and isinstance(n.op, (ast.Div, ast.Mult, ast.FloorDiv))
               for n in ast.walk(expr))


def _loss_value(ix: FileIndex, value: ast.AST) -> bool:
    """Is ``value`` plainly a loss computed by a loss function (or a model output's ``.loss``)?"""
    if isinstance(value, ast.Attribute) and value.attr == "loss":
        return True
    return isinstance(value, ast.Call) and (ix.is_loss_fn(value) is not None or bool(values_for(ix).of(value).loss))


@rule("accumulation-unscaled")
def accumulation_unscaled(ix: FileIndex) -> Iterator[Hit]:
    yield from hf_compute_loss_unscaled(ix)
    for loop in loop_units(ix):
        evs = events(ix, loop, depth=0)
        steps = [e for e in evs if e.kind == "step" and _under_mod_if(ix, e.node, loop)]
        if not steps:
            continue
        window = _under_mod_if(ix, steps[0].node, loop)
        for back in (e for e in evs if e.kind == "backward"):
            if any(a is window for a in ix.ancestors(back.node)):
                continue  # backward inside the window's if: not accumulation
            expr = back.info.get("expr")
            if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute) and expr.func.attr == "scale":
                expr = expr.args[0] if expr.args else None
            if expr is None or _scales(expr):
                continue
            name = dotted(expr)
            if name is None:
                continue
            values, augmented = [], False
            for n in ix.scope_nodes(loop):
                if isinstance(n, ast.Assign) and any(dotted(t) == name for t in n.targets):
                    values.append(n.value)
                elif isinstance(n, ast.AugAssign) and dotted(n.target) == name:
                    augmented = True
            if augmented or not values or any(_scales(v) for v in values):
                continue
            if all(_loss_value(ix, v) for v in values):
                yield Hit("accumulation-unscaled", back.node,
                          f"gradients accumulate over several backward() calls before each step() (the `%` "
                          f"window), but `{name}` is not divided by the window size, so the update is that many "
                          f"times too large", fix=framework_fix(
                              ix, back.node, "divide the loss by the number of accumulation steps before backward() "
                              "(and by the real size of a last, partial window)",
                              accelerate="let Accelerate accumulate: Accelerator(gradient_accumulation_steps=n), the "
                                         "step inside `with accelerator.accumulate(model):` and accelerator.backward(loss), "
                                         "which divides the loss by n (or divide it yourself before backward)",
                              lightning="divide the loss by the number of accumulation steps before "
                                        "self.manual_backward(loss) (or use automatic optimisation with "
                                        "Trainer(accumulate_grad_batches=n), which scales it for you)"))
                break


# --------------------------------------------------------------------------- clip-before-unscale


@rule("clip-before-unscale")
def clip_before_unscale(ix: FileIndex) -> Iterator[Hit]:
    if not any(isinstance(c.func, ast.Attribute) and c.func.attr == "scale" for c in ix.calls):
        return  # no GradScaler-scaled backward() in this file
    scopes: list[list[ast.stmt]] = [ix.tree.body]
    scopes += [f.body for funcs in ix.functions.values() for f in funcs]
    found: dict[int, list[Event]] = {}  # one clip call, seen directly and/or through the helpers' callers
    for body in scopes:
        pending = False
        for ev in events(ix, body, depth=1):  # a clipping helper (in this file or imported) counts
            if ev.kind == "backward":
                pending = bool(ev.info.get("scaled"))
            elif ev.kind in ("unscale", "step"):
                pending = False
            elif ev.kind == "clip" and pending:
                found.setdefault(id(ev.node), []).append(ev)
                pending = False
    for evs in found.values():
        direct = [e for e in evs if not e.nested]
        callers = [e.site for e in evs if e.nested]
        where = ""
        if direct and callers:
            func = ix.enclosing_function(direct[0].node)
            where = (f" (in {func.name if func else 'a helper'}(), called at line "
                     f"{', '.join(str(c.lineno) for c in callers)})")
        elif callers:
            helper = dotted(callers[0].func) if isinstance(callers[0], ast.Call) else None
            where = f" (in {helper or 'a helper'}(), whose clipping is at line {evs[0].node.lineno} of its module)"
        at = direct[0].site if direct else callers[0]
        yield Hit("clip-before-unscale", at,
                  f"gradients are clipped while still multiplied by the GradScaler's scale{where}, so the "
                  "threshold is compared with scaled values and clipping is a no-op or wipes out the "
                  "update", fix=framework_fix(
                      ix, at, "call scaler.unscale_(optimizer) before clipping",
                      lightning="clip with self.clip_gradients(optimizer, gradient_clip_val=..., "
                                "gradient_clip_algorithm=\"norm\") or Trainer(gradient_clip_val=...), which "
                                "unscale first, and let Lightning's precision plugin do the scaling",
                      accelerate="clip with accelerator.clip_grad_norm_(model.parameters(), max_norm), which "
                                 "unscales first, and let Accelerator(mixed_precision=...) do the scaling",
                      fabric="clip with fabric.clip_gradients(model, optimizer, max_norm=...), which unscales "
                             "first"))


# --------------------------------------------------------------------------- retain-graph-in-loop


@rule("retain-graph-in-loop")
def retain_graph_in_loop(ix: FileIndex) -> Iterator[Hit]:
    for loop in ix.loops:
        evs = events(ix, loop, depth=0)
        if not any(e.kind == "step" for e in evs):
            continue
        backs = [e for e in evs if e.kind == "backward"]
        for i, ev in enumerate(backs):
            if not ev.info.get("retain"):
                continue
            if ix.enclosing_loops(ev.node)[0] is not loop:
                continue  # reported for its innermost loop
            if any(not later.info.get("retain") for later in backs[i + 1:]):
                continue  # a later backward in the same iteration frees the graph
            yield Hit("retain-graph-in-loop", ev.node,
                      "backward(retain_graph=True) in the training loop keeps every step's autograd graph "
                      "alive, so memory grows until the run dies", fix="drop retain_graph=True (or keep it only on "
                      "an earlier backward() that shares the graph within one step)")


# --------------------------------------------------------------------------- scheduler-cadence


def _arg(call: ast.Call, name: str, pos: int) -> ast.expr | None:
    value = kwarg(call, name)
    if value is None and len(call.args) > pos:
        value = call.args[pos]
    return value


def _epoch_horizon(call: ast.Call, kind: str) -> bool:
    """Is this epoch-based scheduler configured in epochs (not in steps)?"""
    if kind == "ExponentialLR":
        gamma = _arg(call, "gamma", 1)
        return isinstance(gamma, ast.Constant) and isinstance(gamma.value, float) and gamma.value < 0.99
    name, pos = {"StepLR": ("step_size", 1), "MultiStepLR": ("milestones", 1),
                 "CosineAnnealingLR": ("T_max", 1)}[kind]
    expr = _arg(call, name, pos)
    if expr is None:
        return False
    words = {t for n in names_in(expr) for t in tokens(n)}
    if words & {"len", "step", "steps", "iter", "iters", "iterations", "batch", "batches", "total"}:
        return False
    if words & {"epoch", "epochs"}:
        return True
    consts = [n.value for n in ast.walk(expr) if isinstance(n, ast.Constant)]
    return bool(consts) and not words and all(isinstance(c, int) and 0 < c <= 200 for c in consts)


def _between(ix: FileIndex, node: ast.AST, stop: ast.AST) -> list[ast.AST]:
    out = []
    for anc in ix.ancestors(node):
        if anc is stop:
            break
        out.append(anc)
    return out


def _step_loop(ix: FileIndex, loop: ast.AST) -> bool:
    """Does ``loop`` itself (not a loop nested in it) call optimizer.step()?"""
    return any(e.kind == "step" and ix.enclosing_loops(e.node)[:1] == [loop] for e in events(ix, loop, depth=0))


def _own_scheduler_class(ix: FileIndex, target: str | None) -> bool:
    """Is ``target`` made by a class this file defines that is not a torch scheduler?  Its ``step()`` may set
    the rate for the step about to run (a warm-up written by hand that starts from step 1), so stepping it
    before ``optimizer.step()`` skips nothing: the premise that the first value is lost holds for torch's
    ``LRScheduler``, which applies its first value when it is built."""
    for value in ix.assigns.get(target or "", []):
        if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id in ix.classes:
            bases = {(dotted(b) or "").rsplit(".", 1)[-1] for b in ix.classes[value.func.id].bases}
            if not any("LR" in b or "Scheduler" in b for b in bases):
                return True
    return False


@rule("scheduler-cadence")
def scheduler_cadence(ix: FileIndex) -> Iterator[Hit]:
    yield from configure_optimizers_cadence(ix)
    for loop in ix.loops:
        evs = events(ix, loop, depth=1)
        for ev in evs:
            if ev.kind != "sched_step" or ev.nested:
                continue
            loops = ix.enclosing_loops(ev.node)
            if not loops or loops[0] is not loop:
                continue
            if any(isinstance(a, ast.If) for a in _between(ix, ev.node, loop)):
                continue  # stepped conditionally (e.g. on the last batch): cadence unknown
            call = ix.schedulers.get(ev.target or "")
            kind = (ix.qualname(call.func) or "").rsplit(".", 1)[-1] if call is not None else ""
            if kind == "ReduceLROnPlateau":
                continue
            steps = [e for e in evs if e.kind == "step"]
            if steps and ev.node.lineno < steps[0].site.lineno and not ev.node.args \
                    and not _own_scheduler_class(ix, ev.target):
                yield Hit("scheduler-cadence", ev.node,
                          f"{ev.target}.step() runs before optimizer.step() in this loop, so the first value of "
                          f"the schedule is skipped (PyTorch warns about it)", fix="call it after optimizer.step()")
                continue
            if call is None:
                continue
            in_step_loop = _step_loop(ix, loop)
            contains_step_loop = not in_step_loop and (
                any(_step_loop(ix, inner) for inner in ix.loops if loop in ix.enclosing_loops(inner))
                or any(e.kind == "step" and e.nested and ix.enclosing_loops(e.node) for e in evs))
            if kind in ("StepLR", "MultiStepLR", "ExponentialLR", "CosineAnnealingLR") and in_step_loop \
                    and len(ix.enclosing_loops(ev.node)) >= 1 and _epoch_horizon(call, kind) and not ev.node.args:
                yield Hit("scheduler-cadence", ev.node,
                          f"{kind} is configured in epochs but {ev.target}.step() runs once per batch, so the "
                          f"schedule runs as many times too fast as there are batches per epoch", fix="step it once "
                          "per epoch, after the batch loop")
            elif kind in ("OneCycleLR", "CyclicLR") and contains_step_loop:
                total = kwarg(call, "total_steps")
                words = {t for n in names_in(total) for t in tokens(n)} if total is not None else set()
                if words and words <= {"epoch", "epochs", "num", "n", "max", "args", "cfg", "config"}:
                    continue
                yield Hit("scheduler-cadence", ev.node,
                          f"{kind} is a per-batch schedule but {ev.target}.step() runs once per epoch, so the "
                          f"learning rate barely moves", fix="call it after every optimizer.step() in the batch loop")


# --------------------------------------------------------------------------- clip-after-step


def _measures(call: ast.AST) -> bool:
    """``clip_grad_norm_(params, float("inf"))``: the gradient norm read for logging, nothing clipped."""
    if not isinstance(call, ast.Call):
        return False
    limit = call.args[1] if len(call.args) > 1 else kwarg(call, "max_norm") or kwarg(call, "clip_value")
    return isinstance(limit, ast.Call) and isinstance(limit.func, ast.Name) and limit.func.id == "float" \
        and bool(limit.args) and isinstance(limit.args[0], ast.Constant) and str(limit.args[0].value).lower() in (
            "inf", "+inf", "infinity") or (isinstance(limit, ast.Attribute) and limit.attr == "inf")


def _clips_after_step(evs: list[Event]) -> Iterator[tuple[Event, Event]]:
    """(clip, step) pairs of one pass through ``evs`` (an iteration of a loop or one call of a step function)
    ordered backward(), step(), clip with no backward() between the step and the clip and no clip between the
    backward and the step: the step consumed the gradients unclipped, and the clip rescales gradients no step
    reads (the next reset discards them, or the next backward adds to them)."""
    seq = [e for e in evs if e.kind in ("backward", "step") or (e.kind == "clip" and not _measures(e.node))]
    for j, c in enumerate(seq):
        if c.kind != "clip":
            continue
        before = seq[:j]
        last_back = max((i for i, e in enumerate(before) if e.kind == "backward"), default=None)
        if last_back is None:
            continue
        after_back = before[last_back + 1:]
        steps = [e for e in after_back if e.kind == "step"]
        if steps and not any(e.kind == "clip" for e in after_back):
            yield c, steps[-1]


@rule("clip-after-step")
def clip_after_step(ix: FileIndex) -> Iterator[Hit]:
    seen: set[int] = set()
    units = [events(ix, lp) for lp in loop_units(ix)] + [function_events(ix, f) for f in function_units(ix)]
    for evs in units:
        for clip, step in _clips_after_step(evs):
            if id(clip.site) in seen:
                continue
            seen.add(id(clip.site))
            what = ix.segment(step.site) or "step()"
            yield Hit("clip-after-step", clip.site,
                      f"the gradients are clipped after `{what}` (line {step.site.lineno}) already applied them "
                      "unclipped: the step never sees the clipped gradients, the clipping only rescales gradients "
                      "that the next reset throws away, and the run trains as if there were no clipping",
                      fix="clip between backward() and step(): loss.backward(); clip_grad_norm_(...); "
                          "optimizer.step()")
