"""Rules about multi-process training with torch.distributed (OVT506, OVT605)."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from overt.lint.analysis.units import loader_iter
from overt.lint.analysis.frameworks import framework_fix
from overt.lint.index import FileIndex, dotted
from overt.lint.rules.base import Hit, rule

#: words of a rank test: `dist.get_rank() == 0`, `fabric.is_global_zero`, `global_rank == 0`, `local_rank == 0`,
#: `accelerator.is_main_process`, `master_process`, `self.gpu_id == 0`, `is_rank_zero()`
_MAIN_WORDS = ("rank", "is_main", "main_process", "master", "is_leader", "is_primary", "global_zero",
               "local_zero", "gpu_id", "is_chief", "process_index")


@rule("unset-epoch")
def unset_epoch(ix: FileIndex) -> Iterator[Hit]:
    """A ``DistributedSampler`` in a file with an epoch loop (a loop around a loop) that never calls
    ``.set_epoch(...)`` on anything.  A file that only builds loaders is left alone: the epoch loop
    that must call ``set_epoch`` lives elsewhere."""
    if any(isinstance(c.func, ast.Attribute) and c.func.attr == "set_epoch" for c in ix.calls):
        return
    if not any(isinstance(n, (ast.For, ast.AsyncFor)) and n is not loop and loader_iter(ix, n.iter)
               for loop in ix.loops for n in ast.walk(loop)):
        return  # no epoch loop around a loop over a loader here (a collate function's loops do not count)
    for call in ix.calls:
        if ix.call_is(call, "DistributedSampler") and not _no_shuffle(call):
            yield Hit("unset-epoch", call,
                      "this DistributedSampler's set_epoch() is never called, so every epoch uses the first "
                      "epoch's shuffled order and the same split across ranks", fix="call sampler.set_epoch(epoch) "
                      "at the start of every epoch, before iterating the DataLoader")


def _no_shuffle(call: ast.Call) -> bool:
    return any(k.arg == "shuffle" and isinstance(k.value, ast.Constant) and k.value.value is False
               for k in call.keywords)


def _distributed(ix: FileIndex) -> bool:
    return any(ix.call_is(c, "init_process_group", "DistributedDataParallel", "fully_shard") for c in ix.calls)


def _mentions_rank(node: ast.AST, ix: FileIndex | None = None) -> bool:
    """Does a condition test the rank (directly, or through a flag assigned from a rank test:
    ``args.save_logs = args.logs and is_master(args)``)?"""
    for sub in ast.walk(node):
        name = sub.attr if isinstance(sub, ast.Attribute) else sub.id if isinstance(sub, ast.Name) else ""
        if any(word in name.lower() for word in _MAIN_WORDS):
            return True
        if ix is not None and isinstance(sub, (ast.Name, ast.Attribute)):
            for value in ix.assigns.get(dotted(sub) or "", ()):
                if _mentions_rank(value):
                    return True
    return False


def _exits(stmts: list[ast.stmt]) -> bool:
    return bool(stmts) and isinstance(stmts[-1], (ast.Return, ast.Continue, ast.Break, ast.Raise))


def _guarded(ix: FileIndex, call: ast.AST, depth: int = 2) -> bool:
    """Inside ``if <rank test>:`` (or its else), or after ``if <rank test>: return`` in the same function;
    or in a function every call of which (in this file) is guarded so (``if self.gpu_id == 0:
    self._save_snapshot(epoch)``), ``depth`` callers up.  A function this file never calls is judged by its
    call sites in the modules beside it that import it (``train.py``'s ``if H.rank == 0: save_model(...)``)."""
    node: ast.AST = call
    for parent in ix.ancestors(call):
        if isinstance(parent, (ast.If, ast.IfExp)) and node is not parent.test and _mentions_rank(parent.test, ix):
            return True
        if isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Module)):
            stmt = ix.statement_of(call)
            for before in ast.walk(parent):
                if (isinstance(before, ast.If) and before.lineno < stmt.lineno and _mentions_rank(before.test, ix)
                        and _exits(before.body) and ix.enclosing_function(before) is ix.enclosing_function(call)):
                    return True
            if isinstance(parent, ast.Module) or depth == 0:
                return False
            if any(_mentions_rank(d, ix) for d in parent.decorator_list):
                return True  # @rank_zero_only
            sites = [(ix, site) for site in ix.call_sites(parent)] or _call_sites_elsewhere(ix, parent)
            return bool(sites) and all(_guarded(there, site, depth - 1) for there, site in sites)
        node = parent
    return False


