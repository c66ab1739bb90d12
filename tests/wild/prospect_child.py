"""Child process of tests/wild/prospect.py: run one wild script under generic observers, write what they saw.

Usage: python -m tests.wild.prospect_child SCRIPT OUT.json SEED_OFFSET

Nothing here knows the program: it hooks every module's forward, every optimizer step and every
``Tensor.backward`` call, and on checked steps (a function of the optimizer step count) probes the last
top-level module called in training mode on its recorded input (RNG, buffers and modes put back).
This is a measuring tool for choosing a guard, not a guard.
"""

from __future__ import annotations

import json
import math
import random
import runpy
import sys

import numpy as np
import torch
from torch.nn.modules.module import register_module_forward_hook, register_module_forward_pre_hook
from torch.optim.optimizer import register_optimizer_step_post_hook, register_optimizer_step_pre_hook

STATE = {"step": 0, "depth": 0, "probing": False, "top": None, "top_args": None, "names": {}, "ntop": 0}
REC: dict = {"loss": [], "acts": {}, "opt": [], "probe": [], "couple": [], "io": []}


def checked(s: int) -> bool:
    """Powers of two and the step after each (pairs give the gradient's direction agreement)."""
    return s >= 1 and ((s & (s - 1)) == 0 or (s >= 3 and ((s - 1) & (s - 2)) == 0))


def _name(m) -> str:
    return STATE["names"].get(id(m), f"?{type(m).__name__}")


def _stats(t: torch.Tensor) -> list[float] | None:
    if not isinstance(t, torch.Tensor) or not t.is_floating_point() or t.numel() < 2:
        return None
    t = t.detach().float()
    return [t.mean().item(), t.std().item(), (t == 0).float().mean().item(), t.abs().mean().item(),
            (t.abs() > 0.99).float().mean().item()]


def _first(out):
    if isinstance(out, torch.Tensor):
        return out
    if isinstance(out, (tuple, list)) and out and isinstance(out[0], torch.Tensor):
        return out[0]
    if isinstance(out, dict):
        for v in out.values():
            if isinstance(v, torch.Tensor):
                return v
    if hasattr(out, "logits") and isinstance(out.logits, torch.Tensor):
        return out.logits
    return None


def _entropy(t: torch.Tensor) -> float | None:
    if t is None or not t.is_floating_point() or t.dim() < 2 or not (2 <= t.shape[-1] <= 1000):
        return None
    p = torch.softmax(t.detach().float(), -1)
    return (-(p * torch.log(p.clamp_min(1e-12))).sum(-1)).mean().item() / math.log(t.shape[-1])


def pre_hook(m, args):
    if STATE["probing"]:
        return
    evaluating = not m.training or not torch.is_grad_enabled()
    if STATE["depth"] == 0 and evaluating and STATE.get("since") and "--edit" in sys.argv:
        _transition(m)
    if STATE["depth"] == 0:
        if id(m) not in STATE["names"]:
            k = STATE["ntop"]
            STATE["ntop"] += 1
            for qn, sub in m.named_modules():
                STATE["names"].setdefault(id(sub), f"t{k}.{qn}" if qn else f"t{k}")
        if m.training and torch.is_grad_enabled():
            try:
                STATE["top"] = m
                STATE["top_args"] = tuple(a.detach().clone() if isinstance(a, torch.Tensor) else a for a in args)
            except Exception:
                STATE["top_args"] = None
    STATE["depth"] += 1


def post_hook(m, args, out):
    if STATE["probing"]:
        return
    STATE["depth"] = max(0, STATE["depth"] - 1)
    s = STATE["step"]
    train = bool(m.training) and torch.is_grad_enabled()
    if train and not (checked(s + 1) or s % 10 == 0):
        return
    acts = REC["acts"].setdefault(_name(m), [])
    if len(acts) > 3000:
        return
    st = _stats(_first(out))
    if st is None:
        return
    ent = _entropy(_first(out)) if STATE["depth"] == 0 else None
    acts.append([s, int(train), *st, ent])
    if STATE["depth"] == 0 and args and isinstance(args[0], torch.Tensor):
        si = _stats(args[0])
        if si:
            REC["io"].append([s, int(train), *si])


