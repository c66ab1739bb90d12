"""Rules about DataLoader arguments by how each loader is used (OVT5xx)."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from overt.lint.analysis.events import events
from overt.lint.analysis.units import eval_regions, loop_units, model_calls
from overt.lint.analysis.frameworks import framework_fix
from overt.lint.index import FileIndex, dotted, has_star_kwargs, is_const, kwarg
from overt.lint.rules.base import decided, Hit, rule


def _role(ix: FileIndex, call: ast.Call) -> str | None:
    """'train' / 'eval' from the loader's name, its data set's name, or the loop that iterates it."""
    parent = ix.parents.get(call)
    names: list[str] = []
    if isinstance(parent, ast.Assign):
        names = [dotted(t) or "" for t in parent.targets]
    elif isinstance(parent, ast.keyword) and parent.arg:
        names = [parent.arg]
    for n in names:
        role = ix.loader_role(n)
        if role:
            return role
    ds = call.args[0] if call.args else kwarg(call, "dataset")
    role = ix.loader_role(dotted(ds) or "") if ds is not None else None
    if role:
        return role
    if names:
        def iterated(loop: ast.AST) -> bool:
            return isinstance(loop, (ast.For, ast.AsyncFor)) and any(
                dotted(x) in names for x in ast.walk(loop.iter) if isinstance(x, (ast.Name, ast.Attribute)))

        train = any(iterated(lp) for lp in loop_units(ix))
        evaluate = any(iterated(r) for r, _, named in eval_regions(ix) if named)
        if train != evaluate:
            return "train" if train else "eval"
    return None


_PARTS = ("Subset", "random_split")  # a part of another data set: its samples are that set's


def _iterable_dataset(ix: FileIndex, call: ast.Call) -> bool:
    ds = call.args[0] if call.args else kwarg(call, "dataset")
    return ds is not None and _unordered_data(ix, ds)


def _unordered_data(ix: FileIndex, ds: ast.expr, depth: int = 3) -> bool:
    """Is ``ds`` an iterable data set (which cannot be shuffled) or one of samples drawn at random (whose
    order carries nothing), directly, through the names it was assigned to, or as a ``Subset`` /
    ``random_split`` part of one?"""
    values = [ds] + ix.assigns.get(dotted(ds) or "", [])
    for v in values:
        if isinstance(v, ast.Call):
            cname = (dotted(v.func) or "").rsplit(".", 1)[-1]
            cls = ix.classes.get(cname)
            if "Iterable" in cname or "Stream" in cname:
                return True
            if cname.startswith(("Random", "Fake", "Synthetic", "Dummy")):
                return True  # samples drawn at random: their order carries nothing to shuffle away
            if cls is not None and any("Iterable" in (dotted(b) or "") for b in cls.bases):
                return True
            whole = (v.args[0] if v.args else kwarg(v, "dataset")) if cname in _PARTS else None
            if whole is not None and depth > 0 and _unordered_data(ix, whole, depth - 1):
                return True
    text = (dotted(ds) or "").lower()
    return "stream" in text or "iterable" in text or "iterator" in text


def _first_batch_only(ix: FileIndex, call: ast.Call) -> bool:
    """Is the loader only ever asked for its first batch, once (``next(iter(loader))`` outside any
    loop: a batch to look at or to plot, not a pass over the data)?  Inside a loop the same call
    would train on the first batch again and again, which shuffling is what varies: not skipped."""
    def first_batch(node: ast.AST) -> bool:
        holder = ix.parents.get(node)
        outer = ix.parents.get(holder)
        return isinstance(holder, ast.Call) and dotted(holder.func) == "iter" and holder.args == [node] \
            and isinstance(outer, ast.Call) and dotted(outer.func) == "next" and outer.args[:1] == [holder] \
            and not ix.enclosing_loops(node)

    parent = ix.parents.get(call)
    if not (isinstance(parent, ast.Assign) and len(parent.targets) == 1 and isinstance(parent.targets[0], ast.Name)):
        return first_batch(call)
    name = parent.targets[0].id
    scope = ix.enclosing_function(call) or ix.tree  # nested functions included: a closure's use counts too
    uses = [n for n in ast.walk(scope) if isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Load)]
    return bool(uses) and all(first_batch(u) for u in uses)


def _looked_at_only(ix: FileIndex, call: ast.Call) -> bool:
    """Is the loader only iterated to look at its samples, in a file that trains nothing?  A loader's
    order matters to the training that consumes it.  Here the file calls no ``backward()`` nor ``step()``
    and holds no optimizer, the loader is bound to one name, and every read of that name is the iterable of
    a ``for`` loop that runs no model and names none (a data set module's ``__main__`` block that plots a
    few samples, say): nothing trains on it, whatever it is called.  A loader returned, passed on or stored
    is used elsewhere: not proven."""
    if ix.optimizers or any(isinstance(c.func, ast.Attribute) and c.func.attr in ("backward", "step")
                            for c in ix.calls):
        return False
    parent = ix.parents.get(call)
    if not (isinstance(parent, ast.Assign) and len(parent.targets) == 1 and isinstance(parent.targets[0], ast.Name)):
        return False
    name = parent.targets[0].id
    scope = ix.enclosing_function(call) or ix.tree
    uses = [n for n in ast.walk(scope) if isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Load)]
    if not uses:
        return False
    for use in uses:
        loop = next((lp for lp in ix.enclosing_loops(use) if isinstance(lp, (ast.For, ast.AsyncFor))
                     and any(n is use for n in ast.walk(lp.iter))), None)
        if loop is None or model_calls(ix, loop) or any(
                ix.is_model(dotted(n)) for n in ast.walk(loop) if isinstance(n, (ast.Name, ast.Attribute))):
            return False
        if {e.kind for e in events(ix, loop, depth=2)} & {"backward", "step"}:
            return False
    return True


def _batches_itself(call: ast.Call) -> bool:
    """``batch_size=None`` written out: automatic batching is off, so the data set yields whole batches and
    decides which samples go together and in what order (a pipeline that shuffles its own buffer, say); the
    loader's ``shuffle`` could only reorder batches already made, and an iterable set refuses it.  Whether the
    set shuffles is out of this call's view: nothing is proven."""
    size = kwarg(call, "batch_size")
    if size is None and len(call.args) >= 2:
        size = call.args[1]
    return size is not None and is_const(size, None)


