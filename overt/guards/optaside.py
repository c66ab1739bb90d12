"""torch's own optimizer ``step()`` runs with the axes window's mode aside (issue 33, the ninth overhead pass).

While the axes window is open (:mod:`overt.guards.axes`: the first checked steps) its
:class:`~torch.overrides.TorchFunctionMode` sees every torch call of this thread, the optimizer's too: torch's
AdamW makes 71 torch calls a step (83 on the first), each a Python ``__torch_function__`` that the mode passes on
untouched -- a call made from torch's files is never the user's line, and ``singleton-axis`` names only a user's
line (:func:`overt.guards.singleton.caller` stops at torch's own frames).  So when nothing but torch's code runs
from the guards' optimizer pre-hook to their post-hook, the pre-hook keeps the mode off (:func:`overt.guards.aside.hold`)
and the post-hook takes it over and puts it back at its end.  That is the case when

- the optimizer is an instance of one of ``torch.optim``'s own classes (the exact class: a subclass's ``step``
  may be the user's), its ``_optimizer_step_code`` torch's;
- the step has no closure (a closure is the user's code: it runs the forward and the loss);
- the guards' pre-hook is the last pre-hook to run and their post-hook the first post-hook (no hook of the
  user's, or of another library, runs in between);
- every parameter is a plain tensor (a tensor subclass's ``__torch_function__`` may be the user's code);
- ``singleton-axis`` follows no pending index (:func:`overt.guards.aside.step_aside` keeps the mode then).

Should ``step()`` raise, the post-hook does not run: the mode goes back at the guards' next hook of this thread
(the next batch fetched, the next forward, a loss, the session's end).  Which steps qualify depends on the
optimizer's class, its hooks and its parameters' types alone, so the findings stay the same.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.optim.optimizer import Optimizer, _global_optimizer_post_hooks, _global_optimizer_pre_hooks

from overt.guards import aside
from overt.guards.where import is_overt_file

#: torch's own optimizer classes (exact classes)
TORCH_OPTIMIZERS = frozenset(cls for cls in vars(torch.optim).values()
                             if isinstance(cls, type) and issubclass(cls, Optimizer) and cls is not Optimizer
                             and cls.__module__.startswith("torch.optim."))
_PLAIN = (torch.Tensor, torch.nn.Parameter)
_STEP_CODE = Optimizer._optimizer_step_code


def _overt_hook(hook: Any) -> bool:
    """Whether ``hook`` is a function of overt's own files."""
    code = getattr(hook, "__code__", None)
    return code is not None and is_overt_file(code.co_filename)


def torch_only(opt: Any, pre: Any, post: Any) -> bool:
    """Whether ``opt.step()`` without a closure runs only torch's code from the hook ``pre`` (the last pre-hook)
    to the hook ``post`` (the first post-hook)."""
    cls = type(opt)
    if cls not in TORCH_OPTIMIZERS or cls._optimizer_step_code is not _STEP_CODE:
        return False
    # an optimizer's own hooks that are overt's (diverged-fit-kept's on an LBFGS) run overt's code only
    own = [h for h in opt._optimizer_step_pre_hooks.values() if not _overt_hook(h)]
    last = own[-1] if own else next(reversed(_global_optimizer_pre_hooks.values()), None)
    if last is None or last != pre:
        return False
    own = [h for h in opt._optimizer_step_post_hooks.values() if not _overt_hook(h)]
    first = own[0] if own else next(iter(_global_optimizer_post_hooks.values()), None)
    if first is None or first != post:
        return False
    return all(type(p) in _PLAIN for group in opt.param_groups for p in group["params"])


def hold_through_step(opt: Any, pre: Any, post: Any) -> None:
    """Called at the end of the guards' pre-hook of a step without a closure while the axes window is open: keep
    the window's mode off through torch's own ``step()`` (until the post-hook ``post``) when nothing else runs."""
    mode = aside.WINDOW
    if mode is None or mode.off_in is None:
        return
    try:
        plain = torch_only(opt, pre, post)
    except Exception:  # noqa: BLE001  never break the user's step: the mode simply goes back
        plain = False
    if plain:
        aside.hold(mode)