def _modes(m):
    return [(sub, sub.training) for sub in m.modules()]


def _probe():
    """On the recorded training input: per-module outputs in train vs eval mode, and batch coupling."""
    m, args = STATE["top"], STATE["top_args"]
    if m is None or not args:
        return
    modes = _modes(m)
    bufs = [(b, b.detach().clone()) for b in m.buffers()]
    rs = (torch.get_rng_state(), random.getstate(), np.random.get_state())
    seen: dict = {}

    def rec_hook(mod, a, out, tag=None):
        st = _stats(_first(out))
        if st is not None:
            seen.setdefault(STATE["tag"], {})[_name(mod)] = st

    h = register_module_forward_hook(rec_hook)
    STATE["probing"] = True
    try:
        with torch.no_grad():
            outs = {}
            for tag, mode in (("train", True), ("eval", False)):
                m.train(mode)
                STATE["tag"] = tag
                torch.set_rng_state(rs[0])
                outs[tag] = _first(m(*args))
            ent = {k: _entropy(v) for k, v in outs.items()}
            REC["probe"].append({"step": STATE["step"], "seen": seen, "ent": ent})
            # batch coupling in eval mode: replace sample 0 by sample 1; do the other samples' outputs move?
            x = args[0] if isinstance(args[0], torch.Tensor) else None
            if x is not None and x.dim() >= 1 and x.shape[0] >= 4:
                for tag, mode in (("eval", False), ("train", True)):
                    m.train(mode)
                    torch.set_rng_state(rs[0])
                    STATE["tag"] = "c0"
                    o1 = _first(m(*args))
                    x2 = x.clone()
                    x2[0] = x[1]
                    torch.set_rng_state(rs[0])
                    o2 = _first(m(x2, *args[1:]))
                    if o1 is not None and o2 is not None and o1.shape == o2.shape and o1.dim() >= 1 \
                            and o1.shape[0] == x.shape[0] and o1.is_floating_point():
                        d = (o1[2:] - o2[2:]).abs().max().item()
                        sc = o1[2:].abs().max().item() + 1e-12
                        REC["couple"].append([STATE["step"], tag, d / sc])
    except Exception as e:  # noqa: BLE001 -- a probe that cannot run says nothing
        REC.setdefault("probe_err", str(e)[:200])
    finally:
        STATE["probing"] = False
        h.remove()
        for sub, mode in modes:
            sub.training = mode
        for b, v in bufs:
            b.copy_(v)
        torch.set_rng_state(rs[0])
        random.setstate(rs[1])
        np.random.set_state(rs[2])


_before: dict = {}


def opt_pre(opt, a, k):
    s = STATE["step"] + 1
    if not checked(s):
        return
    if s >= 8 and s & (s - 1) == 0 and not STATE["probing"]:
        _probe()
    ps = [p for g in opt.param_groups for p in g["params"]]
    _before[id(opt)] = [(p, p.detach().clone(), None if p.grad is None else p.grad.detach().clone()) for p in ps]


def _snapshot():
    m = STATE["top"]
    if m is None:
        return
    ps = list(m.parameters())
    if sum(p.numel() for p in ps) > 5_000_000:
        return
    STATE["snap"] = (m, [(p, p.detach().clone()) for p in ps])
    STATE["since"] = True