def _shuffle(call: ast.Call) -> ast.expr | None:
    value = kwarg(call, "shuffle")
    if value is None and len(call.args) >= 3:
        value = call.args[2]
    return value


@rule("unshuffled-training")
def unshuffled_training(ix: FileIndex) -> Iterator[Hit]:
    if ix.is_test_file:
        return  # a test's loaders feed a few steps of a check, not a model anyone keeps
    for call in ix.calls:
        if not ix.call_is(call, "DataLoader") or has_star_kwargs(call):
            continue
        if kwarg(call, "sampler") is not None or kwarg(call, "batch_sampler") is not None or _batches_itself(call):
            continue
        written = _shuffle(call)
        if written is not None and not is_const(written, False):
            continue  # shuffle=args.shuffle: the author decides at run time
        if _role(ix, call) == "train" and not _iterable_dataset(ix, call) and not _first_batch_only(ix, call) \
                and not _looked_at_only(ix, call):
            hit = Hit("unshuffled-training", call,
                      "this training DataLoader does not shuffle (shuffle defaults to False), so every epoch sees "
                      "the data in the same "
                      "order (on ordered data: batches of one class, a model biased to what came last)", fix=framework_fix(
                          ix, call, "pass shuffle=True (or a sampler)",
                          lightning="pass shuffle=True to the DataLoader train_dataloader returns: Lightning adds no "
                                    "shuffling (under DDP its DistributedSampler keeps the loader's shuffle=False)",
                          accelerate="pass shuffle=True (accelerator.prepare keeps the loader's order; under several "
                                     "processes its sampler shuffles only when the loader did)"))
            # shuffle=False written out is a decision (time series, curriculum)
            yield decided(hit, "shuffle=False") if written is not None else hit


_LABEL_ATTRS = frozenset({"targets", "target", "labels", "label", "y", "Y", "test_labels", "test_targets",
                          "val_labels", "valid_labels", "test_y", "val_y", "gt", "ground_truth"})


def _loader_name(ix: FileIndex, call: ast.Call) -> str | None:
    parent = ix.parents.get(call)
    if isinstance(parent, ast.Assign) and len(parent.targets) == 1:
        return dotted(parent.targets[0])
    return None


