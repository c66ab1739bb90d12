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
``np.random.permutation(n)`` cut in two (``perm[:k]`` and ``perm[k:]``); no call in the file seeds anything (no
call whose name mentions a seed: ``manual_seed``, ``np.random.seed``, ``seed_everything``, ``set_seed``, a
project's own ``seed_all``); and the file runs as several processes (``init_process_group``,
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


def _seeded(ix: FileIndex) -> bool:
    for call in ix.calls:
        name = (dotted(call.func) or "").rsplit(".", 1)[-1].lower()
        if "seed" in name:
            return True
    return False


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
        elif last in ("randperm", "permutation") and len(call.args) == 1 and kwarg(call, "generator") is None \
                and (last == "randperm" or (dotted(call.func) or "").endswith("random.permutation")):
            assign = ix.parents.get(call)
            if isinstance(assign, ast.Assign) and len(assign.targets) == 1 and isinstance(assign.targets[0], ast.Name):
                within = ix.enclosing_function(call) or ix.tree
                if cut_in_two(ix, assign.targets[0].id, within) is not None and not _batches(assign.targets[0].id):
                    yield call


def _batches(name: str) -> bool:
    return bool(set(tokens(name)) & {"batch", "batches", "shuffle", "shuffled"})


def split_redrawn(ix: FileIndex) -> Iterator[Hit]:
    """Hits of ``disjoint-sets-overlap`` for a split drawn again by each process."""
    splits = list(_unseeded_splits(ix))
    if not splits or _seeded(ix):
        return
    found = _processes(ix)
    if found is None:
        return
    _, why = found
    for call in splits:
        yield Hit("disjoint-sets-overlap", call,
                  f"`{ix.segment(call)}` draws the training/validation split from a generator nothing in this file "
                  f"seeds, and the program runs again with it: {why}; the reported validation metrics then measure "
                  f"memorisation",
                  fix="draw the split from a seeded generator (random_split(..., generator=torch.Generator()"
                      ".manual_seed(0)), train_test_split(..., random_state=0)), or save the split's indices with "
                      "the checkpoint and load them on resume")
