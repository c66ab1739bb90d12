"""``exp(logvar)`` used as a standard deviation (OVT341 ``variance-as-std``, issue 33).

A Gaussian encoder that outputs ``logvar``, the log of the variance, samples with the standard
deviation ``exp(0.5 * logvar)``.  Multiplying the noise by ``exp(logvar)`` (the variance) samples from
another posterior than the one the KL term prices (``1 + logvar - mu**2 - logvar.exp()`` assumes the
log variance): the bound the model optimises is not its evidence lower bound, the sampled spread is
squared (too narrow below 1, too wide above), and every likelihood reported from it is wrong
(rachtsingh/ibp_vae#3: "since logvar.exp() is variance, I think it should be corrected to (0.5 *
logvar).exp()").

The rule: ``exp(V)`` (``torch.exp``, ``np.exp``, ``math.exp`` or ``V.exp()``) of a name whose words
say log variance (``logvar``, ``log_var``, ``log_variance``, ``z_logvar``), not wrapped in ``sqrt`` or a
power, used as a standard deviation (directly or through a name bound once to it, ``var = logvar.exp()``):
multiplied by Gaussian noise (``randn``/``randn_like``/``normal``,
or a name bound to one, or ``eps``/``noise``), assigned to a name whose words say standard deviation
(``std``, ``sigma``, ``scale``), returned by a function so named, or passed as the scale of
``Normal``/``torch.normal``; in a file that prices ``V`` as a log variance: ``V`` and ``exp(V)`` are
terms of one sum (the Gaussian KL ``1 + logvar - mu**2 - logvar.exp()``, or a log-likelihood so
written).  Quiet when nothing in the file does (only the name says log variance), or when the file
squares ``exp(V)`` or takes ``exp(2 * V)`` anywhere (the author's ``V`` is then a log standard
deviation, whatever its name).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from overt.lint.index import FileIndex, dotted, kwarg, tokens
from overt.lint.rules.base import Hit, rule

_NOISE_CALLS = frozenset({"randn", "randn_like", "normal", "normal_", "standard_normal"})
_STD_WORDS = frozenset({"std", "sigma", "scale", "stddev", "sd", "stdev"})


def _log_variance(node: ast.AST) -> str | None:
    """The name when its words say log variance."""
    name = dotted(node)
    if name is None:
        return None
    words = tokens(name)
    if set(words) & {"logvar", "logvariance"} or any(
            a == "log" and b in ("var", "variance") for a, b in zip(words, words[1:])):
        return name
    return None


def _exp_of(node: ast.AST) -> str | None:
    """``V`` when ``node`` is exp(V) of a log-variance name."""
    if not isinstance(node, ast.Call):
        return None
    f = node.func
    if isinstance(f, ast.Attribute) and f.attr == "exp":
        base = dotted(f.value)
        if base in ("torch", "np", "numpy", "math"):
            return _log_variance(node.args[0]) if len(node.args) == 1 and not node.keywords else None
        return _log_variance(f.value) if not node.args and not node.keywords else None
    if isinstance(f, ast.Name) and f.id == "exp" and len(node.args) == 1:
        return _log_variance(node.args[0])
    return None


def _is_noise(ix: FileIndex, node: ast.AST) -> bool:
    if isinstance(node, ast.Call):
        name = dotted(node.func) or (node.func.attr if isinstance(node.func, ast.Attribute) else "")
        return (name or "").rsplit(".", 1)[-1] in _NOISE_CALLS
    if isinstance(node, ast.Name):
        words = tokens(node.id)
        if words and words[0] in ("eps", "epsilon", "noise"):
            return True
        values = ix.assigns.get(node.id, [])
        return len(values) == 1 and _is_noise(ix, values[0])
    return False


def _squared_somewhere(ix: FileIndex, var: str) -> bool:
    """The file treats ``var`` as a log standard deviation: exp(var) squared, or exp(2 * var)."""
    for node in ast.walk(ix.tree):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Pow) and _exp_of(node.left) == var:
            return True
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in (
                "pow", "square") and _exp_of(node.func.value) == var:
            return True
        if isinstance(node, ast.Call) and (dotted(node.func) or "").rsplit(".", 1)[-1] == "exp" and node.args:
            arg = node.args[0]
            if isinstance(arg, ast.BinOp) and isinstance(arg.op, ast.Mult) and var in (
                    dotted(arg.left), dotted(arg.right)) and any(
                    isinstance(s, ast.Constant) and s.value == 2 for s in (arg.left, arg.right)):
                return True
    return False


def _terms(node: ast.AST) -> list[ast.AST]:
    """The operands of a chain of + and - (``1 + lv - mu**2 - lv.exp()`` -> four terms)."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub)):
        return _terms(node.left) + _terms(node.right)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return _terms(node.operand)
    return [node]


