"""An entropy bonus added to a minimised loss (OVT330 ``entropy-bonus-sign``, issue 33).

A policy-gradient loss rewards exploration by *subtracting* ``beta * H(pi)``: the optimizer minimises
the loss, so a term that enters with a plus sign is minimised too, and the policy is pushed towards
certainty on whatever it preferred early.

The rule follows the expression that is ``.backward()``-ed (through local names assigned once, one scope)
and tracks the sign of every term: ``+``, ``-``, unary minus, multiplication by positive literals or by a
coefficient (a name, never assigned a negative literal in the file).  A term is an entropy when it is
``d.entropy()`` of a ``torch.distributions`` object built in the same scope (``-(p * p.log()).sum()`` and
``(p * log p).sum()`` -- the negative entropy -- count too, when ``p`` is visibly the log's argument or
the softmax of the log-softmax's logits).  It fires when an entropy reaches the backward with a positive
sign and the loss is a policy's: the distribution is sampled or its ``log_prob`` is used in the same
scope.  Entropy *minimisation* outside a policy (semi-supervised learning) is left alone, as is any term
whose sign cannot be followed (a call, a division by a variable, a name assigned twice).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from overt.lint.index import FileIndex, dotted
from overt.lint.rules.base import Hit, rule

_REDUCE = frozenset({"mean", "sum", "squeeze", "float", "view", "reshape", "flatten"})
_LOG = frozenset({"log", "log_softmax", "log2"})


def _scope(ix: FileIndex, node: ast.AST) -> ast.AST:
    return ix.enclosing_function(node) or ix.tree


def _bound(ix: FileIndex, scope: ast.AST, name: str) -> ast.AST | None:
    found = [n for n in ix.scope_nodes(scope) if isinstance(n, (ast.Assign, ast.AugAssign, ast.AnnAssign))
             and any(isinstance(t, ast.Name) and t.id == name
                     for t in (n.targets if isinstance(n, ast.Assign) else [n.target]))]
    if len(found) == 1 and isinstance(found[0], ast.Assign) and len(found[0].targets) == 1:
        return found[0].value
    return None


def _distribution(ix: FileIndex, scope: ast.AST, node: ast.AST) -> str | None:
    """The name of a torch.distributions object built in ``scope`` that ``node`` names."""
    if not isinstance(node, ast.Name):
        return None
    value = _bound(ix, scope, node.id)
    if isinstance(value, ast.Call) and (ix.qualname(value.func) or "").startswith("torch.distributions"):
        return node.id
    return None


def _reduced(node: ast.AST) -> ast.AST:
    while isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _REDUCE:
        node = node.func.value
    if isinstance(node, ast.Call) and dotted(node.func) in ("torch.mean", "torch.sum") and node.args:
        return _reduced(node.args[0])
    return node


def _log_of(node: ast.AST) -> ast.AST | None:
    """``x`` of ``torch.log(x)`` / ``x.log()``; the logits of ``log_softmax(logits, ...)`` tagged."""
    if not isinstance(node, ast.Call):
        return None
    f = node.func
    last = (dotted(f) or "").rsplit(".", 1)[-1] if isinstance(f, (ast.Name, ast.Attribute)) else ""
    if last not in _LOG:
        return None
    if isinstance(f, ast.Attribute) and not node.args and dotted(f.value) not in ("torch", "np", "F"):
        return f.value
    return node.args[0] if node.args else None


def _plogp(ix: FileIndex, scope: ast.AST, node: ast.AST) -> bool:
    """``(p * log p).sum(...)``: the negative entropy."""
    node = _reduced(node)
    if not isinstance(node, ast.BinOp) or not isinstance(node.op, ast.Mult):
        return False
    for p, logp in ((node.left, node.right), (node.right, node.left)):
        lp = _bound(ix, scope, logp.id) if isinstance(logp, ast.Name) else logp
        inner = _log_of(lp) if lp is not None else None
        if inner is None:
            continue
        pv = _bound(ix, scope, p.id) if isinstance(p, ast.Name) else p
        if ast.dump(inner) == ast.dump(p):
            return True
        if isinstance(pv, ast.Call) and (dotted(pv.func) or "").rsplit(".", 1)[-1] == "softmax" and pv.args \
                and isinstance(lp, ast.Call) and (dotted(lp.func) or "").endswith("log_softmax") \
                and ast.dump(pv.args[0]) == ast.dump(inner):
            return True
    return False


def _coefficient(ix: FileIndex, node: ast.AST) -> bool:
    """A factor that is positive by every sign the file shows."""
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
        return node.value > 0
    name = dotted(node)
    if name is None:
        return False
    for v in ix.assigns.get(name, []):
        if isinstance(v, ast.UnaryOp) and isinstance(v.op, ast.USub):
            return False
        if isinstance(v, ast.Constant) and isinstance(v.value, (int, float)) and v.value <= 0:
            return False
    return True


def _entropies(ix: FileIndex, scope: ast.AST, node: ast.AST, sign: int, depth: int,
               out: list[tuple[ast.AST, int, str]]) -> None:
    """Collect (term, sign, distribution or '') for every entropy term of ``node``."""
    if depth > 6:
        return
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub)):
        _entropies(ix, scope, node.left, sign, depth + 1, out)
        _entropies(ix, scope, node.right, -sign if isinstance(node.op, ast.Sub) else sign, depth + 1, out)
        return
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        if _plogp(ix, scope, node.operand):
            out.append((node, sign, ""))
            return
        _entropies(ix, scope, node.operand, -sign, depth + 1, out)
        return
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Mult, ast.Div)):
        for this, other in ((node.left, node.right), (node.right, node.left)):
            if isinstance(node.op, ast.Div) and this is node.right:
                continue
            if _coefficient(ix, other):
                _entropies(ix, scope, this, sign, depth + 1, out)
        return
    if _plogp(ix, scope, node):
        out.append((node, -sign, ""))
        return
    inner = _reduced(node)
    if isinstance(inner, ast.Call) and isinstance(inner.func, ast.Attribute) and inner.func.attr == "entropy" \
            and not inner.args:
        d = _distribution(ix, scope, inner.func.value)
        if d:
            out.append((inner, sign, d))
        return
    if inner is not node:
        _entropies(ix, scope, inner, sign, depth + 1, out)
        return
    if isinstance(node, ast.Name):
        value = _bound(ix, scope, node.id)
        if value is not None:
            _entropies(ix, scope, value, sign, depth + 1, out)
            return
        returned = _returned_entropy(ix, scope, node.id)
        if returned is not None:
            out.append((node, sign, returned))


def _returned_entropy(ix: FileIndex, scope: ast.AST, name: str) -> str | None:
    """``'probs of get_action_and_value'`` when ``name`` is unpacked once in ``scope`` from a call of a
    function defined once in the file whose every tuple return has, at that position, ``d.entropy()`` of a
    torch.distributions object it builds and samples or scores (cleanrl's ``_, newlogprob, entropy, v =
    agent.get_action_and_value(...)``)."""
    found = [n for n in ix.scope_nodes(scope) if isinstance(n, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.For))
             and name in {t.id for t in ast.walk(n.targets[0] if isinstance(n, ast.Assign) else n.target)
                          if isinstance(t, ast.Name)}]
    if len(found) != 1 or not isinstance(found[0], ast.Assign) or len(found[0].targets) != 1:
        return None
    target, value = found[0].targets[0], found[0].value
    if not isinstance(target, ast.Tuple) or not isinstance(value, ast.Call):
        return None
    index = next((i for i, t in enumerate(target.elts) if isinstance(t, ast.Name) and t.id == name), None)
    f = value.func
    fname = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else None
    defs = ix.functions.get(fname or "", [])
    if index is None or len(defs) != 1 or any(isinstance(t, ast.Starred) for t in target.elts):
        return None
    returns = [n for n in ix.scope_nodes(defs[0]) if isinstance(n, ast.Return) and n.value is not None]
    dists = set()
    for r in returns:
        if not isinstance(r.value, ast.Tuple) or len(r.value.elts) != len(target.elts):
            return None
        term = r.value.elts[index]
        if not (isinstance(term, ast.Call) and isinstance(term.func, ast.Attribute) and term.func.attr == "entropy"
                and not term.args):
            return None
        d = _distribution(ix, defs[0], term.func.value)
        if d is None or not _policy(ix, defs[0], d):
            return None
        dists.add(d)
    return f"{dists.pop()} of {fname}" if len(dists) == 1 else None


def _policy(ix: FileIndex, scope: ast.AST, dist: str) -> bool:
    """The distribution (or, for a hand-written entropy, any distribution) is sampled or scored by log_prob."""
    for n in ix.scope_nodes(scope):
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in (
                "sample", "log_prob", "rsample") and (not dist or dotted(n.func.value) == dist):
            return True
    return False


@rule("entropy-bonus-sign")
def entropy_bonus_sign(ix: FileIndex) -> Iterator[Hit]:
    """``loss = pg_loss + beta * dist.entropy()`` then ``loss.backward()``: the entropy is minimised
    (issue 33, MrSyee/pg-is-all-you-need#37)."""
    for target, where in _minimised(ix):
        scope = _scope(ix, target)
        found: list[tuple[ast.AST, int, str]] = []
        _entropies(ix, scope, target, 1, 0, found)
        for term, sign, dist in found:
            if sign > 0 and (" of " in dist or _policy(ix, scope, dist)):
                what = f"the entropy of {dist}" if dist else (
                    "an entropy written out" if isinstance(term, ast.UnaryOp) else "the negative entropy, subtracted")
                yield Hit("entropy-bonus-sign", term,
                          f"`{ix.segment(term)}` ({what}) enters the loss that {where} minimises with a "
                          "plus sign: the optimizer lowers the policy's entropy, so it turns deterministic early "
                          "and stops exploring, where an entropy bonus should raise it",
                          fix="subtract the bonus: loss = policy_loss - coef * entropy")
                break


def _minimised(ix: FileIndex) -> Iterator[tuple[ast.AST, str]]:
    """Expressions an optimizer minimises: ``x.backward()`` (no gradient given) and the value returned by a
    Lightning ``training_step`` or a Hugging Face ``compute_loss``."""
    for call in ix.calls:
        if isinstance(call.func, ast.Attribute) and call.func.attr == "backward" and not call.args:
            yield call.func.value, f"line {call.lineno}"
    for name in ("training_step", "compute_loss"):
        for func in ix.functions.get(name, []):
            for node in ix.scope_nodes(func):
                if isinstance(node, ast.Return) and node.value is not None and not isinstance(node.value, ast.Tuple):
                    yield node.value, f"{name} (line {node.lineno})"
