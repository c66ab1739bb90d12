"""modules-repeated-in-container (OVT425; issue 33, invariants of correct training): every entry of a
container of layers is its own module.

``nn.ModuleList([Block(d)] * n)`` builds ``Block(d)`` once and repeats the reference: the n entries are
one module, so they share one set of weights and give the same output (``parameters()`` lists the
shared tensors once, and the optimizer trains one layer where n were meant; linkedin/Liger-Kernel#269:
Medusa heads built as ``[ResBlock(h)] * k``).  The forms seen, each reaching ``nn.ModuleList`` or
``nn.Sequential`` (as an argument, a starred argument, or through a local name):

- a list or tuple literal multiplied by a count, holding a constructor call of a module with
  parameters (``[nn.Linear(h, h)] * k``, ``[res_block(h)] * k`` where ``res_block`` returns one) or a
  name bound to one in the same function (``[block] * k``);
- a comprehension whose element is such a name, not built per iteration (``[block for _ in range(k)]``).

Parameterless modules (``[nn.ReLU()] * k``) share nothing that trains: not reported.  Sharing can be
meant (ALBERT-style or universal transformers reuse one layer): the rule stays silent when the
function around the form, or its class, speaks of it (share, tie, reuse, universal, recurrent, ALBERT),
in names or comments.  :func:`repeated_containers` is also what the runtime guard
(:mod:`overt.guards.repeats`) reads to name the line.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from dataclasses import dataclass

from overt.lint.index import FileIndex, dotted
from overt.lint.rules.base import Hit, rule

#: words in the code around a repetition that say the sharing is meant
INTENT = re.compile(r"shar|\btie|\btied|tying|reuse|re-use|univers|recurr|albert|same[ _]weights?|weight[ _]sharing",
                    re.IGNORECASE)
_CONTAINERS = ("ModuleList", "Sequential")
#: torch.nn classes without parameters (anything else of torch.nn with a capital letter is taken to have some)
_PARAMETERLESS = re.compile(
    r"(ReLU|ReLU6|GELU|SiLU|Mish|Tanh|Sigmoid|Hardtanh|Hardswish|Hardsigmoid|LeakyReLU|ELU|CELU|SELU|GLU|Softmax|"
    r"Softmax2d|LogSoftmax|Softmin|Softplus|Softsign|Tanhshrink|Threshold|LogSigmoid|Dropout\w*|AlphaDropout|"
    r"Identity|Flatten|Unflatten|\w*Pool\w*|Upsample\w*|PixelShuffle|PixelUnshuffle|\w*Pad\w*|ChannelShuffle|"
    r"CosineSimilarity|PairwiseDistance|Fold|Unfold|InstanceNorm\w*|LocalResponseNorm|CrossMapLRN2d)$")


@dataclass
class Repeated:
    """One repetition of a module reference that reaches a container."""

    node: ast.AST  # the multiplied literal or the comprehension
    container: str  # "ModuleList" or "Sequential"
    built: str  # the source of what is repeated
    target: str | None  # the attribute or name the container is assigned to (``self.heads`` -> "heads")


def _container_of(ix: FileIndex, call: ast.AST) -> str | None:
    if not isinstance(call, ast.Call):
        return None
    q = ix.qualname(call.func) or dotted(call.func) or ""
    last = q.rsplit(".", 1)[-1]
    if last in _CONTAINERS and (ix.is_torchish(q) or q in _CONTAINERS or q.startswith("nn.")):
        return last
    return None


def _parameterised(ix: FileIndex, node: ast.AST | None, depth: int = 0) -> bool:
    """Does ``node`` build a module with parameters (a torch.nn layer, a module class of this file whose
    body builds one, a function of this file that returns one)?"""
    if depth > 4 or not isinstance(node, ast.Call):
        return False
    container = _container_of(ix, node)
    if container:
        args = [a.value if isinstance(a, ast.Starred) else a for a in node.args]
        return any(_parameterised(ix, x, depth + 1) for a in args for x in ast.walk(a))
    q = ix.qualname(node.func) or ""
    last = q.rsplit(".", 1)[-1]
    if last == "Parameter":
        return True
    if last in ix.module_classes and last in ix.classes:
        key = ("repeats-param", last)
        if key not in ix.cache:
            ix.cache[key] = False  # a class that builds itself
            ix.cache[key] = any(_parameterised(ix, x, depth + 1) for x in ast.walk(ix.classes[last])
                                if isinstance(x, ast.Call))
        return bool(ix.cache[key])
    if ix.is_torchish(q) and (".nn." in f".{q}" or q.startswith("nn.")) and last[:1].isupper():
        return not (_PARAMETERLESS.match(last) or last.endswith("Loss") or last in ("ModuleDict", "ParameterDict"))
    func = ix.callee(node) if isinstance(node.func, ast.Name) else None
    if func is not None:
        return any(isinstance(r, ast.Return) and _parameterised(ix, r.value, depth + 1) for r in ast.walk(func))
    return False


def _bound_to_module(ix: FileIndex, name: ast.AST, scope: ast.AST) -> bool:
    """``name`` (a Name or ``self.x``) is assigned, in ``scope``, a call that builds a module with parameters."""
    text = dotted(name)
    if text is None:
        return False
    for n in ix.scope_nodes(scope):
        if isinstance(n, ast.Assign) and any(dotted(t) == text for t in n.targets):
            if _parameterised(ix, n.value):
                return True
    return False


def _repeated_item(ix: FileIndex, node: ast.AST, scope: ast.AST) -> ast.AST | None:
    """What ``node`` repeats, when it is one of the forms (see the module's docstring)."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
        for seq, count in ((node.left, node.right), (node.right, node.left)):
            if isinstance(seq, (ast.List, ast.Tuple)) and seq.elts and not isinstance(count, (ast.List, ast.Tuple)):
                if isinstance(count, ast.Constant) and not (isinstance(count.value, int) and count.value > 1):
                    continue
                for e in seq.elts:
                    if _parameterised(ix, e) or (isinstance(e, (ast.Name, ast.Attribute))
                                                 and _bound_to_module(ix, e, scope)):
                        return e
    if isinstance(node, (ast.ListComp, ast.GeneratorExp)) and isinstance(node.elt, (ast.Name, ast.Attribute)):
        bound = {n.id for g in node.generators for n in ast.walk(g.target) if isinstance(n, ast.Name)}
        if not (names := {n.id for n in ast.walk(node.elt) if isinstance(n, ast.Name)}) & bound and names \
                and _bound_to_module(ix, node.elt, scope):
            return node.elt
    return None


def _target(ix: FileIndex, call: ast.Call) -> str | None:
    stmt = ix.statement_of(call)
    if isinstance(stmt, (ast.Assign, ast.AnnAssign)) and stmt.value is call:
        t = stmt.targets[0] if isinstance(stmt, ast.Assign) else stmt.target
        text = dotted(t)
        return text.rsplit(".", 1)[-1] if text else None
    return None


def _meant(ix: FileIndex, node: ast.AST) -> bool:
    """The code around ``node`` says the sharing is meant: its function, or else its statement, and the class
    around it (names, comments and strings read as text)."""
    scope = ix.enclosing_function(node) or ix.statement_of(node)
    texts = [ix.segment(scope)]
    lo = max(0, getattr(scope, "lineno", 1) - 3)
    texts.append("\n".join(ix.source_lines[lo:getattr(scope, "lineno", 1)]))  # comments just above
    cls = ix.enclosing_class(node)
    if cls is not None:
        texts.append(cls.name)
        doc = ast.get_docstring(cls)
        if doc:
            texts.append(doc)
    return any(INTENT.search(t) for t in texts if t)


def repeated_containers(ix: FileIndex) -> Iterator[Repeated]:
    """Every repetition of one module reference that reaches an ``nn.ModuleList``/``nn.Sequential`` and that the
    code around it does not call meant."""
    for call in ix.calls:
        container = _container_of(ix, call)
        if container is None or not call.args:
            continue
        arg = call.args[0] if container == "ModuleList" else None
        args = [arg] if arg is not None else [a for a in call.args]
        scope = ix.enclosing_function(call) or ix.tree
        for a in args:
            a = a.value if isinstance(a, ast.Starred) else a
            sources = [a.body, a.orelse] if isinstance(a, ast.IfExp) else [a]
            if isinstance(a, ast.Name):  # layers = [Block()] * n; nn.ModuleList(layers)
                sources = [n.value for n in ix.scope_nodes(scope) if isinstance(n, ast.Assign)
                           and any(isinstance(t, ast.Name) and t.id == a.id for t in n.targets)
                           and n.lineno <= call.lineno]
                sources = sources[-1:]
            for src in sources:
                item = _repeated_item(ix, src, scope)
                if item is None or _meant(ix, src):
                    continue
                yield Repeated(src, container, ix.segment(item), _target(ix, call))


@rule("modules-repeated-in-container")
def modules_repeated_in_container(ix: FileIndex) -> Iterator[Hit]:
    for rep in repeated_containers(ix):
        what = rep.built if len(rep.built) <= 40 else rep.built[:37] + "..."
        form = "a comprehension repeats the name" if isinstance(rep.node, (ast.ListComp, ast.GeneratorExp)) \
            else "multiplying a list repeats the reference"
        yield Hit("modules-repeated-in-container", rep.node,
                  f"nn.{rep.container} is given one module object, {what}, several times ({form}, not the "
                  f"constructor): every entry shares one set of weights and computes the same function, and "
                  f"parameters() lists them once, so the optimizer trains one layer where several were meant",
                  fix=f"build one per entry: nn.{rep.container}({'' if rep.container == 'ModuleList' else '*'}"
                  f"[{_ctor(rep.built)} for _ in range(n)]) "
                  "(copy.deepcopy(module) for copies of one prototype); if the sharing is meant, say so in a comment "
                  "(weight sharing) or index one module in a loop")


def _ctor(built: str) -> str:
    return built if "(" in built and len(built) <= 40 else "Block(...)"
