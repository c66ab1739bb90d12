"""Errors a user can act on."""

from __future__ import annotations


class OvertError(Exception):
    """A problem with the user's input or program, explained: what was seen,
    where, why it matters, and the fix.  The CLI prints it without a traceback
    and exits non-zero."""

    def __init__(self, what: str, *, where: str = "", why: str = "", fix: str = ""):
        self.what, self.where, self.why, self.fix = what, where, why, fix
        parts = [what]
        if where:
            parts.append(f"  where: {where}")
        if why:
            parts.append(f"  why it matters: {why}")
        if fix:
            parts.append(f"  fix: {fix}")
        super().__init__("\n".join(parts))


class DiskFullError(OvertError):
    """A file of the run could not be written because the disk (or the quota) is full."""

    def __init__(self, what: str, where: object = "") -> None:
        parts = disk_full_message(what, where)
        super().__init__(parts["what"], where=parts["where"], why=parts["why"], fix=parts["fix"])


class ConfigError(OvertError):
    """A config key or value that cannot be used."""


class RecipeError(OvertError):
    """A recipe that cannot be loaded or built."""


class DataError(OvertError):
    """Data a recipe needs that is missing or unreadable (overt never downloads it)."""


class RankZeroError(Exception):
    """Raised on the other ranks of a multi-process run when a step that only rank 0 runs failed
    (rank 0 reports the error itself; the others stop without repeating it)."""


def disk_full_message(what: str, where: object) -> dict[str, str]:
    """The parts of overt's "disk is full" error (for :class:`overt.errors.OvertError`)."""
    return {"what": f"the disk is full: cannot write {what}",
            "where": str(where),
            "why": "a file that cannot be written completely is not written at all (the previous checkpoints "
                   "and files stay as they were), but the run cannot go on without it",
            "fix": "free disk space (or point run_dir/runs_root at a larger disk), then `overt resume RUN_DIR` "
                   "continues from the newest checkpoint"}
