"""A derivative taken without ``create_graph=True`` used as a term of a loss that is backwarded (OVT345
``derivative-without-graph``, issue 33).

``torch.autograd.grad(outputs, inputs)`` (and ``torch.autograd.functional.jacobian``/``hessian``/``vjp``/
``jvp``/``hvp``/``vhp``) returns results with no graph unless ``create_graph=True``.  A loss term made of
such a derivative -- a physics-informed residual ``u'(x) - f(x)``, a gradient penalty
``(||grad D(x)|| - 1)^2`` (WGAN-GP, R1), an input-gradient or Jacobian regulariser -- is then a constant:
it adds a number to the loss and nothing to its gradient, the loss still decreases from its other terms
and nothing fails (pytorch#31984; w152).

Lint classifies each expression of a function as *derivative* (graph-less and made from such a result),
*constant* (numbers, tensors created by torch from numbers, ``.detach()``/``.item()`` results), or
*other* (a model's output, a parameter, anything lint cannot see: it may carry a graph).  Operators and
torch functions combine their operands: any *other* operand makes the result *other*, except that a
scale factor (a number, or a name that reads as a hyper-parameter: ``lam``, ``args.gp_weight``) keeps a
*derivative* one.  The loss of a ``backward()`` call (``loss.backward()``, ``scaler.scale(loss)``,
``accelerator.backward(loss)``, ``self.manual_backward(loss)``) is split into its additive terms
(through names, ``loss +=`` and scale factors); a term that is a *derivative* is reported at the call
that made it.  Helper functions of the file are followed (``gp = gradient_penalty(D, real, fake)``).

Quiet when ``create_graph`` is anything but a missing argument or a literal ``False`` (a variable:
first-order MAML decides per call), when the derivative is combined with something that may carry a
graph (``(fisher * (p - p0) ** 2).sum()``: a constant weight; ``mse(model_grad, true_grad)``: a target),
and when it never reaches a backwarded loss (logged, used to update parameters by hand).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator

from overt.lint.analysis.values import values_for
from overt.lint.index import FileIndex, FuncNode, dotted, is_const, kwarg
from overt.lint.rules.base import Hit, rule

SLUG = "derivative-without-graph"
DERIV, CONST, OTHER = "derivative", "constant", "other"
FUNCTIONAL = ("jacobian", "hessian", "vjp", "jvp", "hvp", "vhp")
#: torch functions that make a tensor from numbers (no graph)
CREATORS = frozenset((
    "tensor", "as_tensor", "zeros", "ones", "full", "rand", "randn", "randint", "empty", "arange", "linspace",
    "logspace", "zeros_like", "ones_like", "full_like", "rand_like", "randn_like", "empty_like", "eye",
    "from_numpy"))
#: methods that leave no graph behind
DETACHING = frozenset(("detach", "item", "tolist", "numpy", "cpu_numpy"))
COEF_TOKENS = frozenset((
    "lam", "lamb", "lmbda", "lambda", "lambd", "weight", "alpha", "beta", "gamma", "coef", "coeff", "scale",
    "factor", "mu", "nu", "eps", "w", "wt", "rate", "ratio", "strength"))
CONFIG_HEADS = frozenset(("args", "cfg", "config", "opt", "opts", "hparams", "hp", "params", "FLAGS", "flags",
                          "conf", "options", "settings"))
BACKWARD_CALLS = ("backward", "manual_backward")
BACKWARD_OWNERS = ("accelerator", "fabric", "self", "engine")  # accelerator.backward(loss)
MAX_DEPTH = 12


def _grad_call(ix: FileIndex, call: ast.Call) -> bool:
    """``torch.autograd.grad``/``autograd.functional.X`` made without a graph (create_graph missing or False)."""
    return _derivative_api(ix, call) and _graphless(call)


def _derivative_api(ix: FileIndex, call: ast.Call) -> bool:
    q = ix.qualname(call.func) or ""
    parts = q.split(".")
    if parts[-1] == "grad":
        if not (len(parts) >= 2 and parts[-2] == "autograd" or q in ("torch.autograd.grad",)):
            return False
    elif parts[-1] in FUNCTIONAL:
        if not (len(parts) >= 2 and parts[-2] == "functional" and "autograd" in parts):
            return False
    else:
        return False
    return ix.is_torchish(q)


def _graphless(call: ast.Call) -> bool:
    name = (dotted(call.func) or "").rsplit(".", 1)[-1]
    flag = kwarg(call, "create_graph")
    if flag is None:
        # grad(outputs, inputs, grad_outputs, retain_graph, create_graph); jacobian(func, inputs, create_graph)
        pos = 4 if name == "grad" else 2 if name in ("jacobian", "hessian") else 3
        if len(call.args) > pos:
            flag = call.args[pos]
    if flag is None:
        return not any(k.arg is None for k in call.keywords)  # **kwargs may carry create_graph
    return isinstance(flag, ast.Constant) and flag.value is False


def _outputs(call: ast.Call) -> ast.expr | None:
    """What a derivative call differentiates (``u.sum()`` of ``grad(u.sum(), x)``; for autograd.functional,
    the function)."""
    return kwarg(call, "outputs") or kwarg(call, "func") or (call.args[0] if call.args else None)


def _tokens(text: str) -> list[str]:
    return [t for t in re.split(r"[^a-z0-9]+|(?<=[a-z])(?=[0-9])", text.lower()) if t]


def _coefficient(node: ast.expr) -> bool:
    """A number, or a name that reads as a hyper-parameter (``lam``, ``lambda_gp``, ``args.gp_weight``)."""
    if isinstance(node, ast.Constant):
        return isinstance(node.value, (int, float)) and not isinstance(node.value, bool)
    if isinstance(node, ast.UnaryOp):
        return _coefficient(node.operand)
    if isinstance(node, ast.BinOp):  # lam / 2, 0.5 * args.gp_weight
        return _coefficient(node.left) and _coefficient(node.right)
    text = dotted(node)
    if text is None:
        return False
    parts = text.split(".")
    if parts[0] in CONFIG_HEADS or (parts[0] == "self" and len(parts) > 2 and parts[1] in CONFIG_HEADS):
        return True
    return any(t in COEF_TOKENS for t in _tokens(parts[-1]))


class _Flow:
    """Classifies expressions of one file (cached per node)."""

    def __init__(self, ix: FileIndex):
        self.ix = ix
        self.va = values_for(ix)
        self.memo: dict[int, str] = {}
        self.busy: set[int] = set()
        self.sources: dict[int, ast.Call] = {}  # node -> the grad call its derivative comes from

    def of(self, node: ast.AST | None, depth: int = 0) -> str:
        if node is None or depth > MAX_DEPTH:
            return OTHER
        key = id(node)
        if key in self.memo:
            return self.memo[key]
        if key in self.busy:
            return OTHER
        self.busy.add(key)
        try:
            kind = self._of(node, depth + 1)
        finally:
            self.busy.discard(key)
        self.memo[key] = kind
        return kind

    def source(self, node: ast.AST) -> ast.Call | None:
        return self.sources.get(id(node))

    def _combine(self, node: ast.AST, parts: list[ast.AST], depth: int) -> str:
        kinds = [self.of(p, depth) for p in parts]
        deriv = next((p for p, k in zip(parts, kinds) if k == DERIV), None)
        if deriv is None:
            return OTHER if OTHER in kinds else CONST
        src = self.sources.get(id(deriv))
        if OTHER in kinds:
            # a residual mixes a function with its own derivative (u_x + u, u * u_x): the part that may carry a
            # graph is made of what was differentiated; anything else (a weight, a target) may be meant constant
            target = _outputs(src) if src is not None else None
            related = self._roots(target) if target is not None else set()
            if not all(k != OTHER or self._partner(p, related, depth) for p, k in zip(parts, kinds)):
                return OTHER
        self.sources[id(node)] = src
        return DERIV

    def _roots(self, expr: ast.AST, depth: int = 0) -> set[str]:
        """The functions an expression is computed from, as a derivative call's target: ``u`` of ``u.sum()``
        (with its lineage), ``model`` of ``model(x).sum()``, ``self.teacher`` of ``self.teacher(x)``; never the
        inputs handed to a model (``x``)."""
        if depth > MAX_DEPTH:
            return set()
        if isinstance(expr, ast.Name):
            return self._lineage(expr, depth + 1)
        if isinstance(expr, ast.Subscript):
            return self._roots(expr.value, depth + 1)
        if isinstance(expr, ast.UnaryOp):
            return self._roots(expr.operand, depth + 1)
        if isinstance(expr, ast.BinOp):
            return self._roots(expr.left, depth + 1) | self._roots(expr.right, depth + 1)
        if isinstance(expr, ast.Call):
            f = expr.func
            if isinstance(f, ast.Name):
                return {f.id}
            text = dotted(f)
            if text and (self.ix.is_model(text) or text.startswith("self.") and text.count(".") == 1):
                return {text}
            if isinstance(f, ast.Attribute):
                out = self._roots(f.value, depth + 1)
                if (text or "").split(".")[0] in ("torch", "F"):  # torch.sum(u): the tensor is an argument
                    out = set().union(*(self._roots(a, depth + 1) for a in expr.args)) if expr.args else set()
                return out
        return set()

    def _lineage(self, name: ast.Name, depth: int = 0) -> set[str]:
        """``name`` and, where it holds a derivative (or a slice of one: ``u_x = du[:, :1]``), what that
        derivative differentiates, back to the function itself."""
        out = {name.id}
        if depth > MAX_DEPTH:
            return out
        defs = self.va.defs(name)
        if len(defs) != 1:
            return out
        d = next(iter(defs))
        value = d.value
        if d.kind != "assign" or value is None:
            return out
        if d.index is not None:
            if not isinstance(value, (ast.Tuple, ast.List)) or len(value.elts) <= d.index:
                return out
            value = value.elts[d.index]
        while isinstance(value, ast.Subscript):
            value = value.value
        if isinstance(value, ast.Name):
            return out | self._lineage(value, depth + 1)
        if isinstance(value, ast.Call) and _derivative_api(self.ix, value):
            target = _outputs(value)
            if target is not None:
                out |= self._roots(target, depth + 1)
        return out

    def _partner(self, node: ast.AST, related: set[str], depth: int) -> bool:
        """Is ``node`` built from what the derivative differentiates (and numbers, hyper-parameters)?"""
        names = [n for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)]
        funcs = {id(n.func) for n in ast.walk(node) if isinstance(n, ast.Call)}
        seen = False
        for n in names:
            if self._lineage(n) & related:
                seen = True
            elif n.id in self.ix.aliases or id(n) in funcs and n.id in ("sum", "abs", "float", "max", "min"):
                continue
            elif not _coefficient(n) and self.of(n, depth) == OTHER:
                return False
        return seen

    def _of(self, node: ast.AST, depth: int) -> str:
        if isinstance(node, ast.Constant):
            return CONST
        if isinstance(node, ast.Name):
            defs = self.va.defs(node)
            if not defs:
                return OTHER
            kinds = set()
            src = None
            for d in defs:
                if d.kind not in ("assign", "comp", "for") or d.value is None:
                    return OTHER
                k = self.of(d.value, depth)
                if d.kind in ("comp", "for") and k == CONST:
                    k = OTHER  # iterating over numbers or data: the items may be anything
                kinds.add(k)
                src = src or self.sources.get(id(d.value))
            if len(kinds) != 1:
                return OTHER
            kind = kinds.pop()
            if kind == DERIV:
                self.sources[id(node)] = src
            return kind
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self":
            value = self._attribute(node)
            kind = self.of(value, depth) if value is not None else OTHER
            if kind == DERIV:
                self.sources[id(node)] = self.sources.get(id(value))
            return kind
        if isinstance(node, ast.Attribute) and node.attr == "grad" and isinstance(node.ctx, ast.Load):
            filler = self._filled_by(node)
            if filler is None:
                return OTHER
            self.sources[id(node)] = filler
            return DERIV
        if isinstance(node, ast.Subscript):
            kind = self.of(node.value, depth)
            if kind == DERIV:
                self.sources[id(node)] = self.sources.get(id(node.value))
            return kind
        if isinstance(node, (ast.Tuple, ast.List)):
            return self._combine(node, list(node.elts), depth) if node.elts else CONST
        if isinstance(node, ast.UnaryOp):
            return self._combine(node, [node.operand], depth)
        if isinstance(node, ast.BinOp):
            if isinstance(node.op, (ast.Mult, ast.Div, ast.Pow)):
                for a, b in ((node.left, node.right), (node.right, node.left)):
                    if _coefficient(b) and self.of(a, depth) == DERIV:
                        self.sources[id(node)] = self.sources.get(id(a))
                        return DERIV
            return self._combine(node, [node.left, node.right], depth)
        if isinstance(node, ast.IfExp):
            return self._combine(node, [node.body, node.orelse], depth)
        if isinstance(node, (ast.GeneratorExp, ast.ListComp)):
            return self._combine(node, [node.elt], depth)
        if isinstance(node, ast.Call):
            return self._call(node, depth)
        return OTHER

    def _filled_by(self, node: ast.Attribute) -> ast.Call | None:
        """The ``backward()`` call that filled the ``.grad`` read at ``node`` without a graph: the last one before
        it in the same function, when no ``backward()`` there passes ``create_graph``."""
        scope = self.va.scope(node)
        calls = [n for n in self.ix.scope_nodes(scope) if isinstance(n, ast.Call)
                 and isinstance(n.func, ast.Attribute) and n.func.attr == "backward"]
        if any(kwarg(c, "create_graph") is not None and not is_const(kwarg(c, "create_graph"), False)
               or any(k.arg is None for k in c.keywords) for c in calls):
            return None
        before = [c for c in calls if (c.lineno, c.col_offset) < (node.lineno, node.col_offset)]
        return before[-1] if before else None

    def _attribute(self, node: ast.Attribute) -> ast.expr | None:
        """The value of ``self.X`` read in a method: the one assignment of it in the class, made earlier in
        the same method."""
        cls = self.ix.enclosing_class(node)
        func = self.ix.enclosing_function(node)
        if cls is None or func is None:
            return None
        stores = [n for n in ast.walk(cls) if isinstance(n, (ast.Assign, ast.AugAssign, ast.AnnAssign))
                  and any(isinstance(t, ast.Attribute) and t.attr == node.attr and isinstance(t.value, ast.Name)
                          and t.value.id == "self" for t in (n.targets if isinstance(n, ast.Assign) else [n.target]))]
        if len(stores) != 1 or not isinstance(stores[0], ast.Assign) or len(stores[0].targets) != 1:
            return None
        store = stores[0]
        if self.ix.enclosing_function(store) is not func or store.lineno >= node.lineno:
            return None
        return store.value

    def _call(self, call: ast.Call, depth: int) -> str:
        ix = self.ix
        if _derivative_api(ix, call):
            if not _graphless(call):
                return OTHER
            self.sources[id(call)] = call
            return DERIV
        f = call.func
        args = [*call.args, *(k.value for k in call.keywords)]
        if isinstance(f, ast.Attribute):
            q = ix.qualname(f) or ""
            head = q.split(".")[0]
            if head in ("torch", "F", "np", "numpy", "math") and ix.is_torchish(q) or head in ("np", "numpy", "math"):
                if f.attr in CREATORS:
                    return CONST
                return self._combine(call, args, depth) if args else OTHER
            if f.attr in DETACHING:
                return CONST if self.of(f.value, depth) != OTHER else OTHER
            # a tensor method: x.pow(2), g.norm(2, dim=1), r.mean()
            parts = [f.value, *args]
            if dotted(f.value) and ix.is_model(dotted(f.value)):
                return OTHER
            return self._combine(call, parts, depth)
        if isinstance(f, ast.Name):
            if f.id in ("sum", "abs", "float", "max", "min"):
                return self._combine(call, args, depth) if args else OTHER
            callee = ix.callee(call)
            if callee is not None:
                return self._returns(call, callee, depth)
            if ix.is_loss_fn(call) and args:
                return self._combine(call, args, depth)
        if ix.is_loss_fn(call) and args:
            return self._combine(call, args, depth)
        return OTHER

    def _returns(self, call: ast.Call, func: FuncNode, depth: int) -> str:
        rets = [n.value for n in self.ix.scope_nodes(func) if isinstance(n, ast.Return)]
        if not rets or any(r is None for r in rets):
            return OTHER
        kinds = {self.of(r, depth) for r in rets}
        if kinds == {DERIV}:
            self.sources[id(call)] = self.sources.get(id(rets[0]))
            return DERIV
        return OTHER if OTHER in kinds or DERIV in kinds else CONST

    # -- the loss ------------------------------------------------------------------
    def terms(self, node: ast.AST, depth: int = 0) -> Iterator[ast.AST]:
        """The additive terms of a loss expression, through names, ``+=`` and scale factors."""
        if depth > MAX_DEPTH:
            return
        if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub)):
            yield from self.terms(node.left, depth + 1)
            yield from self.terms(node.right, depth + 1)
            return
        if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Mult, ast.Div)):
            if _coefficient(node.right):
                yield from self.terms(node.left, depth + 1)
                return
            if _coefficient(node.left) and isinstance(node.op, ast.Mult):
                yield from self.terms(node.right, depth + 1)
                return
        if isinstance(node, ast.Call):
            callee = self.ix.callee(node)
            rets = [n.value for n in self.ix.scope_nodes(callee) if isinstance(n, ast.Return)] if callee else []
            if len(rets) == 1 and rets[0] is not None:
                yield from self.terms(rets[0], depth + 1)  # loss = compute_loss(...): the terms it returns
                return
        if isinstance(node, ast.Name):
            defs = self.va.defs(node)
            if len(defs) == 1:
                d = next(iter(defs))
                if d.kind == "assign" and d.value is not None and d.index is None:
                    yield from self.terms(d.value, depth + 1)
                    yield from self._augmented(node, depth)
                    return
                if d.kind == "aug":
                    yield from self._augmented(node, depth)
                    return
        yield node

    def _augmented(self, name: ast.Name, depth: int) -> Iterator[ast.AST]:
        """``loss += term`` statements of the same name in the scope before the read."""
        scope = self.va.scope(name)
        for n in self.ix.scope_nodes(scope):
            if isinstance(n, ast.AugAssign) and isinstance(n.op, (ast.Add, ast.Sub)) \
                    and isinstance(n.target, ast.Name) and n.target.id == name.id \
                    and (n.lineno, n.col_offset) < (name.lineno, name.col_offset):
                yield from self.terms(n.value, depth + 1)


def _losses(ix: FileIndex) -> Iterator[tuple[ast.AST, ast.expr]]:
    """(where, loss) for each loss that is backwarded: ``backward()`` calls, a LightningModule's
    ``training_step`` return."""
    for call in ix.calls:
        loss = _backwarded(ix, call)
        if loss is not None and not ix.under_no_grad(call):
            yield call, loss
    for func in ix.functions.get("training_step", []):
        if ix.enclosing_class(func) is not None:
            for n in ix.scope_nodes(func):
                if isinstance(n, ast.Return) and n.value is not None and not isinstance(n.value, ast.Dict):
                    yield n, n.value


def _backwarded(ix: FileIndex, call: ast.Call) -> ast.expr | None:
    """The loss a backward call trains on."""
    f = call.func
    if not isinstance(f, ast.Attribute) or f.attr not in BACKWARD_CALLS:
        if ix.qualname(f) == "torch.autograd.backward" and call.args:
            return call.args[0]
        return None
    owner = (dotted(f.value) or "").rsplit(".", 1)[-1]
    if f.attr == "manual_backward" or (f.attr == "backward" and call.args and owner in BACKWARD_OWNERS):
        return call.args[0] if call.args else None
    recv = f.value
    if isinstance(recv, ast.Call) and isinstance(recv.func, ast.Attribute) and recv.func.attr == "scale" \
            and recv.args:
        return recv.args[0]  # scaler.scale(loss).backward()
    return recv


@rule(SLUG)
def derivative_without_graph(ix: FileIndex) -> Iterator[Hit]:
    if not any(_grad_call(ix, c) for c in ix.calls) and not any(a.attr == "grad" for a in ix.attributes):
        return
    flow = _Flow(ix)
    seen: set[int] = set()
    for where, loss in _losses(ix):
        for term in flow.terms(loss):
            if flow.of(term) != DERIV:
                continue
            src = flow.source(term)
            if src is None or id(src) in seen:
                continue
            seen.add(id(src))
            name = ix.segment(src.func) or "torch.autograd.grad"
            flag = kwarg(src, "create_graph")
            how = "with create_graph=False" if flag is not None else "without create_graph=True"
            if isinstance(src.func, ast.Attribute) and src.func.attr == "backward":
                what = f"{name}() fills .grad {how}, so the gradient read from .grad has no graph"
            else:
                what = f"{name}(...) is taken {how}, so the derivative it returns has no graph"
            loss_at = f"the loss training_step returns at line {where.lineno} (which Lightning backwards)" \
                if isinstance(where, ast.Return) else f"the loss backwarded at line {where.lineno}"
            yield Hit(SLUG, src,
                      f"{what}; it reaches {loss_at} as the term `{_short(ix, term)}`, which then adds a "
                      "constant to the loss and nothing to its gradient: the derivative term (a residual, a "
                      "gradient penalty, a regulariser) trains nothing while the loss still falls from its other "
                      "terms",
                      fix=f"pass create_graph=True to {name}(...) so that the loss can be differentiated through "
                      "the derivative")


def _short(ix: FileIndex, node: ast.AST) -> str:
    text = " ".join(ix.segment(node).split())
    return text if len(text) <= 60 else text[:57] + "..."
