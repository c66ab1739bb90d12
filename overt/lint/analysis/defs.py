"""Reaching definitions for the local names of one function (or a module body).

One walk over the statements, in execution order, carries "which assignments of
each name may be the current one" and records it at every read of a name.  It
understands assignments, augmented and annotated assignments, tuple unpacking,
``with ... as``, loop targets, walrus, imports and nested definitions; branches
join, a loop's body starts from every definition the body makes (so a value
carried from the previous iteration reaches the top of the body: one pass that
over-approximates the fixed point), ``break``/``continue``/``return`` cut the
flow where they stand.

The answer over-approximates (a definition that may reach is included), so a
rule that requires *every* reaching definition to agree stays silent when the
code could go either way.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

State = dict[str, frozenset["Def"]]
_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)
_COMPS = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)


@dataclass(frozen=True, eq=False)
class Def:
    """One definition of a name.

    kind: ``assign`` (``value`` is the right-hand side; ``index`` the position when
    unpacked from a tuple), ``aug`` (``x += value``), ``for`` (``value`` is the
    iterable), ``with`` (``value`` is the context manager expression), ``param``
    (``node`` is the ``ast.arg``), ``comp`` (a comprehension variable), ``other``
    (import, nested def, except-as, match capture: nothing known).
    """

    kind: str
    node: ast.AST
    value: ast.expr | None = None
    index: int | None = None


def _join(a: State | None, b: State | None) -> State | None:
    if a is None:
        return b
    if b is None:
        return a
    out = dict(a)
    for k, v in b.items():
        out[k] = out[k] | v if k in out else v
    return out


class ReachingDefs:
    """``defs(name_node)``: the definitions that may reach a read of a local name.
    An empty set means the name is not bound in this scope (a global, a builtin)."""

    def __init__(self, scope: ast.AST, kids: dict[ast.AST, list[ast.AST]] | None = None):
        self._kids = kids if kids is not None else {}
        self.reaching: dict[int, frozenset[Def]] = {}
        self.bound: set[str] = set()
        self._loops: list[tuple[list, list]] = []  # (continue states, break states)
        self._made: dict[tuple, Def] = {}
        state: State = {}
        if isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            a = scope.args
            for arg in [*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg]:
                if arg is not None:
                    state[arg.arg] = frozenset({self._def("param", arg)})
                    self.bound.add(arg.arg)
        body = scope.body if isinstance(scope.body, list) else [ast.Return(scope.body)]
        self.final = self._block(body, state)

    def _def(self, kind: str, node: ast.AST, value: ast.expr | None = None, index: int | None = None) -> Def:
        """One Def object per definition site (loops revisit statements until nothing changes)."""
        key = (kind, id(node), index)
        d = self._made.get(key)
        if d is None:
            d = self._made[key] = Def(kind, node, value, index)
        return d

    def defs(self, name: ast.Name) -> frozenset[Def]:
        return self.reaching.get(id(name), frozenset())

    # -- expressions -----------------------------------------------------------
    def _reads(self, expr: ast.AST | None, state: State, comp: dict[str, Def] | None = None) -> None:
        if expr is None:
            return
        stack = [expr]
        while stack:
            n = stack.pop()
            if isinstance(n, ast.Name):
                if isinstance(n.ctx, ast.Load):
                    if comp and n.id in comp:
                        self.reaching[id(n)] = frozenset({comp[n.id]})
                    else:
                        self.reaching[id(n)] = state.get(n.id, frozenset())
                continue
            if isinstance(n, _SCOPES):
                continue
            if isinstance(n, ast.NamedExpr):
                self._reads(n.value, state, comp)
                self._bind(n.target, state, self._def("assign", n, n.value))
                continue
            if isinstance(n, _COMPS):
                inner = dict(comp or {})
                for gen in n.generators:
                    self._reads(gen.iter, state, inner)
                    for t in ast.walk(gen.target):
                        if isinstance(t, ast.Name):
                            inner[t.id] = self._def("comp", gen, gen.iter)
                    for cond in gen.ifs:
                        self._reads(cond, state, inner)
                parts = [n.key, n.value] if isinstance(n, ast.DictComp) else [n.elt]
                for p in parts:
                    self._reads(p, state, inner)
                continue
            children = self._kids.get(n)
            stack.extend(children if children is not None else ast.iter_child_nodes(n))

    def _bind(self, target: ast.AST, state: State, d: Def) -> None:
        if isinstance(target, ast.Name):
            state[target.id] = frozenset({d})
            self.bound.add(target.id)
        elif isinstance(target, (ast.Tuple, ast.List)):
            for i, elt in enumerate(target.elts):
                inner = elt.value if isinstance(elt, ast.Starred) else elt
                if d.kind == "assign" and not isinstance(elt, ast.Starred) and d.index is None:
                    self._bind(inner, state, self._def("assign", d.node, d.value, i))
                else:
                    self._bind(inner, state, self._def("other" if d.kind == "assign" else d.kind, d.node, d.value))
        elif isinstance(target, ast.Starred):
            self._bind(target.value, state, self._def("other", d.node))
        else:  # attribute / subscript targets read their base
            self._reads(target, state)

    # -- statements ------------------------------------------------------------
    def _block(self, stmts: list[ast.stmt], state: State | None) -> State | None:
        for s in stmts:
            if state is None:
                return None
            state = self._stmt(s, state)
        return state

    def _loop(self, s: ast.stmt, state: State) -> State | None:
        # One pass: the head of the loop starts from every definition the body makes (what
        # the previous iteration may carry back), which over-approximates the fixed point.
        head: State = dict(state)
        carried: State = {}
        if isinstance(s, (ast.For, ast.AsyncFor)):
            self._bind(s.target, carried, self._def("for", s, s.iter))
        self._assigned(s.body, carried)
        for k, v in carried.items():
            head[k] = head[k] | v if k in head else v
        self._loops.append(([], []))
        body_state = dict(head)
        if isinstance(s, (ast.For, ast.AsyncFor)):
            self._bind(s.target, body_state, self._def("for", s, s.iter))
        else:
            self._reads(s.test, body_state)
        end = self._block(s.body, body_state)
        _, breaks = self._loops.pop()
        exit_state = _join(dict(head), end) or dict(head)
        if isinstance(s, ast.While):
            self._reads(s.test, exit_state)
        after = self._block(s.orelse, exit_state)
        for st in breaks:
            after = _join(after, st)
        return after

    def _assigned(self, stmts: list[ast.stmt], out: State) -> None:
        """Every definition the statements make (no reads recorded, no flow): ``out[name] |= defs``."""
        for s in stmts:
            scratch: State = {}
            if isinstance(s, ast.Assign):
                for t in s.targets:
                    self._bind(t, scratch, self._def("assign", s, s.value))
            elif isinstance(s, ast.AnnAssign) and s.value is not None:
                self._bind(s.target, scratch, self._def("assign", s, s.value))
            elif isinstance(s, ast.AugAssign) and isinstance(s.target, ast.Name):
                scratch[s.target.id] = frozenset({self._def("aug", s, s.value)})
            elif isinstance(s, (ast.For, ast.AsyncFor)):
                self._bind(s.target, scratch, self._def("for", s, s.iter))
            elif isinstance(s, (ast.With, ast.AsyncWith)):
                for item in s.items:
                    if item.optional_vars is not None:
                        self._bind(item.optional_vars, scratch, self._def("with", item, item.context_expr))
            elif isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                scratch[s.name] = frozenset({self._def("other", s)})
            elif isinstance(s, (ast.Import, ast.ImportFrom)):
                for a in s.names:
                    name = a.asname or a.name.split(".")[0]
                    scratch[name] = frozenset({self._def("other", s, None, hash(name))})
            elif isinstance(s, (ast.Try, getattr(ast, "TryStar", ast.Try))):
                for h in s.handlers:
                    if h.name:
                        scratch[h.name] = frozenset({self._def("other", h)})
            elif isinstance(s, ast.Match):
                for case in s.cases:
                    for n in ast.walk(case.pattern):
                        name = getattr(n, "name", None)
                        if isinstance(name, str):
                            scratch[name] = scratch.get(name, frozenset()) | {self._def("other", case)}
            for k, v in scratch.items():
                out[k] = out[k] | v if k in out else v
            if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                continue
            for field in ("body", "orelse", "finalbody"):
                inner = getattr(s, field, None)
                if isinstance(inner, list):
                    self._assigned(inner, out)
            for h in getattr(s, "handlers", ()):
                self._assigned(h.body, out)
            for case in getattr(s, "cases", ()):
                self._assigned(case.body, out)

    def _stmt(self, s: ast.stmt, state: State) -> State | None:
        if isinstance(s, ast.Assign):
            self._reads(s.value, state)
            for t in s.targets:
                self._bind(t, state, self._def("assign", s, s.value))
        elif isinstance(s, ast.AnnAssign):
            if s.value is not None:
                self._reads(s.value, state)
                self._bind(s.target, state, self._def("assign", s, s.value))
        elif isinstance(s, ast.AugAssign):
            self._reads(s.value, state)
            if not isinstance(s.target, ast.Name):
                self._reads(s.target, state)
            else:
                state[s.target.id] = frozenset({self._def("aug", s, s.value)})
                self.bound.add(s.target.id)
        elif isinstance(s, (ast.For, ast.AsyncFor)):
            self._reads(s.iter, state)
            return self._loop(s, state)
        elif isinstance(s, ast.While):
            self._reads(s.test, state)
            return self._loop(s, state)
        elif isinstance(s, ast.If):
            self._reads(s.test, state)
            return _join(self._block(s.body, dict(state)), self._block(s.orelse, dict(state)))
        elif isinstance(s, (ast.With, ast.AsyncWith)):
            for item in s.items:
                self._reads(item.context_expr, state)
                if item.optional_vars is not None:
                    self._bind(item.optional_vars, state, self._def("with", item, item.context_expr))
            return self._block(s.body, state)
        elif isinstance(s, (ast.Try, getattr(ast, "TryStar", ast.Try))):
            body_end = self._block(s.body, dict(state))
            anywhere = _join(dict(state), body_end)  # an exception may come from any point
            out = self._block(s.orelse, dict(body_end)) if body_end is not None else None
            for h in s.handlers:
                hs = dict(anywhere) if anywhere is not None else dict(state)
                if h.name:
                    hs[h.name] = frozenset({self._def("other", h)})
                out = _join(out, self._block(h.body, hs))
            if s.finalbody:
                return self._block(s.finalbody, out if out is not None else dict(anywhere or state))
            return out
        elif isinstance(s, (ast.Return, ast.Raise)):
            for child in ast.iter_child_nodes(s):
                self._reads(child, state)
            return None
        elif isinstance(s, ast.Continue):
            if self._loops:
                self._loops[-1][0].append(dict(state))
            return None
        elif isinstance(s, ast.Break):
            if self._loops:
                self._loops[-1][1].append(dict(state))
            return None
        elif isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            for d in s.decorator_list:
                self._reads(d, state)
            state[s.name] = frozenset({self._def("other", s)})
            self.bound.add(s.name)
        elif isinstance(s, (ast.Import, ast.ImportFrom)):
            for a in s.names:
                name = a.asname or a.name.split(".")[0]
                state[name] = frozenset({self._def("other", s, None, hash(name))})
                self.bound.add(name)
        elif isinstance(s, (ast.Global, ast.Nonlocal)):
            for name in s.names:
                state.pop(name, None)
        elif isinstance(s, ast.Match):
            self._reads(s.subject, state)
            out = None
            for case in s.cases:
                cs = dict(state)
                for n in ast.walk(case.pattern):
                    name = getattr(n, "name", None)
                    if isinstance(name, str):
                        cs[name] = frozenset({self._def("other", case)})
                self._reads(case.guard, cs)
                out = _join(out, self._block(case.body, cs))
            return _join(out, dict(state))
        else:  # Expr, Assert, Delete, Pass...
            for child in ast.iter_child_nodes(s):
                self._reads(child, state)
        return state
