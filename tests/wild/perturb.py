"""Does a detection survive ordinary changes around the bug?  A metamorphic check of the runtime face.

A check that generalises names the cause whatever else the program does; a check tied to incidental
structure goes silent when the surrounding code changes.  For each wild case whose bug ``overt run``
names by its cause, this runs the buggy script again with one change that leaves the bug in place and
that correct programs make every day, and reports which cases are no longer caught:

* ``ema``: an average of the weights updated under ``no_grad`` after every optimizer step;
* ``seed1``: ``torch.manual_seed(1)`` instead of 0 (the bug is the same bug at any seed);
* ``clip``: ``clip_grad_norm_`` with a bound it never reaches, before every step;
* ``sched``: a constant ``LambdaLR`` stepped after every optimizer step.

    python -m tests.wild.perturb --transforms ema,seed1 [--twins] [w05 w07 ...]

With ``--twins`` the changed twins run too (any finding on them is reported).  A case the change does
not apply to (no ``model``, no optimizer step line, no seed call), or whose changed script fails (the
inserted lines name something out of their scope), is counted as not applicable.
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from types import ModuleType

from tests.wild import harness

_STEP = re.compile(r"^([ \t]*)(?!sched)(\w*opt\w*)\.step\(\)[ \t]*$", re.M)
_GUARD = re.compile(r"^([ \t]*)#@guard[ \t]*$", re.M)


def _after_guard(text: str, line: str) -> str | None:
    m = _GUARD.search(text)
    if m is None or not re.search(r"\bmodel\b", text[:m.start()]):
        return None
    return text[:m.end()] + "\n" + m.group(1) + line + text[m.end():]


def _at_steps(text: str, make) -> str | None:
    if _STEP.search(text) is None:
        return None
    return _STEP.sub(lambda m: make(m.group(1), m.group(2), m.group(0)), text)


def ema(text: str) -> str | None:
    text = _after_guard(text, "_ema = [p.detach().clone() for p in model.parameters()]")
    if text is None:
        return None
    return _at_steps(text, lambda ind, opt, line: (
        f"{line}\n{ind}with torch.no_grad():\n{ind}    for _a, _p in zip(_ema, model.parameters()):\n"
        f"{ind}        _a.mul_(0.99).add_(_p.detach(), alpha=0.01)"))


def seed1(text: str) -> str | None:
    if "torch.manual_seed(0)" not in text:
        return None
    return text.replace("torch.manual_seed(0)", "torch.manual_seed(1)", 1)


def clip(text: str) -> str | None:
    if _after_guard(text, "pass") is None:
        return None
    return _at_steps(text, lambda ind, opt, line: (
        f"{ind}torch.nn.utils.clip_grad_norm_(model.parameters(), 1e9)\n{line}"))


def sched(text: str) -> str | None:
    m = _GUARD.search(text)
    if m is None:
        return None
    step = _STEP.search(text)
    if step is None:
        return None
    opt = step.group(2)
    text = text[:m.end()] + "\n" + m.group(1) + \
        f"_sched = torch.optim.lr_scheduler.LambdaLR({opt}, lambda s: 1.0)" + text[m.end():]
    return _at_steps(text, lambda ind, o, line: f"{line}\n{ind}_sched.step()" if o == opt else line)


TRANSFORMS = {"ema": ema, "seed1": seed1, "clip": clip, "sched": sched}


class _Changed:
    """A case with its scripts changed by one transform."""

    def __init__(self, case: ModuleType, change) -> None:
        self.case, self.change = case, change
        self.__name__ = case.__name__
        self.SLUGS = getattr(case, "SLUGS", ())
        if hasattr(case, "WORLD"):
            self.WORLD = case.WORLD

    def script(self, bug: bool) -> str:
        return self.change(self.case.script(bug))

    def __getattr__(self, name: str):
        return getattr(self.case, name)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("ids", nargs="*")
    ap.add_argument("--transforms", default="ema,seed1")
    ap.add_argument("--twins", action="store_true")
    args = ap.parse_args(argv)
    chosen = [c for c in harness.cases()
              if (not args.ids or harness.case_id(c) in args.ids) and getattr(c, "WORLD", 1) == 1]
    names = args.transforms.split(",")
    lost: dict[str, list[str]] = {n: [] for n in names}
    kept: dict[str, int] = {n: 0 for n in names}
    skipped: dict[str, int] = {n: 0 for n in names}
    twin_findings: dict[str, list[str]] = {n: [] for n in names}
    base = 0
    for case in chosen:
        cid = harness.case_id(case)
        t0 = time.time()
        if not harness.caught(case, harness.run_face(case, True)):
            continue
        base += 1
        row = []
        for n in names:
            change = TRANSFORMS[n]
            if change(case.script(True)) is None:
                skipped[n] += 1
                row.append(f"{n}:skip")
                continue
            changed = _Changed(case, change)
            res = harness.run_face(changed, True)
            if not res.slugs and "Error" in res.error:
                skipped[n] += 1  # the change broke the script (a name out of its scope): not a measurement
                row.append(f"{n}:broken")
                continue
            if harness.caught(case, res):
                kept[n] += 1
                row.append(f"{n}:kept")
            else:
                lost[n].append(cid)
                row.append(f"{n}:LOST({','.join(res.slugs) or res.error[-120:].strip() or '-'})")
            if args.twins:
                tw = harness.run_face(changed, False)
                if tw.slugs:
                    twin_findings[n].append(f"{cid}:{','.join(tw.slugs)}")
        print(f"{cid:45s} {' '.join(row)}  ({time.time() - t0:.1f}s)", flush=True)
    print(f"\ncaught by overt run before the change: {base}")
    for n in names:
        print(f"{n:6s} kept {kept[n]}, lost {len(lost[n])}, not applicable {skipped[n]}"
              + (f"; lost: {' '.join(lost[n])}" if lost[n] else "")
              + (f"; twin findings: {' '.join(twin_findings[n])}" if twin_findings[n] else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
