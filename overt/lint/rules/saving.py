"""Rules about saving, loading and parallel wrappers (OVT6xx)."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from overt.lint.analysis.requirements import torch_floor_of
from overt.lint.analysis.values import values_for
from overt.lint.index import FileIndex, dotted, has_star_kwargs, is_const, kwarg
from overt.lint.rules.base import decided, Edit, Hit, rule


def _is(ix: FileIndex, call: ast.Call, qual: str) -> bool:
    q = ix.qualname(call.func) or ""
    return q == qual


def _safe_globals_context(ix: FileIndex, call: ast.Call) -> bool:
    """Inside ``with torch.serialization.safe_globals([...]):``: the load is meant to be weights-only."""
    for anc in ix.ancestors(call):
        if isinstance(anc, (ast.With, ast.AsyncWith)) and any(
                (dotted(i.context_expr.func if isinstance(i.context_expr, ast.Call) else i.context_expr) or "")
                .endswith("safe_globals") for i in anc.items):
            return True
    return False


def _type_error_fallback(ix: FileIndex, call: ast.Call) -> bool:
    """``try: torch.load(f, weights_only=True) except TypeError: torch.load(f)``: the fallback for a
    torch too old to know the argument, which unpickles nothing the first call would not."""
    for anc in ix.ancestors(call):
        if isinstance(anc, ast.ExceptHandler) and anc.type is not None and "TypeError" in ast.dump(anc.type):
            tried = ix.parents.get(anc)
            if isinstance(tried, ast.Try) and any(
                    isinstance(n, ast.Call) and (_is(ix, n, "torch.load") or _url_loader(ix, n))
                    and kwarg(n, "weights_only") is not None
                    for stmt in tried.body for n in ast.walk(stmt)):
                return True
        if isinstance(anc, (ast.FunctionDef, ast.AsyncFunctionDef)):
            break
    return False


def _loaded_as_state_dict(ix: FileIndex, call: ast.Call) -> bool:
    """Is what the load returns given whole to ``load_state_dict`` (directly, or through one name
    used for nothing else)?  Only then is it known to hold tensors alone, so weights_only=True
    cannot break the program."""
    parent = ix.parents.get(call)
    if isinstance(parent, ast.Call) and isinstance(parent.func, ast.Attribute) \
            and parent.func.attr == "load_state_dict" and parent.args and parent.args[0] is call:
        return True
    if not (isinstance(parent, ast.Assign) and len(parent.targets) == 1 and isinstance(parent.targets[0], ast.Name)):
        return False
    name = parent.targets[0].id
    scope = ix.enclosing_function(call) or ix.tree
    uses = [n for n in ix.scope_nodes(scope) if isinstance(n, ast.Name) and n.id == name
            and isinstance(n.ctx, ast.Load)]
    if not uses:
        return False
    for use in uses:
        holder = ix.parents.get(use)
        if not (isinstance(holder, ast.Call) and isinstance(holder.func, ast.Attribute)
                and holder.func.attr == "load_state_dict" and holder.args and holder.args[0] is use):
            return False
    return True


def _reads_torch_version(ix: FileIndex, test: ast.AST, scope: ast.AST) -> bool:
    """Does ``test`` read ``torch.__version__``, directly or through a name the function (or module) binds
    from an expression that reads it (``v = torch.__version__`` ... ``if v < "2.6":``)?"""
    def reads(node: ast.AST) -> bool:
        return any(isinstance(n, ast.Attribute) and n.attr == "__version__"
                   and (ix.qualname(n.value) or dotted(n.value) or "").split(".")[0] == "torch" for n in ast.walk(node))
    if reads(test):
        return True
    names = {n.id for n in ast.walk(test) if isinstance(n, ast.Name)}
    return bool(names) and any(
        isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id in names for t in node.targets)
        and reads(node.value) for where in {id(scope): scope, id(ix.tree): ix.tree}.values()
        for node in ix.scope_nodes(where))


def _version_arm_decided(ix: FileIndex, call: ast.Call) -> bool:
    """``if <torch's version> < 2.6: torch.load(f)`` ``else: torch.load(f, weights_only=False)``: the arm
    without the argument loads the same file as the arm that writes ``weights_only=False`` out, on a torch
    whose default is that same False.  The author's choice is recorded in the other arm, so this arm is that
    decision spelled for older torch, not a load nobody decided on.  Only an ``if`` whose test reads
    torch's version counts (an ``if trusted:`` / ``else:`` pair is two different loads), and only a load of
    the same first argument."""
    if not call.args:
        return False
    target = ast.dump(call.args[0])
    scope = ix.enclosing_function(call) or ix.tree
    child: ast.AST = call
    for anc in ix.ancestors(call):
        if isinstance(anc, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            break
        if isinstance(anc, ast.If) and _reads_torch_version(ix, anc.test, scope):
            other = anc.orelse if child in anc.body else anc.body if child in anc.orelse else []
            for stmt in other:
                for n in ast.walk(stmt):
                    if isinstance(n, ast.Call) and (_is(ix, n, "torch.load") or _url_loader(ix, n)) and n.args \
                            and is_const(kwarg(n, "weights_only"), False) and ast.dump(n.args[0]) == target:
                        return True
        child = anc
    return False


#: loaders whose ``weights_only`` defaults to False in every torch release (read in torch 2.13: torch.load's
#: default is None, which means True from 2.6 on; these two keep False)
URL_LOADERS = ("torch.hub.load_state_dict_from_url", "torch.utils.model_zoo.load_url")


def _url_loader(ix: FileIndex, call: ast.Call) -> str | None:
    """``torch.hub.load_state_dict_from_url`` / ``model_zoo.load_url`` (through any import, also torchvision's
    re-export ``torchvision.models.utils.load_state_dict_from_url``): the name, or None."""
    q = ix.qualname(call.func) or ""
    if q in URL_LOADERS:
        return q
    last = q.rsplit(".", 1)[-1]
    if last in ("load_state_dict_from_url", "load_url") and q.split(".")[0] in ("torch", "torchvision"):
        return q
    return None


def _url_load_hit(ix: FileIndex, call: ast.Call, name: str, allowlisted: bool) -> Hit | None:
    flag = kwarg(call, "weights_only")
    if flag is not None and not is_const(flag, False):
        return None
    if ix.is_test_file or allowlisted or _safe_globals_context(ix, call) or _type_error_fallback(ix, call):
        return None
    short = name.rsplit(".", 1)[-1]
    msg = (f"{short}(...) downloads a file and unpickles it with weights_only=False, its default in every torch "
           f"release (torch 2.13 included, unlike torch.load), so a file swapped at that address or in the local "
           f"cache can run code")
    fix = f"pass weights_only=True to {short} (state_dicts load as before)"
    hit = Hit("unsafe-load", call, msg, fix=fix)
    return decided(hit, "weights_only=False") if flag is not None else hit


@rule("unsafe-load", fixable=True)
def unsafe_load(ix: FileIndex) -> Iterator[Hit]:
    """``torch.load`` that unpickles arbitrary objects: ``weights_only=False``, or no argument in a
    project that allows torch < 2.6 (from 2.6 on, weights-only is the default).  Loads inside
    ``safe_globals``, after ``add_safe_globals``, in an ``except TypeError`` fallback, or in tests (which read
    the files they made) are safe or deliberate and left alone; an explicit ``weights_only=False`` is
    reported at info level (the author's recorded choice).  ``--fix`` adds
    ``weights_only=True`` only where the result goes whole into ``load_state_dict``."""
    floor: tuple[int, int] | None | bool = False  # not read yet
    allowlisted = any(isinstance(c.func, (ast.Attribute, ast.Name)) and (dotted(c.func) or "").endswith(
        "add_safe_globals") for c in ix.calls)
    for call in ix.calls:
        if has_star_kwargs(call):
            continue
        url_loader = _url_loader(ix, call)
        if url_loader is not None:
            hit = _url_load_hit(ix, call, url_loader, allowlisted)
            if hit is not None:
                yield hit
            continue
        if not _is(ix, call, "torch.load"):
            continue
        flag = kwarg(call, "weights_only")
        if flag is not None and not is_const(flag, False):
            continue
        if flag is None:
            if floor is False:
                floor = torch_floor_of(ix.path)
            if floor is not None and floor >= (2, 6):
                continue  # weights_only=True is this project's default
            if allowlisted or _safe_globals_context(ix, call) or _type_error_fallback(ix, call):
                continue
        if ix.is_test_file:
            continue  # tests read the files they (or their fixtures) made
        edits, note = [], ""
        if flag is None and _loaded_as_state_dict(ix, call):
            edits = _weights_only_edit(ix, call)
            note = "torch.load(...) -> torch.load(..., weights_only=True)" if edits else ""
        if flag is not None:
            msg = ("torch.load(..., weights_only=False) unpickles arbitrary objects, so loading a file from "
                   "elsewhere can run code hidden in it")
            fix = ("drop weights_only=False where the file holds tensors only; else load only files you made, "
                   "or allow-list the classes with torch.serialization.add_safe_globals")
        else:
            allows = "this project does not require torch >= 2.6" if floor is None else \
                f"this project allows torch {floor[0]}.{floor[1]}"
            msg = (f"torch.load without weights_only=True unpickles arbitrary objects on torch < 2.6 "
                   f"({allows}), so loading a checkpoint from elsewhere can run code hidden in it")
            fix = ("pass weights_only=True (state_dicts and tensors load as before), or require torch>=2.6, "
                   "where it is the default")
        hit = Hit("unsafe-load", call, msg, fix=fix, edits=edits, fix_note=note)
        if flag is None and _version_arm_decided(ix, call):
            hit.edits, hit.fix_note = [], ""
            yield decided(hit, "weights_only=False, in the other arm of this torch-version branch,")
            continue
        yield decided(hit, "weights_only=False") if flag is not None else hit


def _weights_only_edit(ix: FileIndex, call: ast.Call) -> list[Edit]:
    """Insert ``weights_only=True`` as the last argument of ``call`` (columns in UTF-8 bytes)."""
    lines = ix.source_lines
    if call.end_lineno > len(lines):
        return []
    line = lines[call.end_lineno - 1].encode("utf-8")
    close = call.end_col_offset - 1
    if line[close:close + 1] != b")":
        return []
    head = line[:close].rstrip()
    if head:  # `torch.load(a)`, `torch.load(a, )`, `torch.load(`+`)`
        sep = "" if head.endswith(b"(") else " " if head.endswith(b",") else ", "
        return [Edit(call.end_lineno, close, call.end_lineno, close, f"{sep}weights_only=True")]
    # `)` on a line of its own: the argument goes on a line before it
    prev = call.end_lineno - 1
    while prev > call.lineno and not lines[prev - 1].strip():
        prev -= 1
    text = lines[prev - 1]
    indent = text[:len(text) - len(text.lstrip())]
    if text.rstrip().endswith(","):
        return [Edit(call.end_lineno, 0, call.end_lineno, 0, f"{indent}weights_only=True,\n")]
    end = len(text.rstrip().encode("utf-8"))
    return [Edit(prev, end, prev, end, ", weights_only=True")]


def _not_a_module(ix: FileIndex, call: ast.Call, text: str) -> bool:
    """What is saved is known not to be a whole module (a dict literal, a ``.state_dict()``, a
    ``state_dict`` name), or it goes into an ``io.BytesIO`` (serialised on purpose, in memory)."""
    if "state_dict" in text or text.rsplit(".", 1)[-1] in ("sd", "ckpt", "checkpoint", "state"):
        return True
    for v in ix.assigns.get(text, ()):
        if isinstance(v, (ast.Dict, ast.DictComp)) or (
                isinstance(v, ast.Call) and isinstance(v.func, ast.Attribute) and v.func.attr == "state_dict"):
            return True
    obj = call.args[0]
    if isinstance(obj, ast.Name) and not values_for(ix).of(obj).is_module \
            and _used_as_mapping(ix, ix.enclosing_function(call) or ix.tree, obj.id):
        return True  # a dict read by string keys (a ModuleDict the value analysis knows stays reported)
    if len(call.args) > 1:
        dest = call.args[1]
        values = [dest, *ix.assigns.get(dotted(dest) or "", ())]
        if any(isinstance(v, ast.Call) and (dotted(v.func) or "").endswith("BytesIO") for v in values):
            return True
    return False


def _str_key(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, str)


def _used_as_mapping(ix: FileIndex, scope: ast.AST, name: str, depth: int = 2) -> bool:
    """Is ``name`` used as a mapping in ``scope``: read or written with a string key (``model["infos"]``,
    ``"state_dict" in model``, ``model.get("epoch")``), or handed to a function of this file whose
    parameter is (``describe(model)`` where ``describe`` reads ``model["task"]``)?  A module has no
    string keys, so such a value is a dict that happens to be named like a model."""
    for n in ix.scope_nodes(scope):
        if isinstance(n, ast.Subscript) and isinstance(n.value, ast.Name) and n.value.id == name \
                and _str_key(n.slice):
            return True
        if isinstance(n, ast.Compare) and _str_key(n.left) and len(n.ops) == 1 \
                and isinstance(n.ops[0], (ast.In, ast.NotIn)) and dotted(n.comparators[0]) == name:
            return True
        if not isinstance(n, ast.Call):
            continue
        if isinstance(n.func, ast.Attribute) and n.func.attr == "get" and dotted(n.func.value) == name \
                and n.args and _str_key(n.args[0]):
            return True
        if depth == 0:
            continue
        callee = ix.callee(n)
        if callee is None or callee is scope:
            continue
        params = [a.arg for a in callee.args.posonlyargs + callee.args.args]
        if isinstance(n.func, ast.Attribute) and params[:1] in (["self"], ["cls"]):
            params = params[1:]
        passed = [params[i] for i, a in enumerate(n.args) if i < len(params) and dotted(a) == name
                  and isinstance(a, ast.Name)]
        passed += [k.arg for k in n.keywords if k.arg and isinstance(k.value, ast.Name) and k.value.id == name]
        if any(_used_as_mapping(ix, callee, p, depth - 1) for p in passed):
            return True
    return False


#: calls that build a plain collection (never a module): builtins and ``collections``'
COLLECTION_CALLS = frozenset({"dict", "list", "tuple", "set", "collections.OrderedDict", "collections.defaultdict",
                              "collections.deque"})
COLLECTION_NODES = (ast.Dict, ast.DictComp, ast.List, ast.ListComp, ast.Tuple, ast.Set, ast.SetComp, ast.Constant)


def _built_as_collection(ix: FileIndex, obj: ast.AST) -> bool:
    """Is the saved local name bound, on every path to the save, to a plain collection built here (a
    literal, a comprehension, ``dict()``, ``OrderedDict()``...)?  Then it is no module, whatever its name
    says: a mapping filled with tensors is a state_dict."""
    if not isinstance(obj, ast.Name):
        return False
    defs = values_for(ix).defs(obj)
    if not defs:
        return False
    for d in defs:
        if d.kind != "assign" or d.index is not None:
            return False
        v = d.value
        if isinstance(v, COLLECTION_NODES):
            continue
        if isinstance(v, ast.Call) and (ix.qualname(v.func) or dotted(v.func) or "") in COLLECTION_CALLS:
            continue
        return False
    return True


REMOVERS = frozenset({"os.remove", "os.unlink"})


def _dest_of(call: ast.Call) -> ast.AST | None:
    if len(call.args) > 1:
        return call.args[1]
    return kwarg(call, "f")


def _removes(ix: FileIndex, stmt: ast.stmt, dest: str) -> bool:
    """Is ``stmt`` a bare call deleting the file ``dest`` (``os.remove(p)``, ``os.unlink(p)``,
    ``Path(p).unlink()``, ``p.unlink()``)?"""
    if not (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)):
        return False
    call = stmt.value
    if (ix.qualname(call.func) or "") in REMOVERS and call.args:
        return ast.dump(call.args[0]) == dest
    if isinstance(call.func, ast.Attribute) and call.func.attr == "unlink" and not call.args:
        target = call.func.value
        if isinstance(target, ast.Call) and (dotted(target.func) or "").rsplit(".", 1)[-1] == "Path" \
                and len(target.args) == 1:
            target = target.args[0]
        return ast.dump(target) == dest
    return False


def _rebinds(stmt: ast.stmt, names: set[str]) -> bool:
    return any(isinstance(n, ast.Name) and isinstance(n.ctx, (ast.Store, ast.Del)) and n.id in names
               for n in ast.walk(stmt))


def _file_deleted_after(ix: FileIndex, call: ast.Call) -> bool:
    """Is the file the save writes deleted by a later statement of the same block, the destination
    expression unchanged in between (a save-and-load round trip that cleans up after itself)?  Then no
    file outlives the function and no later refactor can break it."""
    dest = _dest_of(call)
    if dest is None or not isinstance(dest, (ast.Name, ast.Attribute, ast.BinOp, ast.Constant, ast.JoinedStr,
                                             ast.Call)):
        return False
    names = {n.id for n in ast.walk(dest) if isinstance(n, ast.Name)}
    stmt: ast.AST = call
    while not isinstance(stmt, ast.stmt):
        stmt = ix.parents.get(stmt)
        if stmt is None:
            return False
    holder = ix.parents.get(stmt)
    for field in ("body", "orelse", "finalbody"):
        block = getattr(holder, field, None)
        if isinstance(block, list) and stmt in block:
            break
    else:
        return False
    text = ast.dump(dest)
    for later in block[block.index(stmt) + 1:]:
        if _removes(ix, later, text):
            return True
        if _rebinds(later, names):
            return False
    return False


def _removed_finally(ix: FileIndex, call: ast.Call) -> bool:
    """Is the save inside a ``try:`` whose ``finally:`` deletes the file, or the folder it is written into
    (``fname = os.path.join(tmpdir, "m.pkl")`` ... ``finally: shutil.rmtree(tmpdir)``)?  Then no file outlives
    the round trip either, on any path."""
    dest = _dest_of(call)
    if dest is None:
        return False
    func = ix.enclosing_function(call)
    gone = {ast.dump(dest)}
    values = [dest]
    if isinstance(dest, ast.Name):
        values += [n.value for n in ix.scope_nodes(func if func is not None else ix.tree)
                   if isinstance(n, ast.Assign) and any(isinstance(t, ast.Name) and t.id == dest.id for t in n.targets)]
    for v in values:  # the folder of os.path.join(folder, name) / Path(folder) / name
        if isinstance(v, ast.Call) and (ix.qualname(v.func) or dotted(v.func) or "").endswith("path.join") and v.args:
            gone.add(ast.dump(v.args[0]))
        if isinstance(v, ast.BinOp) and isinstance(v.op, ast.Div):
            gone.add(ast.dump(v.left))
    above = {id(a) for a in ix.ancestors(call)}
    for anc in ix.ancestors(call):
        if anc is func:
            break
        if isinstance(anc, ast.Try) and any(id(s) in above for s in anc.body):  # in the try's body
            for stmt in anc.finalbody:
                if not (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call) and stmt.value.args):
                    continue
                q = ix.qualname(stmt.value.func) or ""
                if (q in REMOVERS or q == "shutil.rmtree") and ast.dump(stmt.value.args[0]) in gone:
                    return True
    return False


@rule("whole-model-save")
def whole_model_save(ix: FileIndex) -> Iterator[Hit]:
    for call in ix.calls:
        if not _is(ix, call, "torch.save") or not call.args:
            continue
        obj = call.args[0]
        text = dotted(obj)
        if text and isinstance(obj, (ast.Name, ast.Attribute)) and ix.is_model(text) \
                and not _not_a_module(ix, call, text) and not _built_as_collection(ix, obj) \
                and not _file_deleted_after(ix, call) and not _removed_finally(ix, call):
            yield Hit("whole-model-save", call,
                      f"torch.save({text}, ...) pickles the whole module, including its class's import path, so "
                      f"the file breaks when the code is refactored or renamed", fix=f"save {text}.state_dict() and "
                      f"load it into a freshly built model")


@rule("dataparallel")
def dataparallel(ix: FileIndex) -> Iterator[Hit]:
    for call in ix.calls:
        q = ix.qualname(call.func) or ""
        if q.rsplit(".", 1)[-1] == "DataParallel" and ix.is_torchish(q):
            yield Hit("dataparallel", call,
                      "nn.DataParallel runs one process that scatters every batch and gathers outputs on one GPU: "
                      "slower and unbalanced, and PyTorch recommends against it", fix="use "
                      "torch.nn.parallel.DistributedDataParallel (one process per GPU, torchrun)")
