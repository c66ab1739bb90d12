"""When a recipe's ``build(cfg)`` raises: name the catalog failure behind PyTorch's message.

A missing ``super().__init__()`` and layers kept in a plain list both end in an error whose
text does not say why (``'Net' object has no attribute '_parameters'``, ``optimizer got an
empty parameter list``).  The modules being built are still alive in the traceback's frames:
they are inspected there."""

from __future__ import annotations

import inspect
import os

from torch import nn

from overt.doctor.probes.registration import hidden_containers
from overt.doctor.result import ProbeResult, Verdict

TESTS = "the recipe's build(cfg) returns a model, an optimizer, a loss and data"


def modules_in_traceback(exc: BaseException) -> list[nn.Module]:
    """Every nn.Module referenced by a local variable of a frame in ``exc``'s traceback."""
    found: dict[int, nn.Module] = {}
    tb = exc.__traceback__
    while tb is not None:
        for value in list(tb.tb_frame.f_locals.values()):
            if isinstance(value, nn.Module) and id(value) not in found:
                found[id(value)] = value
        tb = tb.tb_next
    return list(found.values())


def _short(path: str) -> str:
    """``path`` relative to the working directory when it is inside it."""
    return os.path.relpath(path) if os.path.abspath(path).startswith(os.getcwd() + os.sep) else path


def _defined_at(cls: type) -> str:
    try:
        lines = inspect.getsourcelines(cls.__init__)
        return f"{_short(inspect.getsourcefile(cls.__init__) or '?')}:{lines[1]}"
    except (OSError, TypeError):
        return cls.__qualname__


def _user_line(exc: BaseException) -> str:
    from overt.frames import user_frame

    frame = user_frame(exc)
    return f"{_short(frame.filename)}:{frame.lineno}" if frame is not None else ""


def build_failure(exc: BaseException, what: str = "build(cfg)") -> ProbeResult:
    """A failed ``build`` as a probe result that names the catalog failures it can see."""
    r = ProbeResult("build", "Recipe build", TESTS, verdict=Verdict.FAIL)
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    where = _user_line(exc)
    r.lines.append(f"{what} raised {type(exc).__name__}: {text}" + (f" at {where}" if where else ""))
    r.evidence.update(error=f"{type(exc).__name__}: {text}", where=where)
    for module in modules_in_traceback(exc):
        cls = type(module)
        if "_modules" not in vars(module):
            r.find("missing-super-init",
                   f"{cls.__name__}.__init__ never called super().__init__(): the module's parameter and layer "
                   f"registries do not exist, so PyTorch fails with \"{text}\".", fix="make super().__init__() the "
                   f"first line of {cls.__name__}.__init__.", where=_defined_at(cls))
        for h in hidden_containers(module):
            r.find("unregistered-submodule",
                   f"{h['owner']}.{h['attr']} is a plain Python {h['kind']} holding {h['modules']} layer(s) "
                   f"({h['weights']:,} weights): PyTorch does not see them, so the model has "
                   f"{sum(p.numel() for p in module.parameters()) if '_modules' in vars(module) else 'no registered'} "
                   f"parameters{' and the optimizer gets an empty list' if 'empty parameter list' in text else ''}.",
                   fix=f"self.{h['attr']} = {h['fix']}([...]).",
                   where=f"{h['owner']}.{h['attr']} ({_defined_at(cls)})")
    if r.findings:
        r.summary = "; ".join(f"{f.slug}: {f.where}" for f in r.findings)
        r.fix = " ".join(dict.fromkeys(f.fix for f in r.findings))
    else:
        r.summary = f"build failed: {type(exc).__name__}: {text}"
        r.fix = "fix the error at the line shown; the probes need a model, an optimizer, a loss and data"
    return r
