"""``overt run [options] script.py [script args]``: an unmodified script under the guards.

The script runs as ``__main__`` as ``python script.py`` runs it (:mod:`overt.guards.script`);
models and optimizers are found through PyTorch's global module and optimizer
hooks.  The exit code is the script's own (``sys.exit(n)`` -> n, an uncaught
exception -> 1), except that a run whose script exits 0 with an error-level finding exits 1
(``--allow-errors`` keeps the script's 0); with ``--strict`` a run with any finding exits 1.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any, Callable

from overt.command import command, exit_status
from overt.errors import ConfigError, OvertError


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="overt run",
        description="Run a training script unmodified under overt's runtime guards.",
        epilog="Findings go to stderr; silence slugs with --ignore or [tool.overt] ignore = [...] "
               "in pyproject.toml. See docs/guards.md.",
    )
    p.add_argument("--report", metavar="FILE", help="write the findings as JSON to FILE")
    p.add_argument("--strict", action="store_true", help="warnings become errors; exit 1 on any finding")
    p.add_argument("--allow-errors", action="store_true",
                   help="error-level findings do not change the exit status (by default a script that exits 0 "
                        "with an error finding exits 1)")
    p.add_argument("--ignore", action="append", default=[], metavar="SLUG",
                   help="silence a slug or code (repeatable, or comma-separated)")
    p.add_argument("--check-every", type=int, default=50, metavar="N",
                   help="run the expensive checks every N optimizer steps after warmup (default 50)")
    p.add_argument("--warmup-steps", type=int, default=5, metavar="N",
                   help="check every one of the first N steps (default 5)")
    p.add_argument("--no-stop", action="store_true",
                   help="report stale/non-finite gradients instead of stopping before the step")
    p.add_argument("script", help="the Python script to run")
    p.add_argument("args", nargs=argparse.REMAINDER, help="arguments passed to the script")
    return p


_SUPER_INIT = ("before Module.__init__() call",)


def _explain_crash(session, exc: BaseException) -> None:
    """Findings for crashes whose PyTorch message does not say why."""
    text = str(exc)
    if isinstance(exc, AttributeError) and any(s in text for s in _SUPER_INIT):
        from overt.frames import user_frame

        frame = user_frame(exc)
        loc = f"{os.path.relpath(frame.filename)}:{frame.lineno}" if frame is not None else ""
        session.report(
            "missing-super-init",
            f"PyTorch raised \"{text}\": an nn.Module subclass assigned a layer or parameter in "
            "__init__ before calling super().__init__(), so the module's registries do not exist yet.",
            fix="make super().__init__() the first line of __init__.",
            where=f"__init__ at {loc}" if loc else "", key=loc,
        )


def _explain_loss_crash(session, exc: BaseException) -> None:
    """A loss function raised: explain it from the frame's arguments (the loss wrappers of
    :mod:`overt.guards.patches` are only installed on checked steps under ``overt run``)."""
    import torch.nn.functional as F

    from overt.guards import patches
    from overt.guards.where import is_user_file, short_location

    codes = {}
    for name in patches.LOSSES:
        fn = getattr(F, name, None)
        fn = getattr(fn, "__overt_original__", fn)
        if hasattr(fn, "__code__"):
            codes[fn.__code__] = name
    tb, caller = exc.__traceback__, None
    while tb is not None:
        frame = tb.tb_frame
        name = codes.get(frame.f_code)
        if name is not None:
            local = dict(frame.f_locals)
            args = (local.pop("input", None), local.pop("target", None))
            if caller is not None:
                session.losses.locs.setdefault(name, caller)
            patches.safely(session.losses.on_error, name, args, local)
            return
        if is_user_file(frame.f_code.co_filename):
            caller = short_location(frame.f_code.co_filename, tb.tb_lineno)
        tb = tb.tb_next


def _busy_note(main: bool) -> Callable[[], None]:
    """The busy-machine note (:mod:`overt.engine.busy`) over the script's first optimizer steps: a
    global step hook that removes itself once it has judged.  Returns what removes it earlier."""
    import torch.optim.optimizer as optim_mod

    from overt.engine.busy import BusyProbe

    probe = BusyProbe("torch.set_num_threads(1) at the top of the script, or OMP_NUM_THREADS=1 overt run ...")
    if probe.done:
        return lambda: None

    def after_step(*_: Any) -> None:
        text = probe.step()
        if text and main:
            print(text, file=sys.stderr, flush=True)
        if probe.done:
            handle.remove()

    handle = optim_mod.register_optimizer_step_post_hook(after_step)
    return handle.remove


@command("overt run")
def main(argv: list[str]) -> int:
    args = _parser().parse_args(argv)
    script = args.script
    if not os.path.isfile(script):
        raise ConfigError(f"no such script: {script}", fix="give the path of a Python training script")

    from overt.guards import patches
    from overt.guards.options import GuardOptions, pyproject_ignore
    from overt.guards.report import GuardError
    from overt.guards.session import GuardSession

    options = GuardOptions(strict=args.strict,
                           ignore=frozenset([*pyproject_ignore(os.path.dirname(os.path.abspath(script))),
                                             *args.ignore]),
                           check_every=args.check_every, warmup_steps=args.warmup_steps,
                           stop_on_error=not args.no_stop, report_path=args.report, silence_with="--ignore {slug}")

    from overt.guards.script import print_uncaught, run_as_main

    session = GuardSession(options, auto=True)
    from overt.guards.ranks import RankReports

    ranks = RankReports(session)  # under torchrun: other ranks quiet, rank 0 reports everyone's findings once
    ranks.install()
    # a loss that raises is explained from the crash's traceback (_explain_crash), so between
    # checked steps the loss functions stay PyTorch's own (no wrapper frame, no per-call cost)
    session.explain_loss_errors = False
    patches.refresh()
    remove_busy_note = _busy_note(ranks.env.rank == 0)
    code = 0
    error: BaseException | None = None
    try:
        run_as_main(script, args.args)
    except SystemExit as exc:
        code = exit_status(exc)
    except GuardError as exc:  # a guard stopped the run: its finding was printed when it was found
        error = exc
        slug = exc.finding.slug
        print(f"overt run: stopped before the optimizer step by {exc.finding.code} {slug} (above), so the weights "
              f"were not changed by it. Fix the cause (docs/guards.md#{slug}); only if this is intended: "
              f"--ignore {slug} (or --no-stop to report it and let the step happen).", file=sys.stderr)
        code = 1
    except OvertError as exc:
        error = exc
        print(f"overt: {exc}", file=sys.stderr)
        code = 1
    except BaseException as exc:  # the script's own error: shown as Python would show it
        error = exc
        print_uncaught(exc)
        _explain_crash(session, exc)
        _explain_loss_crash(session, exc)
        code = 1
    # sys.argv, sys.path[0] and __main__ stay the script's, as after `python script.py` (atexit
    # handlers see them); an in-process caller restores them (tests/guards/test_run_cli.py)
    remove_busy_note()
    ranks.gather()  # a script that left its process group alive
    ranks.release_group()  # ... is torn down here, every rank together, not at interpreter exit
    ranks.uninstall()
    findings = session.close(error=error)
    findings = session.reporter.findings = ranks.final(findings, sys.stderr)
    if ranks.env.rank == 0 or not ranks.done:
        print(session.reporter.summary_line(), file=sys.stderr, flush=True)
    if args.report and (ranks.env.rank == 0 or not ranks.done):
        session.reporter.write(args.report if ranks.env.rank == 0 else f"{args.report}.rank{ranks.env.rank}")
    if code == 0 and args.strict and findings:
        code = 1
    errors = [f for f in findings if str(getattr(f.severity, "value", f.severity)) == "error"]
    if code == 0 and errors and not args.allow_errors:
        if ranks.env.rank == 0 or not ranks.done:
            print(f"overt run: exit status 1: {len(errors)} error-level finding(s) "
                  "(--allow-errors keeps the script's own exit status)", file=sys.stderr, flush=True)
        code = 1
    return code
