"""A loss weight added to the summed loss as a term of its own (OVT390 ``loss-term-constant``, lint face;
issue 33, the wild corpus's w456).

Premise: a loss weight multiplies the term it weighs.  In a sum of loss terms where one weight of a family (an
entry of the same weights container, ``W["boundary"]``; an attribute or name sharing its weight word,
``self.boundary_weight``, ``lambda_b``) multiplies its term, a sibling weight written as a term of its own,
next to an unweighted term (``W["interior"] + interior_loss + W["boundary"] * boundary_loss``), is a constant
added to the loss: its gradient is zero, so the term it was meant to weigh enters with weight 1, the balance the
weights were chosen for never happens, and the loss value is only shifted (neuraloperator/neuraloperator#619, a
PINO loss adding its interior weight to the interior loss).

Reported on one ``+`` term of a summed expression (``+``/``-`` chains) that is a weight-named leaf (a name,
an attribute or a subscript whose name or key carries a weight word: weight, w, lambda, coef, alpha, beta) when
(a) a sibling weight of the same family multiplies another term of the same sum, (b) a term beside it is an
unweighted, non-constant term (the partner it was meant to multiply), and (c) the sum is a loss (its target,
its function or one of its terms is named loss, cost, elbo, objective, nll or penalty).  Silent on deliberate
constants (``+ math.log(k)``, a number, ``self.margin``: no weight word or no sibling that multiplies), on a sum
whose every loss term is weighted (uncertainty weighting adds its learned log-variances on purpose), on weights
of different families, and on weight-named quantities of their own (``w_loss``, ``weight_reg``: a quantity word in
the name; a plain name bound by a call).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator

from overt.lint.index import FileIndex, dotted
from overt.lint.rules.base import Hit, rule

_WEIGHT_WORDS = frozenset(("weight", "weights", "w", "wt", "wts", "lambda", "lambdas", "lam", "lambd", "lmbda",
                           "lmbd", "coef", "coefs", "coeff", "coeffs", "coefficient", "coefficients", "alpha",
                           "alphas", "beta", "betas"))
_LOSS_WORDS = ("loss", "cost", "elbo", "objective", "nll", "penalty")
#: words that make a weight-named value a quantity of its own (``w_loss``, ``weight_norm``, ``weight_reg``)
_QUANTITY_WORDS = frozenset(("loss", "losses", "cost", "norm", "penalty", "reg", "term", "kl", "nll", "grad", "error",
                             "err", "dist", "decay", "sum", "mean", "total"))


def _words(name: str) -> set[str]:
    """Lower-case words of an identifier (snake_case and camelCase split, digits dropped)."""
    spaced = re.sub(r"([a-z])([A-Z])", r"\1_\2", name)
    return {w for w in re.split(r"[^A-Za-z]+", spaced.lower()) if w}


def _family(node: ast.AST) -> tuple[str, frozenset[str]] | None:
    """``(container, weight words)`` of a weight-named leaf, else None."""
    if isinstance(node, ast.Subscript):
        base = dotted(node.value)
        key = node.slice
        if base is None or not isinstance(key, ast.Constant) or not isinstance(key.value, (str, int)) \
                or isinstance(key.value, bool):
            return None
        words = _words(base.split(".")[-1])
        if isinstance(key.value, str):
            words |= _words(key.value)
        found = frozenset(words & _WEIGHT_WORDS)
        return (base, found) if found else None
    if isinstance(node, ast.Attribute):
        full = dotted(node)
        if full is None:
            return None
        prefix = full.rsplit(".", 1)[0]
        words = _words(node.attr) | _words(prefix.split(".")[-1])
        found = frozenset(words & _WEIGHT_WORDS)
        return (prefix, found) if found else None
    if isinstance(node, ast.Name):
        found = frozenset(_words(node.id) & _WEIGHT_WORDS)
        return ("", found) if found else None
    return None


def _computed(ix: FileIndex, node: ast.expr) -> bool:
    """``node``, a weight-named leaf, names a computed quantity rather than a weight: its name carries a
    quantity word, or (a plain name) one of its plain bindings in its scope calls something."""
    text = dotted(node.value) if isinstance(node, ast.Subscript) else dotted(node)
    words = _words(text or "")
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str):
        words |= _words(node.slice.value)
    if words & _QUANTITY_WORDS:
        return True
    if isinstance(node, ast.Name):
        fn = ix.enclosing_function(node)
        scope = ix.scope_nodes(fn) if fn is not None else ix.stmts_nodes(ix.tree.body)
        for n in scope:
            if isinstance(n, (ast.Assign, ast.AnnAssign, ast.AugAssign)) and n.value is not None:
                targets = n.targets if isinstance(n, ast.Assign) else [n.target]
                if any(isinstance(t, ast.Name) and t.id == node.id for t in targets) and \
                        any(isinstance(c, ast.Call) for c in ast.walk(n.value)):
                    return True
    return False


def _terms(node: ast.expr) -> list[tuple[int, ast.expr]]:
    """The additive terms of a ``+``/``-`` chain, each with its sign, in source order."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub)):
        right = _terms(node.right)
        if isinstance(node.op, ast.Sub):
            right = [(-s, t) for s, t in right]
        return _terms(node.left) + right
    return [(1, node)]