def _collected(ix: FileIndex, loop: ast.stmt) -> set[str]:
    """Lists a loop fills with what it computes per batch (``preds.append(model(x).argmax(1))``)."""
    out = set()
    for n in ast.walk(loop):
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in ("append", "extend") \
                and n.args and any(isinstance(c, ast.Call) for c in ast.walk(n.args[0])):
            name = dotted(n.func.value)
            if name:
                out.add(name)
        elif isinstance(n, ast.AugAssign) and isinstance(n.target, ast.Name) and isinstance(n.value, ast.List):
            out.add(n.target.id)
    return out


def _label_read(node: ast.AST, names: set[str]) -> bool:
    """A data set's labels read in file order: ``test_ds.targets``, ``val_ds.labels``, a TensorDataset's
    ``ds.tensors[1]`` (not ``self.x``, not an attribute of the collected outputs)."""
    if isinstance(node, ast.Attribute) and node.attr in _LABEL_ATTRS:
        return dotted(node.value) != "self" and not (isinstance(node.value, ast.Name) and node.value.id in names)
    return (isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute) and node.value.attr == "tensors"
            and isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, int) and node.slice.value >= 1)


def _iterates(node: ast.AST, loader: str) -> bool:
    return loader in {dotted(n) for n in ast.walk(node) if isinstance(n, (ast.Name, ast.Attribute))}


def _collections(ix: FileIndex, loader: str, scope: ast.AST | None) -> Iterator[tuple[ast.AST, set[str]]]:
    """(the loop, the names holding what it collects per batch) for each loop over ``loader``: a ``for``
    that appends (``preds.append(model(x).argmax(1))``), or a comprehension assigned to a name
    (``preds = torch.cat([model(x).argmax(1) for x, _ in loader])``), in the function ``scope`` that made the
    loader (None: module level)."""
    for loop in ix.loops:
        if isinstance(loop, (ast.For, ast.AsyncFor)) and _iterates(loop.iter, loader) \
                and ix.enclosing_function(loop) is scope:
            names = _collected(ix, loop)
            if names:
                yield loop, names
    for node in ast.walk(ix.tree):
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)) \
                or ix.enclosing_function(node) is not scope:
            continue
        for comp in ast.walk(node.value):
            if isinstance(comp, (ast.ListComp, ast.GeneratorExp)) and any(
                    _iterates(g.iter, loader) for g in comp.generators) \
                    and any(isinstance(c, ast.Call) for c in ast.walk(comp.elt)):
                yield node, {node.targets[0].id}
                break
    # ``gathered.append(torch.cat([model(x).argmax(1) for x, _ in loader]))``, in a loop over ranks or shards:
    # the list appended to, read after the outermost loop around the append
    for node in ast.walk(ix.tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr in ("append", "extend") and node.args) or ix.enclosing_function(node) is not scope:
            continue
        name = dotted(node.func.value)
        if name and any(isinstance(comp, (ast.ListComp, ast.GeneratorExp)) and any(
                _iterates(g.iter, loader) for g in comp.generators) for comp in ast.walk(node.args[0])):
            loops = [a for a in ix.ancestors(node) if isinstance(a, (ast.For, ast.AsyncFor, ast.While))
                     and ix.enclosing_function(a) is scope]
            yield (loops[-1] if loops else ix.statement_of(node)), {name}


_REORDERS = frozenset({"argsort", "sort", "scatter", "scatter_", "index_copy", "index_copy_", "index_select",
                       "index_put", "index_put_", "sorted"})


def _realigned(after: list[ast.AST], names: set[str]) -> bool:
    """Are the collected outputs put back in the data set's order after the loop (``ordered[index] = preds``,
    ``preds[order]``, a sort or scatter by index)?  Then nothing is proven."""
    def uses(node: ast.AST) -> bool:
        return any(isinstance(m, ast.Name) and m.id in names for m in ast.walk(node))
    for n in after:
        if isinstance(n, ast.Assign) and any(isinstance(t, ast.Subscript) for t in n.targets) and uses(n.value):
            return True
        if isinstance(n, ast.Subscript) and isinstance(n.value, ast.Name) and n.value.id in names \
                and not isinstance(n.slice, (ast.Slice, ast.Constant)):
            return True
        if isinstance(n, ast.Call) and (dotted(n.func) or "").rsplit(".", 1)[-1] in _REORDERS and uses(n):
            return True
    return False


