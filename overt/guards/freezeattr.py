"""Guard on a freeze written to a module's attribute, not its parameters (slug ``freeze-not-applied``).

``model.backbone.requires_grad = False`` sets a plain Python attribute on the ``nn.Module``: PyTorch
never reads it (a module has no ``requires_grad``; the method is ``requires_grad_()``), so every
parameter of the backbone keeps ``requires_grad=True``, receives gradients and is trained -- the
layer meant to stay frozen is fine-tuned with the rest (MICCAI23-ProtoContra-SFDA#18).  The same
with ``= True`` meant to unfreeze leaves the parameters frozen.

Judged at every checked step (a walk of the watched models' modules, host metadata; an unfreeze
written in the middle of training is seen at the next one), each module reported once: a submodule
whose instance dict holds a boolean ``requires_grad`` that disagrees with one or more of its own
parameters.  The premise is
that nothing reads that attribute: torch.nn never does, and a class of the user's that stores or
reads ``self.requires_grad`` in any of its methods (a flag the class manages itself) keeps it
silent.  Host metadata only, no device work.
"""

from __future__ import annotations

import dis
import types
from typing import TYPE_CHECKING, Any

from overt.guards.check import Check
from overt.text import first_names

if TYPE_CHECKING:
    from overt.guards.watched import OptInfo

_OWN: dict[type, bool] = {}  # class -> whether one of its methods reads or stores self.requires_grad


def _codes(obj: Any) -> list[types.CodeType]:
    fn = getattr(obj, "__func__", obj)
    if isinstance(obj, property):
        return [c for f in (obj.fget, obj.fset) for c in _codes(f)]
    code = getattr(fn, "__code__", None)
    if not isinstance(code, types.CodeType):
        return []
    out = [code]
    for const in code.co_consts:  # nested functions and comprehensions
        if isinstance(const, types.CodeType):
            out.append(const)
    return out


def _uses_own_flag(code: types.CodeType) -> bool:
    """Whether ``code`` reads or stores ``<first argument>.requires_grad`` (also through
    ``getattr``/``setattr``/``hasattr`` with the name as a string)."""
    if "requires_grad" in code.co_consts and {"getattr", "setattr", "hasattr"} & set(code.co_names):
        return True
    if "requires_grad" not in code.co_names or not code.co_varnames:
        return False
    first = code.co_varnames[0]
    prev = None
    for ins in dis.get_instructions(code):
        if ins.argval == "requires_grad" and ins.opname in ("LOAD_ATTR", "STORE_ATTR", "LOAD_METHOD") \
                and prev is not None and prev.opname.startswith("LOAD_FAST") and prev.argval == first:
            return True
        if ins.opname == "STORE_ATTR" and ins.argval == "requires_grad" and prev is not None \
                and prev.opname.startswith("LOAD_FAST"):
            return True  # (``self.requires_grad = x``: the stored value is loaded before self)
        if ins.opname != "CACHE":
            prev = ins
    return False


def manages_flag(cls: type) -> bool:
    """Whether a class outside torch reads or stores ``self.requires_grad`` in one of its methods."""
    known = _OWN.get(cls)
    if known is None:
        known = False
        for klass in cls.__mro__:
            if (getattr(klass, "__module__", "") or "").startswith("torch."):
                continue
            for value in vars(klass).values():
                if any(_uses_own_flag(c) for c in _codes(value)):
                    known = True
                    break
            if known:
                break
        _OWN[cls] = known
    return known


class FreezeAttrChecks(Check):
    name = "freezeattr"

    def __init__(self, session):
        super().__init__(session)
        self.reported: set[tuple[int, bool]] = set()  # (id(module), flag)

    def before_checked_step(self, oi: OptInfo, closure: bool) -> None:
        for info in list(self.s.models.values()):
            for m in info.module.modules():
                flag = m.__dict__.get("requires_grad")
                if not isinstance(flag, bool) or (id(m), flag) in self.reported:
                    continue
                own = list(m.named_parameters())
                wrong = [n for n, p in own if p.requires_grad != flag]
                if not wrong or manages_flag(type(m)):
                    continue
                self.reported.add((id(m), flag))
                label = info.label(m)
                self._report(label, flag, [f"{label}.{n}" for n in wrong], len(own))

    def _report(self, label: str, flag: bool, wrong: list[str], total: int) -> None:
        state = "True" if not flag else "False"
        meant = "freeze" if not flag else "unfreeze"
        effect = ("receive gradients and are trained with the rest of the model" if not flag else
                  "get no gradient and never train")
        self.s.report(
            "freeze-not-applied",
            f"{label}.requires_grad = {flag} set an attribute on the module, not on its parameters: nn.Module "
            f"has no requires_grad (PyTorch never reads that attribute), so {len(wrong)} of its {total} "
            f"parameter(s) ({first_names(wrong)}) still have requires_grad={state} and {effect}. The {meant} "
            "did nothing.",
            fix=f"call the method on the module ({label}.requires_grad_({flag})), or set it on each parameter: "
            f"for p in module.parameters(): p.requires_grad = {flag}",
            where=label, key=label,
        )