def _priced_as_log_variance(ix: FileIndex, var: str) -> ast.AST | None:
    """An expression of the file where ``var`` and ``exp(var)`` are both terms of one sum: the Gaussian KL
    (``1 + logvar - mu**2 - logvar.exp()``) or log-likelihood written with ``var`` as the log variance."""
    key = ("log-variance-priced", var)
    if key in ix.cache:
        return ix.cache[key]
    found = None
    for node in ast.walk(ix.tree):
        if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub)) and not (
                isinstance(ix.parents.get(node), ast.BinOp) and isinstance(ix.parents[node].op, (ast.Add, ast.Sub))):
            terms = _terms(node)
            if any(dotted(t) == var for t in terms) and any(_exp_of(t) == var or isinstance(t, ast.Name) and len(
                    ix.assigns.get(t.id, [])) == 1 and _exp_of(ix.assigns[t.id][0]) == var for t in terms):
                found = node
                break
    ix.cache[key] = found
    return found


def _use_as_std(ix: FileIndex, call: ast.AST, hop: bool = True) -> str | None:
    """How the exp(logvar) call (or a name bound to it) is used as a standard deviation, or None."""
    parent = ix.parents.get(call)
    target = parent.targets[0] if isinstance(parent, ast.Assign) and len(parent.targets) == 1 else None
    if hop and isinstance(target, ast.Name) and not set(tokens(target.id)) & _STD_WORDS \
            and len(ix.assigns.get(target.id, [])) == 1:
        name = target.id  # var = logvar.exp(); z = mu + eps * var
        scope = ix.enclosing_function(parent) or ix.tree
        for use in ix.scope_nodes(scope):
            if isinstance(use, ast.Name) and use.id == name and isinstance(use.ctx, ast.Load):
                how = _use_as_std(ix, use, hop=False)
                if how:
                    return f"through `{name}` (line {use.lineno}): {how}"
        return None
    if isinstance(parent, ast.BinOp) and isinstance(parent.op, ast.Mult):
        other = parent.right if parent.left is call else parent.left
        if _is_noise(ix, other):
            return f"it scales the noise `{ast.unparse(other)}`"
    if isinstance(parent, ast.Assign) and len(parent.targets) == 1:
        name = dotted(parent.targets[0])
        if name and set(tokens(name)) & _STD_WORDS and "var" not in tokens(name):
            return f"it is assigned to `{name}`"
    if isinstance(parent, ast.Return):
        func = ix.enclosing_function(call)
        if func is not None and set(tokens(func.name)) & _STD_WORDS:
            return f"`{func.name}()` returns it"
    if isinstance(parent, ast.Call) and call is not parent.func:
        name = (dotted(parent.func) or "").rsplit(".", 1)[-1]
        if name in ("Normal", "normal") and (call in parent.args[1:2] or kwarg(parent, "scale") is call
                                             or kwarg(parent, "std") is call):
            return f"it is the scale (standard deviation) of `{name}`"
    if isinstance(parent, ast.keyword) and parent.arg in ("scale", "std"):
        owner = ix.parents.get(parent)
        if isinstance(owner, ast.Call) and (dotted(owner.func) or "").rsplit(".", 1)[-1] in ("Normal", "normal"):
            return f"it is the {parent.arg} of `{ast.unparse(owner.func)}`"
    return None  # a Return or an assignment to another name is followed no further


def _short(node: ast.AST) -> str:
    text = ast.unparse(node)
    return text if len(text) <= 60 else text[:57] + "..."


@rule("variance-as-std")
def variance_as_std(ix: FileIndex) -> Iterator[Hit]:
    """``mu + eps * logvar.exp()``: the variance where the standard deviation belongs (issue 33,
    rachtsingh/ibp_vae#3)."""
    for call in ix.calls:
        var = _exp_of(call)
        if var is None:
            continue
        how = _use_as_std(ix, call)
        if how is None or _squared_somewhere(ix, var):
            continue
        priced = _priced_as_log_variance(ix, var)
        if priced is None:
            continue  # only the name says log variance: nothing in the file contradicts exp(var) as the spread
        yield Hit("variance-as-std", call,
                  f"`{ast.unparse(call)}` is used as a standard deviation ({how}), but `{var}` is a log variance "
                  f"(so named, and line {priced.lineno} prices it as one: `{_short(priced)}`), so exp({var}) is the "
                  f"variance: the samples are drawn with the wrong spread (the "
                  f"standard deviation squared), from another distribution than the one the KL term or "
                  f"likelihood prices",
                  fix=f"take the standard deviation as torch.exp(0.5 * {var})")