def _compared_in_file_order(ix: FileIndex, loader: str, call: ast.Call) -> ast.AST | None:
    """Where outputs collected batch by batch from ``loader`` are compared with a data set's labels read in
    file order (``(preds == test_ds.targets).mean()``, ``accuracy_score(test_ds.labels, preds)``, a label
    tensor taken from the data set first: ``y_true = val_ds.tensors[1]``): the node, or None.  With a
    shuffled loader the two orders differ, so the metric is computed on mismatched pairs."""
    for loop, names in _collections(ix, loader, ix.enclosing_function(call)):
        scope = ix.enclosing_function(loop) or ix.tree
        after = [n for n in ix.scope_nodes(scope) if getattr(n, "lineno", 0) > (loop.end_lineno or loop.lineno)]
        for _ in range(2):  # preds = torch.cat(preds_list).argmax(1): what is made of the collected list
            for n in after:
                if isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name) and any(
                        isinstance(m, ast.Name) and m.id in names for m in ast.walk(n.value)):
                    names.add(n.targets[0].id)
        # names bound to the data set's labels in the same scope (``y_true = val_ds.tensors[1]``)
        label_names = {n.targets[0].id for n in ix.scope_nodes(scope)
                       if isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name)
                       and n.targets[0].id not in names and any(_label_read(m, names) for m in ast.walk(n.value))}
        if _realigned(after, names):
            continue
        for n in after:
            if not isinstance(n, (ast.Compare, ast.Call, ast.BinOp)):
                continue
            parts = list(ast.walk(n))
            uses = any(isinstance(m, ast.Name) and m.id in names for m in parts)
            labels = any(_label_read(m, names) or (isinstance(m, ast.Name) and m.id in label_names) for m in parts)
            if uses and labels:
                return n
    return None


@rule("shuffled-evaluation")
def shuffled_evaluation(ix: FileIndex) -> Iterator[Hit]:
    for call in ix.calls:
        if ix.call_is(call, "DataLoader") and is_const(_shuffle(call), True) and _role(ix, call) == "eval":
            name = _loader_name(ix, call)
            if name and _compared_in_file_order(ix, name, call) is not None:
                continue  # the cause itself is proven: eval-order-mismatch names it
            yield Hit("shuffled-evaluation", call,
                      "this evaluation DataLoader shuffles: metrics computed from its own (input, label) batches "
                      "are unchanged, but whatever is collected per sample (predictions, embeddings, saved "
                      "outputs) comes out in a different order every run and no longer lines up with the data "
                      "set's order", fix="use shuffle=False")


_EVAL_HOOKS = frozenset({"val_dataloader", "test_dataloader", "predict_dataloader"})


@rule("eval-drops-samples")
def eval_drops_samples(ix: FileIndex) -> Iterator[Hit]:
    """An evaluation DataLoader built with ``drop_last=True`` (issue 33, evaluation on a subset by accident)."""
    for call in ix.calls:
        if not (ix.call_is(call, "DataLoader") and is_const(kwarg(call, "drop_last"), True)):
            continue
        func = ix.enclosing_function(call)
        hook = func is not None and func.name in _EVAL_HOOKS
        if not hook and _role(ix, call) != "eval":
            continue
        where = f"the DataLoader returned by {func.name}()" if hook and func is not None else "an evaluation DataLoader"
        yield Hit("eval-drops-samples", kwarg(call, "drop_last") or call,
                  f"{where} is built with drop_last=True: the last len(dataset) % batch_size samples are left out of "
                  f"every evaluation pass, so the metric is computed on a subset that changes with the batch size",
                  fix="drop drop_last=True from evaluation loaders (keep it for training, where a ragged last batch "
                      "is a choice)",
                  severity="info")  # whether a sample is dropped depends on sizes lint cannot see: the guard proves it


def _constant_stop(test: ast.AST, counters: set[str]) -> int | None:
    """N of ``i == N`` / ``i >= N`` / ``i > N - 1`` / ``N <= i`` where ``i`` is a batch counter, else None."""
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1
            and isinstance(test.ops[0], (ast.Eq, ast.GtE, ast.Gt, ast.LtE, ast.Lt))):
        return None
    left, right = test.left, test.comparators[0]
    if isinstance(left, ast.Constant):
        left, right = right, left
    if not (isinstance(left, ast.Name) and left.id in counters and isinstance(right, ast.Constant)
            and isinstance(right.value, int) and not isinstance(right.value, bool)):
        return None
    return right.value