def _transition(m):
    """First evaluation call of a model sharing parameters with the trained one, after optimizer steps: does it
    compute, on the last recorded training input, what the trained model computed right after its last step?"""
    snap, args = STATE.get("snap"), STATE["top_args"]
    if snap is None or not args:
        return
    trained = snap[0]
    if m is not trained and not ({id(p) for p in m.parameters()} & {id(p) for p, _ in snap[1]}):
        return
    STATE["since"] = False
    rows = [((p.detach() - w).norm() / (w.norm() + 1e-12)).item() for p, w in snap[1] if p.shape == w.shape]
    keep = [(p, p.detach().clone()) for p, _ in snap[1]]
    modes = _modes(trained) + _modes(m)
    bufs = [(b, b.detach().clone()) for b in list(trained.buffers()) + list(m.buffers())]
    rs = torch.get_rng_state()
    STATE["probing"] = True
    try:
        with torch.no_grad():
            now = _first(m(*args))
            for p, w in snap[1]:
                if p.shape == w.shape:
                    p.copy_(w)
            trained.eval()
            torch.set_rng_state(rs)
            then = _first(trained(*args))
        d = ((now - then).norm() / (then.norm() + 1e-12)).item() if now is not None and then is not None \
            and now.shape == then.shape else None
        REC.setdefault("edit", []).append([STATE["step"], max(rows) if rows else None, d, m is trained])
    except Exception as e:  # noqa: BLE001
        REC.setdefault("edit_err", str(e)[:200])
    finally:
        STATE["probing"] = False
        for p, w in keep:
            p.copy_(w)
        for sub, mode in modes:
            sub.training = mode
        for b, v in bufs:
            b.copy_(v)
        torch.set_rng_state(rs)


def opt_post(opt, a, k):
    if "--edit" in sys.argv:
        _snapshot()
    s = STATE["step"] = STATE["step"] + 1
    if not checked(s) or id(opt) not in _before:
        return
    rows = []
    for i, (p, w0, g) in enumerate(_before.pop(id(opt))):
        wn = w0.norm().item()
        un = (p.detach() - w0).norm().item()
        gn = None if g is None else g.norm().item()
        rows.append([i, p.numel(), wn, un, gn, bool(p.requires_grad)])
    REC["opt"].append({"step": s, "opt": id(opt) % 100000, "rows": rows})


_prev_flat: dict = {}


def opt_pre_flat(opt, a, k):
    s = STATE["step"] + 1
    if not checked(s):
        return
    gl = [p.grad.detach().flatten().float() for g in opt.param_groups for p in g["params"] if p.grad is not None]
    if not gl:
        return
    flat = torch.cat(gl)
    prev = _prev_flat.get(id(opt))
    if prev is not None and prev[0] == s - 1 and prev[1].numel() == flat.numel():
        c = torch.nn.functional.cosine_similarity(prev[1], flat, dim=0).item()
        REC.setdefault("cos", []).append([s, c])
    _prev_flat[id(opt)] = (s, flat)


_orig_backward = torch.Tensor.backward


def backward(self, *a, **k):
    if self.numel() == 1 and not STATE["probing"]:
        REC["loss"].append([STATE["step"], float(self.detach().float().item())])
    return _orig_backward(self, *a, **k)


def main() -> None:
    script, out, off = sys.argv[1], sys.argv[2], int(sys.argv[3])

    # -- seeds: the twin at seed 0 vs seed 1 measures run-to-run noise --------------------------------------
    _tms = torch.manual_seed
    torch.manual_seed = lambda s: _tms(int(s) + off)  # type: ignore[assignment]
    torch.random.manual_seed = torch.manual_seed  # type: ignore[assignment]
    _nps = np.random.seed
    np.random.seed = lambda s=None: _nps(None if s is None else int(s) + off)  # type: ignore[assignment]
    _rs = random.seed
    random.seed = lambda s=None, *a, **k: _rs(  # type: ignore[assignment]
        s + off if isinstance(s, int) else s, *a, **k)
    _rng = np.random.default_rng
    np.random.default_rng = lambda s=None: _rng(  # type: ignore[assignment]
        int(s) + off if isinstance(s, int) else s)
    _tms(1000 + off)

    torch.Tensor.backward = backward  # type: ignore[assignment]
    register_module_forward_pre_hook(pre_hook)
    register_module_forward_hook(post_hook)
    register_optimizer_step_pre_hook(opt_pre_flat)
    register_optimizer_step_pre_hook(opt_pre)
    register_optimizer_step_post_hook(opt_post)

    err = ""
    try:
        runpy.run_path(script, run_name="__main__")
    except SystemExit:
        pass
    except Exception as e:  # noqa: BLE001
        err = f"{type(e).__name__}: {e}"[:300]
    REC["err"] = err
    REC["steps"] = STATE["step"]
    with open(out, "w") as f:
        json.dump(REC, f)


if __name__ == "__main__":
    main()
