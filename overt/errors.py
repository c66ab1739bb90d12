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


class SchemaError(OvertError):
    """A file overt wrote and reads back (a run file, an export's serving JSON) that does not hold
    what overt writes there: damaged, edited or from elsewhere.  Names the file and the field."""


def schema_error(source: object, error: Exception, *, what: str = "", why: str = "",
                 fix: str = "", field: str = "") -> SchemaError:
    """A :class:`SchemaError` for ``error`` (a pydantic ``ValidationError``, read duck-typed, or any
    exception) found in the file ``source``: the first fields that are wrong, each with the reason
    (``field``: where in the file the validated object sits, e.g. ``preprocessing``)."""
    problems = []
    for item in getattr(error, "errors", lambda: [])()[:3]:
        field_name = ".".join([field] * bool(field) + [str(part) for part in item.get("loc", ())]) or "the top level"
        value = repr(item.get("input"))
        value = value if len(value) <= 40 else value[:40] + "..."
        problems.append(f"{field_name}: {item.get('msg', 'invalid')} (it holds {value})")
    count = len(getattr(error, "errors", lambda: [])())
    more = f" and {count - 3} more" if count > 3 else ""
    detail = "; ".join(problems) + more if problems else (f"{field}." * bool(field)) + str(error).split("\n")[0]
    return SchemaError(what or f"{source} is damaged: {detail}",
                       where=str(source) if what else "",
                       why=why or "overt reads this file back as it wrote it; a damaged field would change what "
                                  "the model computes without a word",
                       fix=fix or "restore the file from where the run was trained (or train the run again)")