@rule("eval-loop-stops-early")
def eval_loop_stops_early(ix: FileIndex) -> Iterator[Hit]:
    """An evaluation loop over a DataLoader that breaks after a constant number of batches (issue 33, evaluation
    on a subset by accident: a debugging limit left in)."""
    for region, _, named in eval_regions(ix):
        if not (named and isinstance(region, (ast.For, ast.AsyncFor))):
            continue
        counters: set[str] = set()
        it = region.iter
        if isinstance(it, ast.Call) and dotted(it.func) == "enumerate" and isinstance(region.target, ast.Tuple) \
                and region.target.elts and isinstance(region.target.elts[0], ast.Name):
            counters.add(region.target.elts[0].id)
        counters |= {n.target.id for n in ix.stmts_nodes(region.body) if isinstance(n, ast.AugAssign)
                     and isinstance(n.target, ast.Name) and isinstance(n.value, ast.Constant) and n.value.value == 1}
        if not counters:
            continue
        for stmt in region.body:
            if not (isinstance(stmt, ast.If) and any(isinstance(b, ast.Break) for b in stmt.body)):
                continue
            n = _constant_stop(stmt.test, counters)
            if n is None:
                continue
            yield Hit("eval-loop-stops-early", stmt,
                      f"this evaluation loop breaks after a fixed number of batches (the test at line "
                      f"{stmt.lineno} against {n}): only those batches are scored, so the metric covers the first part "
                      f"of the evaluation data (a debugging limit left in, or a quick check that became the "
                      f"reported number)",
                      fix="remove the break (evaluate every batch), or make the limit an explicit setting and say in "
                          "the reported metric that it covers a subset")
            break


def _sampler_call(ix: FileIndex, loader: ast.Call) -> ast.Call | None:
    """The call that made the loader's ``sampler=`` (inline, or a name assigned once in the same scope)."""
    value = kwarg(loader, "sampler")
    if isinstance(value, ast.Call):
        return value
    if not isinstance(value, ast.Name):
        return None
    scope = ix.enclosing_function(loader) or ix.tree
    made = [n.value for n in ix.scope_nodes(scope) if isinstance(n, ast.Assign) and len(n.targets) == 1
            and isinstance(n.targets[0], ast.Name) and n.targets[0].id == value.id]
    return made[0] if len(made) == 1 and isinstance(made[0], ast.Call) else None


def _out_of_order(ix: FileIndex, call: ast.Call) -> str | None:
    """Why ``call`` (a DataLoader) yields its samples in another order than the data set's, or None where that
    is not proven: it shuffles, or its sampler is random or a DistributedSampler's shard (every
    ``num_replicas``-th sample, so the ranks' outputs gathered one after the other are interleaved)."""
    if is_const(_shuffle(call), True):
        return "this DataLoader shuffles"
    sampler = _sampler_call(ix, call)
    if sampler is None or has_star_kwargs(sampler):
        return None
    if ix.call_is(sampler, "RandomSampler", "SubsetRandomSampler"):
        return f"this DataLoader's {ix.qualname(sampler.func).rsplit('.', 1)[-1]} draws the samples in random order"
    if ix.call_is(sampler, "DistributedSampler"):
        replicas = kwarg(sampler, "num_replicas")
        if replicas is None or is_const(replicas, 1):
            return None  # the world size comes from the process group: one process keeps the file order
        return ("this DataLoader's DistributedSampler gives each rank every num_replicas-th sample (rank 0 gets "
                "0, W, 2W, ...), so the ranks' outputs gathered one rank after the other are interleaved")
    return None


@rule("eval-order-mismatch")
def eval_order_mismatch(ix: FileIndex) -> Iterator[Hit]:
    """Outputs collected batch by batch from a loader whose order is not the data set's (it shuffles, a random
    or distributed sampler), then compared with the data set's labels read in file order: each prediction is
    scored against another sample's label (issue 33, skorch#499, mmpretrain#173)."""
    for call in ix.calls:
        if not ix.call_is(call, "DataLoader"):
            continue
        why = _out_of_order(ix, call)
        if why is None:
            continue
        name = _loader_name(ix, call)
        where = _compared_in_file_order(ix, name, call) if name else None
        if where is not None:
            yield Hit("eval-order-mismatch", call,
                      f"{why}, and line {where.lineno} compares the outputs collected from it "
                      f"batch by batch with the data set's labels read in file order: the two orders differ, so "
                      f"the metric pairs each prediction with another sample's label",
                      fix="use shuffle=False for evaluation (or collect the labels from the same batches as the "
                      "outputs)" if why.endswith("shuffles") else "collect the labels from the same batches as the "
                      "outputs, or put each output back at its sample's index (the sampler's indices gathered with "
                      "them: ordered[index] = preds) before comparing")