def _factors(node: ast.expr) -> list[ast.expr]:
    """The factors of a ``*`` chain (a lone expression is its own one factor)."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
        return _factors(node.left) + _factors(node.right)
    return [node]


def _constant(node: ast.expr) -> bool:
    """A number, or arithmetic of numbers and ALL_CAPS names."""
    if isinstance(node, ast.Constant):
        return True
    if isinstance(node, ast.Name):
        return node.id.isupper()
    if isinstance(node, ast.UnaryOp):
        return _constant(node.operand)
    if isinstance(node, ast.BinOp):
        return _constant(node.left) and _constant(node.right)
    return False


def _same(a: tuple[str, frozenset[str]], b: tuple[str, frozenset[str]]) -> bool:
    return a[0] == b[0] and bool(a[1] & b[1])


def _is_loss(ix: FileIndex, top: ast.expr, terms: list[ast.expr]) -> bool:
    """The sum is a loss: its assignment target, its function or one of its terms is named like one."""
    texts = [ix.segment(t).lower() for t in terms]
    parent = ix.parents.get(top)
    if isinstance(parent, ast.Assign):
        texts += [ix.segment(t).lower() for t in parent.targets]
    elif isinstance(parent, (ast.AnnAssign, ast.AugAssign)):
        texts.append(ix.segment(parent.target).lower())
    fn = ix.enclosing_function(top)
    if fn is not None:
        texts.append(fn.name.lower())
    return any(w in t for t in texts for w in _LOSS_WORDS)


@rule("loss-term-constant")
def loss_weight_added(ix: FileIndex) -> Iterator[Hit]:
    for node in ast.walk(ix.tree):
        if not (isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub))):
            continue
        parent = ix.parents.get(node)
        if isinstance(parent, ast.BinOp) and isinstance(parent.op, (ast.Add, ast.Sub)):
            continue  # only the whole chain
        terms = _terms(node)
        if len(terms) < 3:
            continue
        exprs = [t for _, t in terms]
        multiplying = [(_family(f), f) for t in exprs for f in _factors(t)
                       if len(_factors(t)) > 1 and _family(f) is not None]
        if not multiplying:
            continue

        def bare(t: ast.expr) -> bool:
            return len(_factors(t)) == 1 and _family(t) is None and not _constant(t) \
                and not isinstance(t, (ast.BinOp, ast.UnaryOp))

        for i, (sign, term) in enumerate(terms):
            fam = _family(term)
            if sign < 0 or fam is None or _computed(ix, term):
                continue
            sibling = next((t for f, t in multiplying if f is not None and _same(fam, f)), None)
            if sibling is None:
                continue
            partner = next((exprs[j] for j in (i + 1, i - 1) if 0 <= j < len(exprs) and terms[j][0] > 0
                            and bare(exprs[j])), None)
            if partner is None or not _is_loss(ix, node, exprs):
                continue
            name, other, part = ix.segment(term), ix.segment(sibling), ix.segment(partner)
            yield Hit("loss-term-constant", term,
                      f"`{name}` is added to the loss as a term of its own (`{name} + {part}`), while `{other}` "
                      f"multiplies its own term in the same sum: a weight added is a constant, its gradient is zero, "
                      f"so `{part}` enters with weight 1 and the balance the weights were chosen for never "
                      "happens -- the loss is only shifted, with no error",
                      fix=f"multiply: `{name} * {part}`")
