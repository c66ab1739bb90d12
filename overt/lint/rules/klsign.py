"""A KL divergence that the loss maximises (OVT332 ``kl-divergence-maximised``, issue 33).

A VAE (or any variational model) minimises ``reconstruction + beta * KL(q(z|x) || p(z))``.  The
Gaussian KL to a standard normal is written out as ``-0.5 * sum(1 + logvar - mu**2 - exp(logvar))``:
the sum is minus twice the KL, so the factor must be negative (or the terms written the other way
round, ``0.5 * sum(mu**2 + exp(logvar) - logvar - 1)``).  With the sign lost -- ``0.5 * sum(1 + logvar
- ...)`` added, or a correct KL subtracted -- the optimizer *raises* the divergence: the encoder's
variances blow up or collapse and its means run away, while the reconstruction term alone falls.

The rule follows the expression that is ``.backward()``-ed (or returned by a Lightning
``training_step``/HF ``compute_loss``), through names assigned once in their scope and through the one
return of a function defined once in the file, tracking each term's sign (``+``, ``-``, unary minus,
multiplication by positive or negative literals, by a coefficient never assigned a negative literal,
division by such a coefficient or by a size).  A term is a KL when, after its reductions, it is a sum of
``X``, ``exp(X)`` and a square (``m**2``, ``m.pow(2)``, ``m * m``, ``torch.square(m)``) with ``X`` and
``exp(X)`` of opposite signs and the square with the sign of ``exp(X)`` (a constant allowed), or a call
of ``torch.distributions.kl_divergence``.  It fires when the KL enters the minimised loss with a
negative sign.  A term whose sign cannot be followed is left alone.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from overt.lint.index import FileIndex, dotted
from overt.lint.rules.base import Hit, rule
from overt.lint.rules.entropy import _bound, _minimised, _scope

_SIZES = frozenset({"size", "numel", "__len__"})
_REDUCE = frozenset({"mean", "sum", "squeeze", "float", "view", "reshape", "flatten"})


def _reduced(node: ast.AST) -> ast.AST:
    """``x`` of ``x.sum(...)``, ``torch.mean(x, ...)`` and their chains."""
    while isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _REDUCE:
        if dotted(node.func.value) in ("torch", "np"):
            if not node.args:
                return node
            node = node.args[0]
        else:
            node = node.func.value
    return node


def _literal(node: ast.AST) -> float | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
        return float(node.value)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        v = _literal(node.operand)
        return -v if v is not None else None
    return None


def _factor_sign(ix: FileIndex, node: ast.AST) -> int:
    """+1 or -1 for a factor whose sign the file shows, 0 when it cannot be told."""
    v = _literal(node)
    if v is not None:
        return 0 if v == 0 else (1 if v > 0 else -1)
    if isinstance(node, ast.Call):
        f = node.func
        if isinstance(f, ast.Name) and f.id == "len":
            return 1
        if isinstance(f, ast.Attribute) and f.attr in _SIZES:
            return 1
        return 0
    if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute) and node.value.attr == "shape":
        return 1
    name = dotted(node)
    if name is None:
        return 0
    for v in ix.assigns.get(name, []):
        lit = _literal(v)
        if isinstance(v, ast.UnaryOp) and isinstance(v.op, ast.USub) or (lit is not None and lit <= 0):
            return 0
    return 1


def _exp_arg(node: ast.AST) -> ast.AST | None:
    if isinstance(node, ast.Call):
        f = node.func
        if isinstance(f, ast.Attribute) and f.attr == "exp" and not node.args and dotted(f.value) not in ("torch",):
            return f.value
        if dotted(f) in ("torch.exp", "np.exp") and node.args:
            return node.args[0]
    return None


def _square(node: ast.AST) -> bool:
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Pow) and _literal(node.right) == 2:
        return _exp_arg(node.left) is None
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
        return ast.dump(node.left) == ast.dump(node.right)
    if isinstance(node, ast.Call):
        f = node.func
        if isinstance(f, ast.Attribute) and f.attr == "pow" and len(node.args) == 1 and _literal(node.args[0]) == 2:
            return _exp_arg(f.value) is None
        if dotted(f) == "torch.square" and node.args:
            return True
    return False


def _flat(node: ast.AST, sign: int, out: list[tuple[ast.AST, int]], depth: int = 0) -> None:
    if depth < 8 and isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub)):
        _flat(node.left, sign, out, depth + 1)
        _flat(node.right, -sign if isinstance(node.op, ast.Sub) else sign, out, depth + 1)
    elif depth < 8 and isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        _flat(node.operand, -sign, out, depth + 1)
    else:
        out.append((node, sign))


def _gaussian_kl(node: ast.AST) -> int:
    """The sign of the KL in ``node``, which is ``sign * KL`` times a positive number: +1 for
    ``sum(mu**2 + exp(lv) - lv - 1)``, -1 for ``sum(1 + lv - mu**2 - exp(lv))``; 0 when ``node`` is no
    written-out Gaussian KL."""
    terms: list[tuple[ast.AST, int]] = []
    _flat(_reduced(node), 1, terms)
    if len(terms) < 3 or len(terms) > 4:
        return 0
    exps = [(t, s) for t, s in terms if _exp_arg(t) is not None]
    if len(exps) != 1:
        return 0
    arg, se = ast.dump(_exp_arg(exps[0][0])), exps[0][1]
    logs = [s for t, s in terms if ast.dump(t) == arg]
    squares = [s for t, s in terms if _square(t)]
    consts = [s for t, s in terms if _literal(t) is not None]
    if logs != [-se] or squares != [se] or len(logs) + len(squares) + len(consts) + 1 != len(terms):
        return 0
    return se


def _kl_terms(ix: FileIndex, scope: ast.AST, node: ast.AST, sign: int, depth: int,
              out: list[tuple[ast.AST, int]], seen: set[int]) -> None:
    """Collect (term, sign of the KL in the minimised loss) for each KL term of ``node``."""
    if depth > 8 or id(node) in seen:
        return
    seen.add(id(node))
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub)):
        _kl_terms(ix, scope, node.left, sign, depth + 1, out, seen)
        _kl_terms(ix, scope, node.right, -sign if isinstance(node.op, ast.Sub) else sign, depth + 1, out, seen)
        return
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        _kl_terms(ix, scope, node.operand, -sign, depth + 1, out, seen)
        return
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Mult, ast.Div)):
        kl = _gaussian_kl(node)
        if kl:
            out.append((node, sign * kl))
            return
        for this, other in ((node.left, node.right), (node.right, node.left)):
            if isinstance(node.op, ast.Div) and this is node.right:
                continue
            f = _factor_sign(ix, other)
            if f:
                _kl_terms(ix, scope, this, sign * f, depth + 1, out, seen)
        return
    kl = _gaussian_kl(node)
    if kl:
        out.append((node, sign * kl))
        return
    inner = _reduced(node)
    if isinstance(inner, ast.Call) and (dotted(inner.func) or "").rsplit(".", 1)[-1] == "kl_divergence" \
            and (ix.qualname(inner.func) or "").startswith("torch.distributions"):
        out.append((inner, sign))
        return
    if inner is not node:
        _kl_terms(ix, scope, inner, sign, depth + 1, out, seen)
        return
    if isinstance(node, ast.Name):
        value = _bound(ix, scope, node.id)
        if value is not None:
            _kl_terms(ix, scope, value, sign, depth + 1, out, seen)
            return
    if isinstance(node, ast.Call):
        f = node.func
        fname = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else None
        defs = ix.functions.get(fname or "", [])
        if len(defs) == 1:
            returns = [n for n in ix.scope_nodes(defs[0]) if isinstance(n, ast.Return) and n.value is not None]
            if len(returns) == 1 and not isinstance(returns[0].value, (ast.Tuple, ast.Dict)):
                _kl_terms(ix, defs[0], returns[0].value, sign, depth + 1, out, seen)


@rule("kl-divergence-maximised")
def kl_divergence_maximised(ix: FileIndex) -> Iterator[Hit]:
    """``loss = recon + 0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp())`` then ``loss.backward()``:
    the KL term is maximised (issue 33; FluxML/model-zoo#147)."""
    reported: set[int] = set()
    for target, where in _minimised(ix):
        found: list[tuple[ast.AST, int]] = []
        _kl_terms(ix, _scope(ix, target), target, 1, 0, found, set())
        for term, sign in found:
            if sign < 0 and id(term) not in reported:
                reported.add(id(term))
                yield Hit("kl-divergence-maximised", term,
                          f"`{ix.segment(term)}` makes a KL divergence term that, with the signs in front of it, "
                          f"enters the loss {where} minimises negated: the optimizer raises the divergence between "
                          "the encoder's distribution and the prior instead of lowering it, so the latent variances "
                          "blow up or collapse and the "
                          "means run away while the reconstruction loss alone falls",
                          fix="the KL to a standard normal is -0.5 * sum(1 + logvar - mu**2 - logvar.exp()); "
                              "add it to the loss: loss = recon + beta * kl")
