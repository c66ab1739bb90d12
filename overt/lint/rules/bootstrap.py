"""A bootstrap target whose action is chosen at the current state (OVT344 ``bootstrap-action-wrong-state``,
issue 33).

A temporal-difference target evaluates the next state with the action the policy takes *there*:
``r + gamma * Q_target(s', a')`` with ``a' = pi(s')`` (SAC, TD3, DDPG, DrQ), or
``Q_target(s').gather(1, argmax_a Q(s'))`` (double DQN).  An action computed from the current state
``s`` and scored at ``s'`` asks the critic for the value of doing at ``s'`` what was right at ``s``:
wherever the right action changes from one state to the next, the value of going on is
underestimated, and the critic and the policy learn from that (siddhanthaldar/ROT#2).

The rule: in one function (or the module's top level), a pair of names for a state and its successor
(``obs``/``next_obs``, ``state``/``next_state``, ``s``/``s_next``, ``x``/``new_x``, ``s``/``s_``,
``s``/``s_tp1``; attributes such as ``batch.next_obs`` too); an action ``a`` computed by a call
whose arguments read the current state and not the next one (``a = actor(obs).sample()``,
``a, logp = policy.sample(state)``, ``a = q_net(obs).argmax(1)``); and a call that reads the next
state and takes ``a`` as another argument (``critic_target(next_obs, a)``) or picks ``a``'s entries
out of a call on the next state (``Q(next_obs).gather(1, a)``, ``Q(next_obs)[idx, a]``).  Quiet when
that call also reads the current state (a transition model or discriminator of ``(s, a, s')``), when
the action reads both states, and when the action comes from the replay buffer (no call).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator

from overt.lint.index import FileIndex, dotted
from overt.lint.rules.base import Hit, rule

_NEXT = (re.compile(r"^next_?(?P<s>\w+)$", re.I), re.compile(r"^(?P<s>\w+?)_?next$", re.I),
         re.compile(r"^new_(?P<s>\w+)$", re.I), re.compile(r"^(?P<s>\w+?)_(tp1|prime)$", re.I),
         re.compile(r"^(?P<s>[a-z]\w*?)_$", re.I))
_STATEISH = re.compile(r"^(s|o|obs|observations?|states?|st|ob)s?$", re.I)
_ACTOR = re.compile(r"actor|policy|(^|_)(pi|mu)($|_)", re.I)


def _last(node: ast.AST) -> str | None:
    name = dotted(node)
    return name.rsplit(".", 1)[-1] if name else None


def _pairs(names: set[str]) -> dict[str, str]:
    """next-state name -> current-state name, for pairs that both occur."""
    out: dict[str, str] = {}
    for n in names:
        for pat in _NEXT:
            m = pat.match(n)
            if not m:
                continue
            cur = m.group("s")
            for cand in (cur, cur.lower(), cur[:1].lower() + cur[1:]):
                if cand in names and cand != n and _STATEISH.match(cand):
                    out[n] = cand
                    break
            if n in out:
                break
    return out


def _reads(node: ast.AST, name: str) -> bool:
    return any(_last(sub) == name for sub in ast.walk(node) if isinstance(sub, (ast.Name, ast.Attribute)))


def _scopes(ix: FileIndex) -> list[list[ast.stmt]]:
    out = [ix.tree.body]
    for defs in ix.functions.values():
        out.extend(d.body for d in defs)
    return out


def _stmts(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """Statements of a scope, nested blocks included, nested functions and classes left out."""
    for stmt in body:
        yield stmt
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        for field in ("body", "orelse", "finalbody"):
            yield from _stmts(getattr(stmt, field, []) or [])
        for h in getattr(stmt, "handlers", []) or []:
            yield from _stmts(h.body)


def _own_names(stmt: ast.stmt) -> Iterator[ast.AST]:
    """The nodes of ``stmt`` itself, without the statements nested in it."""
    todo: list[ast.AST] = [stmt]
    while todo:
        node = todo.pop()
        yield node
        for child in ast.iter_child_nodes(node):
            if not isinstance(child, ast.stmt):
                todo.append(child)


_ACTION_NAME = re.compile(r"(^|_)(a|act|acts|action|actions|u)(\d|_|$)|action", re.I)
_CHOICE = {"argmax", "sample", "rsample", "mode", "act", "select_action", "get_action"}


def _is_choice(call: ast.AST) -> bool:
    """Whether a call chain picks an action (``.argmax(1)``, ``.sample()``, ``actor.act(obs)``)."""
    return any(isinstance(sub, ast.Call) and isinstance(sub.func, ast.Attribute) and sub.func.attr in _CHOICE
               for sub in ast.walk(call))


def _uses(node: ast.AST, actions: dict[str, ast.stmt], nxt: str, cur: str) -> tuple[str | None, ast.AST] | None:
    """(action name, the statement that computed it) when ``node`` scores an action of the current state at
    ``nxt``; (None, the call) for an action computed in place (``critic(next_obs, actor(obs))``)."""
    if not isinstance(node, ast.Call):
        return None
    func, kws = node.func, [k.value for k in node.keywords]
    if isinstance(func, ast.Attribute) and func.attr in ("gather", "take_along_dim"):
        at, rest = [func.value], list(node.args) + kws  # Q(next_obs).gather(1, a)
    else:
        args = list(node.args) + kws
        at = [a for a in args if _reads(a, nxt)]
        rest = [a for a in args if not _reads(a, nxt)]
    if not at or not any(_reads(a, nxt) for a in at) or any(_reads(a, cur) for a in at):
        return None
    found = None
    for a in rest:
        hit = _action_arg(a, actions)
        if hit is not None:
            found = hit
        elif isinstance(a, ast.Call) and _reads(a, cur) and (_ACTOR.search(dotted(a.func) or "") or _is_choice(a)):
            found = (None, a)  # critic_target(next_obs, actor_target(obs))
        elif _reads(a, cur):
            return None  # the call reads the current state itself: a model of (s, a, s')
    return found


def _action_arg(node: ast.AST, actions: dict[str, ast.stmt]) -> tuple[str, ast.stmt] | None:
    """The action ``node`` is (``a``, ``a[:, None]``, ``a.unsqueeze(1)``, ``a.long()``)."""
    while True:
        if isinstance(node, ast.Subscript):
            node = node.value
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and node.func.attr in ("unsqueeze", "view", "reshape", "long", "to", "type", "float", "detach"):
            node = node.func.value
        else:
            break
    name = dotted(node)
    return (name, actions[name]) if name in actions else None


@rule("bootstrap-action-wrong-state")
def bootstrap_action_wrong_state(ix: FileIndex) -> Iterator[Hit]:
    seen: set[int] = set()
    for body in _scopes(ix):
        stmts = list(_stmts(body))
        names = {_last(n) for s in stmts for n in _own_names(s) if isinstance(n, (ast.Name, ast.Attribute))}
        pairs = _pairs({n for n in names if n})
        for nxt, cur in pairs.items():
            actions: dict[str, ast.stmt] = {}
            for stmt in stmts:
                if isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Call) \
                        and _reads(stmt.value, cur) and not _reads(stmt.value, nxt):
                    choice = _is_choice(stmt.value)
                    for t in stmt.targets:
                        for e in (t.elts if isinstance(t, ast.Tuple) else [t]):
                            name = dotted(e)
                            if name and name not in (cur, nxt) and (choice or _ACTION_NAME.search(_last(e) or "")):
                                actions[name] = stmt
                elif isinstance(stmt, ast.Assign):  # re-assigned from anything else: no longer the action
                    for t in stmt.targets:
                        for e in (t.elts if isinstance(t, ast.Tuple) else [t]):
                            actions.pop(dotted(e) or "", None)
                for node in _own_names(stmt):
                    found = _uses(node, actions, nxt, cur)
                    if found is None or id(node) in seen:
                        continue
                    seen.add(id(node))
                    name, where = found
                    made = " ".join(ix.segment(where.value if isinstance(where, ast.Assign) else where).split())
                    if len(made) > 90:
                        made = made[:87] + "..."
                    if name is None:
                        what, chosen = f"`{made}`", f"is chosen at `{cur}`"
                    else:
                        what, chosen = f"`{name}`", f"was chosen at `{cur}` (line {where.lineno}: `{made}`)"
                    better = re.sub(rf"\b{re.escape(cur)}\b", nxt, made)
                    yield Hit("bootstrap-action-wrong-state", node,
                              f"`{ix.segment(node)}` scores the action {what} at `{nxt}`, but that action {chosen}: "
                              "the bootstrap target asks for the value of doing at the next state what the policy "
                              "does at this one, so wherever the right action changes between states the target is "
                              "wrong and the critic and the policy learn from it",
                              fix=f"choose the bootstrap action at the next state (e.g. `{better}`)")
