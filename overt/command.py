"""How every ``overt`` subcommand reads its arguments' common shape and how it ends on an error.

- :func:`command` wraps a subcommand's ``main(argv) -> int``: an :class:`~overt.errors.OvertError`
  becomes one message, ``overt NAME: error: ...`` (with ``(rank R of W)`` in a multi-process
  run) on stderr, and exit status 2; a :class:`~overt.errors.RankZeroError` (rank 0 failed and
  says so itself) exits 2 silently.  Any other exception is a bug and keeps its traceback.
- :func:`target_and_overrides`: ``overt train epochs=3`` has no target, only overrides.

Overrides themselves (``key=value``) are parsed by :func:`overt.config.parse_overrides`, once.
Nothing here imports torch: ``overt lint`` goes through it too.
"""

from __future__ import annotations

import functools
import sys
from typing import Callable

from overt.errors import OvertError, RankZeroError

#: exit status of a usage error or any other error the user can act on
USAGE_ERROR = 2

Main = Callable[[list[str]], int]


def error_line(prog: str, error: BaseException) -> str:
    """``overt NAME: error[ (rank R of W)]: <what, where, why, fix>``."""
    from overt.torchrun import DistEnv

    env = DistEnv.from_environ()
    where = f" (rank {env.rank} of {env.world_size})" if env.distributed else ""
    return f"{prog}: error{where}: {error}"


def report_error(prog: str, error: BaseException) -> None:
    """Print ``error`` as :func:`error_line` says; nothing for a :class:`RankZeroError` (rank 0 reports)."""
    if not isinstance(error, RankZeroError):
        print(error_line(prog, error), file=sys.stderr, flush=True)


def command(prog: str) -> Callable[[Main], Main]:
    """Decorate a subcommand's ``main``: errors a user can act on are reported the one way and
    return :data:`USAGE_ERROR`.  Example::

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
                return USAGE_ERROR

        return run

    return decorate


def target_and_overrides(target: str | None, overrides: list[str]) -> tuple[str | None, list[str]]:
    """A first positional argument that is a ``key=value`` is an override, not a target
    (``overt train epochs=3``: the default recipe, three epochs)."""
    if target is not None and "=" in target:
        return None, [target, *overrides]
    return target, list(overrides)