def _importers(ix: FileIndex) -> list[FileIndex]:
    """The project's modules beside this one (its folder, and the folders above it while they are packages)
    that import it: ``from train_helpers import save_model``, ``import train_helpers``, ``from .base import X``.
    Empty without a project index or a path."""
    if ix.project is None or ix.path is None:
        return []
    found = ix.cache.get("importers")
    if found is not None:
        return found
    me = ix.path.resolve()
    folders = [me.parent]
    while (folders[-1] / "__init__.py").is_file() and folders[-1].parent != folders[-1]:
        folders.append(folders[-1].parent)
    found = []
    for folder in folders:
        for path in sorted(folder.glob("*.py")):
            if path.resolve() == me:
                continue
            other = ix.project.index_for(path)
            if other is None:
                continue
            for module, level, name in other.imports.values():
                cands = [module] + ([f"{module}.{name}" if module else name] if name else [])
                if any((at := ix.project.module_path(other, c, level)) is not None and at.resolve() == me
                       for c in cands):
                    found.append(other)
                    break
    ix.cache["importers"] = found
    return found


def _call_sites_elsewhere(ix: FileIndex, func: ast.AST) -> list[tuple[FileIndex, ast.Call]]:
    """A function this file never calls is a helper other modules call: its call sites (by name) in the modules
    that import this one, each with its file's index.  Empty when none is found (the helper is then taken as
    run by every rank, as before)."""
    name = getattr(func, "name", None)
    out = []
    for other in _importers(ix):
        for call in other.calls:
            f = call.func
            called = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else None
            if called == name:
                out.append((other, call))
    return out


def _per_rank_path(ix: FileIndex, expr: ast.AST, depth: int = 3) -> bool:
    """Is the file name built from the rank (``f"model_rank{accelerator.process_index}.bin"``, through the names it
    is assigned from)?  Then each rank writes its own file: nothing is torn."""
    for sub in ast.walk(expr):
        if isinstance(sub, (ast.Name, ast.Attribute)):
            name = sub.attr if isinstance(sub, ast.Attribute) else sub.id
            if any(word in name.lower() for word in _MAIN_WORDS):
                return True
            if depth > 0 and any(_per_rank_path(ix, v, depth - 1) for v in ix.assigns.get(dotted(sub) or "", ())):
                return True
    return False


def _in_memory(ix: FileIndex, call: ast.Call) -> bool:
    """``torch.save(obj, buffer)`` into an ``io.BytesIO``: nothing is written to disk here."""
    if len(call.args) < 2:
        return False
    target = call.args[1]
    values = [target] + list(ix.assigns.get(dotted(target) or "", ()))
    return any(isinstance(v, ast.Call) and (dotted(v.func) or "").endswith("BytesIO") for v in values)


@rule("every-rank-saves")
def every_rank_saves(ix: FileIndex) -> Iterator[Hit]:
    """``torch.save`` in a multi-process script, not under a rank-0 condition (not in tests, which save into
    their own temporary directories)."""
    if not _distributed(ix) or ix.is_test_file:
        return
    for call in ix.calls:
        if ix.qualname(call.func) == "torch.save" and not _guarded(ix, call) \
                and not _in_memory(ix, call) and not (len(call.args) > 1 and _per_rank_path(ix, call.args[1])):
            target = dotted(call.args[1]) if len(call.args) > 1 else None
            func = ix.enclosing_function(call)
            open_sites = [c for c in ix.call_sites(func) if not _guarded(ix, c, 1)] if func is not None else []
            via = (f" in {func.name}(), called without a rank check at line "
                   f"{', '.join(str(c.lineno) for c in open_sites)}") if open_sites else ""
            yield Hit("every-rank-saves", call,
                      f"every process of this distributed run executes this torch.save"
                      f"{f' to {target}' if target else ''}{via}: all ranks write the same file at once (a torn file, "
                      f"wasted I/O)", fix=framework_fix(
                          ix, call, "save on one rank only: `if dist.get_rank() == 0: torch.save(...)`, then "
                          "dist.barrier() before anyone loads it",
                          lightning="save on one rank only: `if self.trainer.is_global_zero:` (or a @rank_zero_only "
                                    "helper), or let Lightning's ModelCheckpoint / trainer.save_checkpoint write it",
                          accelerate="save on one rank only: accelerator.wait_for_everyone(), then `if "
                                     "accelerator.is_main_process:` (or accelerator.save(...), which does both)",
                          fabric="save with fabric.save(path, state), which writes once for every strategy"))
