"""A train/validation split drawn afresh by every process that must share it (part of OVT542
``disjoint-sets-overlap``, issue 33).

A split is one draw: every process that trains or evaluates on it must see the same one.  A program that runs
as several processes (DDP ranks, an ``Accelerator``, a Lightning ``ddp`` strategy) or that resumes from a
checkpoint in a new process, and draws its split from a generator nobody seeded, draws a different split in
each process: one rank's validation samples are other ranks' training samples, and a resumed run validates on
samples it trained on before the checkpoint (talmolab/sleap-nn#600: "the train/val split is regenerated (not
restored from the checkpoint) ... images used for training could end up in validation on resume").

The detector proves each part from the file: a split drawn from the global generators -- ``random_split`` without
``generator=``, ``train_test_split`` without ``random_state=``, ``torch.randperm(n)`` without ``generator=`` or
``np.random.permutation(n)`` cut in two (``perm[:k]`` and ``perm[k:]``), ``generator=`` absent or provably
``None`` (``G(seed) if seed is not None else None`` called only with a ``None`` constant); no call in the file
seeds the global generators alike in every process (a call whose name mentions a seed -- ``manual_seed``,
``np.random.seed``, ``seed_everything``, ``set_seed``, a project's ``seed_all`` -- not on a generator object,
and not per process: its argument names a rank or process id, or is the variable of a loop that also holds the
split, each pass a new process with its own seed); and the file runs as several processes (``init_process_group``,
``DistributedDataParallel``, ``DistributedSampler``, ``Accelerator()``, ``strategy="ddp..."``) or resumes (an
optimizer's ``load_state_dict``, ``ckpt_path=``/``resume_from_checkpoint=`` given to ``fit``, ``train`` or
``Trainer``; ``trainer.test(ckpt_path="best")`` only evaluates a checkpoint).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from overt.lint.index import FileIndex, dotted, kwarg, tokens
from overt.lint.rules.base import Hit
from overt.lint.rules.windowsplit import cut_in_two

_MULTI = frozenset({"init_process_group", "DistributedDataParallel", "DistributedSampler", "Accelerator"})
_RESUME_KWARGS = frozenset({"ckpt_path", "resume_from_checkpoint"})
#: calls that go on training from a checkpoint (``trainer.test(ckpt_path="best")`` only evaluates it)
_RESUMES = frozenset({"fit", "train", "Trainer"})


_RANK_WORDS = frozenset({"rank", "process", "proc", "pid", "worker"})


def _seed_calls(ix: FileIndex) -> list[ast.Call]:
    """Calls that seed a global generator (``torch.manual_seed``, ``np.random.seed``, ``seed_everything``, a
    project's ``set_seed``), not a generator object's own ``manual_seed`` (``torch.Generator().manual_seed(s)``)."""
    out = []
    for call in ix.calls:
        name = (dotted(call.func) or "").rsplit(".", 1)[-1].lower()
        if "seed" not in name and not (isinstance(call.func, ast.Attribute) and "seed" in call.func.attr.lower()):
            continue
        if isinstance(call.func, ast.Attribute):
            owner = call.func.value
            if isinstance(owner, ast.Call) or (isinstance(owner, ast.Name) and any(
                    isinstance(v, ast.Call) and (dotted(v.func) or "").rsplit(".", 1)[-1] in (
                        "Generator", "default_rng", "RandomState", "Random") for v in ix.assigns.get(owner.id, []))):
                continue  # a generator object seeded: the global ones are not
        out.append(call)
    return out


def _per_process(ix: FileIndex, seed: ast.Call, sites: list[ast.AST]) -> bool:
    """A global seed that differs from process to process: it refers to a rank or process id, or to the variable
    of a loop that holds both the seeding and a split site (each pass a "process" with its own seed)."""
    names = {n.id for a in list(seed.args) + [k.value for k in seed.keywords] for n in ast.walk(a)
             if isinstance(n, ast.Name)}
    if any(set(tokens(n)) & _RANK_WORDS for n in names):
        return True
    for loop in ix.enclosing_loops(seed):
        if isinstance(loop, ast.For) and {n.id for n in ast.walk(loop.target) if isinstance(n, ast.Name)} & names \
                and any(loop in ix.enclosing_loops(site) for site in sites):
            return True
    return False


def _agreed(ix: FileIndex, split: ast.Call) -> ast.Call | None:
    """Where every process seeds the global generators alike before ``split`` (a seed call that is not per
    process), or None when nothing does: each process draws its own split."""
    func = ix.enclosing_function(split)
    sites: list[ast.AST] = [split] + (ix.call_sites(func) if func is not None else [])
    for seed in _seed_calls(ix):
        if not _per_process(ix, seed, sites):
            return seed
    return None


def _processes(ix: FileIndex) -> tuple[ast.AST, str] | None:
    """Where the file shows that it runs as several processes or resumes, and which."""
    for call in ix.calls:
        last = (dotted(call.func) or "").rsplit(".", 1)[-1]
        if last in _MULTI:
            return call, f"`{last}` (line {call.lineno}): each process draws its own split, so one process's " \
                         "validation samples are another's training samples"
        strategy = kwarg(call, "strategy")
        if isinstance(strategy, ast.Constant) and isinstance(strategy.value, str) and "ddp" in strategy.value:
            return call, f"`strategy={strategy.value!r}` (line {call.lineno}): each process draws its own split, " \
                         "so one process's validation samples are another's training samples"
    for call in ix.calls:
        last = (dotted(call.func) or "").rsplit(".", 1)[-1]
        if last in _RESUMES and any(k.arg in _RESUME_KWARGS and not (isinstance(k.value, ast.Constant)
                                                                     and k.value.value is None)
                                    for k in call.keywords):
            return call, f"a resume (line {call.lineno}): the resumed process draws a new split, so it validates " \
                         "on samples it trained on before the checkpoint"
        if isinstance(call.func, ast.Attribute) and call.func.attr == "load_state_dict" \
                and ix.is_optimizer(dotted(call.func.value)):
            return call, f"a resume (`{ix.segment(call.func)}`, line {call.lineno}): the resumed process draws a " \
                         "new split, so it validates on samples it trained on before the checkpoint"
    return None


def _unseeded_splits(ix: FileIndex) -> Iterator[ast.Call]:
    for call in ix.calls:
        last = (ix.qualname(call.func) or dotted(call.func) or "").rsplit(".", 1)[-1]
        if last == "random_split" and len(call.args) < 3 and kwarg(call, "generator") is None:
            yield call
        elif last == "train_test_split" and kwarg(call, "random_state") is None and kwarg(call, "shuffle") is None:
            yield call
        elif last in ("randperm", "permutation") and len(call.args) == 1 and _no_generator(ix, call) \
                and (last == "randperm" or (dotted(call.func) or "").endswith("random.permutation")):
            assign = ix.parents.get(call)
            if isinstance(assign, ast.Assign) and len(assign.targets) == 1 and isinstance(assign.targets[0], ast.Name):
                within = ix.enclosing_function(call) or ix.tree
                if cut_in_two(ix, assign.targets[0].id, within) is not None and not _batches(assign.targets[0].id):
                    yield call


def _no_generator(ix: FileIndex, call: ast.Call) -> bool:
    """``generator=`` absent or provably None: a name bound once to ``G(seed) if seed is not None else None``
    where every call of the function passes ``None`` for ``seed`` (a literal, or a module constant bound once)."""
    gen = kwarg(call, "generator")
    if gen is None or (isinstance(gen, ast.Constant) and gen.value is None):
        return True
    func = ix.enclosing_function(call)
    if not isinstance(gen, ast.Name) or func is None:
        return False
    values = [v for v in ix.assigns.get(gen.id, []) if ix.enclosing_function(v) is func]
    if len(values) != 1 or not isinstance(values[0], ast.IfExp):
        return False
    test, body, orelse = values[0].test, values[0].body, values[0].orelse
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.left, ast.Name)
            and isinstance(test.comparators[0], ast.Constant) and test.comparators[0].value is None):
        return False
    none_branch = orelse if isinstance(test.ops[0], ast.IsNot) else body if isinstance(test.ops[0], ast.Is) else None
    if not (isinstance(none_branch, ast.Constant) and none_branch.value is None):
        return False
    params = [a.arg for a in func.args.args]
    if test.left.id not in params:
        return False
    where = params.index(test.left.id)
    sites = ix.call_sites(func)
    return bool(sites) and all(_is_none(ix, site.args[where]) if len(site.args) > where else False
                               for site in sites)


def _is_none(ix: FileIndex, node: ast.AST) -> bool:
    if isinstance(node, ast.Constant):
        return node.value is None
    if isinstance(node, ast.Name):
        values = ix.assigns.get(node.id, [])
        return len(values) == 1 and isinstance(values[0], ast.Constant) and values[0].value is None \
            and ix.enclosing_function(values[0]) is None
    return False


def _batches(name: str) -> bool:
    return bool(set(tokens(name)) & {"batch", "batches", "shuffle", "shuffled"})


def split_redrawn(ix: FileIndex) -> Iterator[Hit]:
    """Hits of ``disjoint-sets-overlap`` for a split drawn again by each process."""
    splits = list(_unseeded_splits(ix))
    if not splits:
        return
    found = _processes(ix)
    if found is None:
        return
    _, why = found
    for call in splits:
        if _agreed(ix, call) is not None:
            continue
        seeds = _seed_calls(ix)
        source = (f"the global generator, seeded per process (`{ix.segment(seeds[0])}`, line {seeds[0].lineno})"
                  if seeds else "a generator nothing in this file seeds")
        yield Hit("disjoint-sets-overlap", call,
                  f"`{ix.segment(call)}` draws the training/validation split from {source}, and the program runs "
                  f"again with it: {why}; the reported validation metrics then measure memorisation",
                  fix="draw the split from a seeded generator (random_split(..., generator=torch.Generator()"
                      ".manual_seed(0)), train_test_split(..., random_state=0)), or save the split's indices with "
                      "the checkpoint and load them on resume")
