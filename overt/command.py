"""How every ``overt`` subcommand reads its arguments' common shape and how it ends on an error.

- :func:`command` wraps a subcommand's ``main(argv) -> int`` and is the one place where errors
  become a message and an exit status: an :class:`~overt.errors.OvertError` becomes one message,
  ``overt NAME: error: ...`` (with ``(rank R of W)`` in a multi-process run) on stderr, and exit
  status 2 (:data:`USAGE_ERROR`), or 1 for a :class:`Failed` (the command ran and its result is
  a failure: ``overt predict --strict`` with findings, a stdout that cannot be written); a
  :class:`~overt.errors.RankZeroError` (rank 0 failed and says so itself) exits 2 silently.  A
  subcommand may ``translate`` other exceptions (``overt train``: a full disk, a dead peer
  rank).  Any other exception is a bug and keeps its traceback.
- :func:`target_and_overrides`: ``overt train epochs=3`` has no target, only overrides.

Overrides themselves (``key=value``) are parsed by :func:`overt.config.parse_overrides`, once.
Nothing here imports torch: ``overt lint`` goes through it too.
"""

from __future__ import annotations

import functools
import sys
import argparse
from typing import Callable

from overt.errors import OvertError, RankZeroError

#: exit status of a usage error or any other error the user can act on
USAGE_ERROR = 2
#: exit status of a command that ran and failed (:class:`Failed`)
FAILURE = 1

Main = Callable[[list[str]], int]
#: what a subcommand makes of an exception that is not overt's: an error to report the one way,
#: an exit status (nothing more to say), or ``None`` (a bug: it keeps its traceback)
Translate = Callable[[Exception], "OvertError | int | None"]


class Failed(OvertError):
    """The command ran and its result is a failure (exit status 1, not a usage error); reported
    the one way, ``overt NAME: error: ...``."""

    exit_status = FAILURE


def error_line(prog: str, error: BaseException) -> str:
    """``overt NAME: error[ (rank R of W)]: <what, where, why, fix>``."""
    from overt.torchrun import Topology

    here = Topology.of_process()
    where = f" (rank {here.rank} of {here.world_size})" if here.distributed else ""
    return f"{prog}: error{where}: {error}"


def report_error(prog: str, error: BaseException) -> None:
    """Print ``error`` as :func:`error_line` says; nothing for a :class:`RankZeroError` (rank 0 reports)."""
    if not isinstance(error, RankZeroError):
        print(error_line(prog, error), file=sys.stderr, flush=True)


def status_of(error: BaseException) -> int:
    """The exit status an error ends a command with: :data:`USAGE_ERROR` unless the error says
    otherwise (:class:`Failed`: :data:`FAILURE`)."""
    return int(getattr(error, "exit_status", USAGE_ERROR))


def exit_status(exc: SystemExit) -> int:
    """The exit status ``sys.exit(arg)`` gives: 0 for ``None``, an integer as it is, anything else
    printed on stderr and 1."""
    if exc.code is None:
        return 0
    if isinstance(exc.code, int):
        return exc.code
    print(exc.code, file=sys.stderr, flush=True)
    return FAILURE


def command(prog: str, *, translate: Translate | None = None) -> Callable[[Main], Main]:
    """Decorate a subcommand's ``main``: errors a user can act on are reported the one way and
    end it with their exit status (:func:`status_of`).  ``translate`` sees any other
    exception first.  Example::

        @command("overt report")
        def main(argv: list[str]) -> int: ...
    """

    def decorate(main: Main) -> Main:
        @functools.wraps(main)
        def run(argv: list[str]) -> int:
            try:
                return int(main(argv) or 0)
            except (OvertError, RankZeroError) as error:
                report_error(prog, error)
                return status_of(error)
            except Exception as error:
                outcome = translate(error) if translate is not None else None
                if outcome is None:
                    raise
                if isinstance(outcome, int):
                    return outcome
                report_error(prog, outcome)
                return status_of(outcome)

        return run

    return decorate


def add_target_arguments(parser: argparse.ArgumentParser, overrides_help: str = "key=value config overrides") -> None:
    """The ``[TARGET] [key=value ...]`` positionals of ``overt train``, ``sweep`` and ``doctor``; read
    them back through :func:`target_and_overrides`."""
    parser.add_argument("target", nargs="?", default=None,
                        help="built-in recipe name, recipe .py file, module path, or .yaml config")
    parser.add_argument("overrides", nargs="*", help=overrides_help)


def target_and_overrides(target: str | None, overrides: list[str]) -> tuple[str | None, list[str]]:
    """A first positional argument that is a ``key=value`` is an override, not a target
    (``overt train epochs=3``: the default recipe, three epochs)."""
    if target is not None and "=" in target:
        return None, [target, *overrides]
    return target, list(overrides)
