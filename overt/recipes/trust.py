"""Which recipe code a run directory may make overt import.

A recipe is Python: importing it runs it.  ``overt predict``, ``overt export`` and
``overt resume`` read the recipe's name from files in a run directory (``config.yaml``, a
checkpoint), and a run directory can come from anywhere (a colleague, a download), so
nothing in it decides on its own which code runs -- the same stance as a model hub's
``trust_remote_code=False``:

* built-in recipes (``overt.recipes.BUILTIN``) are part of overt and always trusted;
* any other recipe (a ``.py`` file or a module path) is imported only when its source's
  sha256 is in this machine's record of recipes that ``overt train`` ran here (written
  at training time, outside every run directory, so a copied or edited run directory
  cannot forge it), or when the user consents on the command line: ``--recipe FILE``
  (names the file to use) or ``--trust-recipe`` (trusts the file the run names).

The record is a small JSON file, ``$OVERT_TRUST_FILE`` or
``$XDG_STATE_HOME/overt/trusted-recipes.json`` (default ``~/.local/state/overt/...``).
The file and its hash are always printed before the import.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from overt.errors import RecipeError
from overt.recipes.base import BUILTIN

#: how many recipe versions the record keeps (oldest dropped first)
KEEP = 2000


def store_path() -> Path:
    """The machine-local record of recipe sources that ``overt train`` ran on this machine."""
    explicit = os.environ.get("OVERT_TRUST_FILE")
    if explicit:
        return Path(explicit)
    state = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(state) / "overt" / "trusted-recipes.json"


#: the largest trust file read (a record of KEEP entries is far smaller)
_MAX_BYTES = 1 << 24

#: recipe sources imported this process from inside a run directory: never recorded as trusted
_withheld: set[tuple[Any, Any]] = set()


class TrustFileError(Exception):
    """The trust file exists but cannot be read as overt's record (unreadable, corrupt, too deep)."""


def _read(path: Path) -> list[dict[str, Any]]:
    """The record's entries; [] when there is no record yet; :class:`TrustFileError` when the file
    exists but is not a record overt can read (it is then never overwritten)."""
    try:
        with open(path, "rb") as fh:
            raw = fh.read(_MAX_BYTES + 1)
    except FileNotFoundError:
        return []
    except OSError as exc:
        raise TrustFileError(f"it cannot be read ({exc.strerror or exc})") from None
    if len(raw) > _MAX_BYTES:
        raise TrustFileError(f"it is larger than {_MAX_BYTES} bytes")
    try:
        data = json.loads(raw.decode("utf-8"))
    except RecursionError:
        raise TrustFileError("it is nested too deeply to be overt's record") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise TrustFileError(f"it is not valid JSON ({str(exc).splitlines()[0]})") from None
    entries = data.get("recipes") if isinstance(data, dict) else None
    if not isinstance(entries, list):
        raise TrustFileError('it does not hold a {"recipes": [...]} record')
    return [e for e in entries if isinstance(e, dict)]


def _entries() -> tuple[list[dict[str, Any]], str | None]:
    """(entries, problem): a damaged record trusts nothing, and says why."""
    try:
        return _read(store_path()), None
    except TrustFileError as exc:
        return [], f"the trust file {store_path()} is unusable: {exc}"


def _say(message: str) -> None:
    import sys

    print(message, file=sys.stderr, flush=True)


def withhold(source: dict[str, Any]) -> None:
    """Never record ``source`` as trusted in this process (a recipe imported from inside a run directory)."""
    _withheld.add((source.get("file"), source.get("sha256")))


def note_origin(spec: str, config_file: str | None = None) -> None:
    """Before ``overt train`` imports the recipe ``spec`` (named by ``config_file``, when a config names
    it): when the recipe file or the config lives inside a run directory (a copied or downloaded one),
    say which file runs, with its sha256, and keep it out of the trust record: training from a config is
    the user's choice, but it must not make predict, export and resume import that file unasked."""
    from overt.run.rundir import enclosing_run

    if spec in BUILTIN:
        return
    source = source_of(spec)
    file = source.get("file")
    run = (enclosing_run(file) if file else None) or (enclosing_run(config_file) if config_file else None)
    if run is None:
        return
    withhold(source)
    named = f", named by {config_file}" if config_file else ""
    _say(f"overt: importing recipe {file or spec} (sha256 {source.get('sha256') or 'unknown'}){named}, from inside "
         f"the run directory {run}: it runs because you asked to train it; it is not recorded as trusted, so "
         f"predict, export and resume will ask before importing it (--trust-recipe)")


def source_of(spec: str) -> dict[str, Any]:
    """``{"spec", "file", "sha256"}`` of a recipe without importing it (see
    :func:`overt.recipes.base.recipe_source`)."""
    from overt.recipes.base import recipe_source

    return recipe_source(spec)


def remember(source: dict[str, Any]) -> bool:
    """Record that ``overt train`` ran this recipe source on this machine; returns whether it was
    recorded.  Built-ins are not recorded, nor a recipe imported from inside a run directory
    (:func:`note_origin`).  A damaged trust file is kept as it is (never overwritten) and a record that
    cannot be written is said on stderr: either only costs a question (--trust-recipe) later."""
    if source.get("spec") in BUILTIN or not source.get("sha256"):
        return False
    if (source.get("file"), source.get("sha256")) in _withheld:
        return False
    path = store_path()
    entry = {"spec": source["spec"], "file": source.get("file"), "sha256": source["sha256"]}
    later = "until then `overt predict`/`export`/`resume` of its runs ask for --trust-recipe"
    try:
        import fcntl

        from overt.run.atomic import write_text_atomic

        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path.with_name(path.name + ".lock"),
                     os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0), 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            try:
                kept = _read(path)
            except TrustFileError as exc:
                _say(f"overt: the trust file {path} is unusable ({exc}); it was kept as it is, and the recipe "
                     f"{entry['file']} was not recorded as trusted.  Fix: look at it, then move it away "
                     f"(mv {path} {path}.bad) so that overt starts a new one; {later}")
                return False
            entries = [e for e in kept if not (e.get("sha256") == entry["sha256"] and e.get("file") == entry["file"])]
            entries = [*entries, {**entry, "since": time.strftime("%Y-%m-%dT%H:%M:%S")}][-KEEP:]
            write_text_atomic(path, json.dumps({"recipes": entries}, indent=1) + "\n")
        finally:
            os.close(fd)
    except OSError as exc:
        _say(f"overt: cannot record the recipe {entry['file']} as trusted in {path} ({exc.strerror or exc}); "
             f"fix: make that folder writable, or set OVERT_TRUST_FILE to a writable path; {later}")
        return False
    return True


def remembered(source: dict[str, Any]) -> bool:
    """Whether this exact source (file and sha256) was trained with on this machine."""
    if not source.get("sha256"):
        return False
    return any(e.get("sha256") == source["sha256"] and e.get("file") == source.get("file")
               for e in _entries()[0])


def _spec_known(spec: str) -> bool:
    return any(e.get("spec") == spec for e in _entries()[0])


def authorize(spec: str, *, recorded: dict[str, Any] | None = None, trust: bool = False,
              command: str = "overt predict", run: str = "") -> list[str]:
    """Decide whether the recipe ``spec`` that a run directory names may be imported; return the lines
    to print before importing (file and sha256), or raise :class:`RecipeError` without importing.

    ``recorded`` is what the run itself recorded of its recipe (``{"sha256", "file"}``), when it did;
    ``trust`` is the user's consent (``--trust-recipe``, or ``--recipe FILE`` naming it)."""
    if spec in BUILTIN:
        return []
    fixes = (f"if you trust this code, say so: `{command} {run or 'RUN'} --trust-recipe`, or name the file "
             f"yourself with `--recipe FILE`")
    problem = _entries()[1]
    if problem:  # a damaged record trusts nothing: say so, beside the usual way out
        fixes += f" ({problem}; move it away to start a new record)"
    if not spec.endswith(".py") and not trust and not _spec_known(spec):
        # a module path: even locating it imports its parent packages, so ask before that too
        raise RecipeError(
            f"the run names the recipe module {spec!r}, which overt train never ran on this machine",
            where=run, why="importing a recipe runs its code; a run directory from elsewhere must not decide what "
                           "code runs on your machine", fix=fixes)
    now = source_of(spec)
    digest = now.get("sha256")
    shown = f"{now.get('file') or spec} (sha256 {digest or 'unknown'})"
    if now.get("file") is None or digest is None:
        raise RecipeError(f"the recipe {spec} that the run names cannot be found", where=run,
                          fix=f"give the recipe file with --recipe FILE (a path relative to {os.getcwd()} or absolute)")
    if trust:
        return [f"overt: importing recipe {shown}, trusted on the command line"]
    saved = (recorded or {}).get("sha256")
    if recorded is not None and not saved:
        raise RecipeError(
            f"the run records no hash of its recipe {spec}, so overt cannot tell it is the code it was trained with",
            where=run, why="a recipe is code; a run directory (or a checkpoint edited to drop the hash) must not "
                           "make overt import a file unchecked", fix=fixes)
    trained_file = (recorded or {}).get("file")
    if saved and trained_file and trained_file != now.get("file"):
        raise RecipeError(
            f"the run names the recipe file {now['file']}, but it was trained with {trained_file}",
            where=run, why="importing a recipe runs its code; a run directory edited to name another file must not "
                           "make overt run it", fix=fixes)
    if saved and saved != digest:
        raise RecipeError(
            f"the recipe {spec} is not the one this run was trained with: its source changed",
            where=f"trained with sha256 {saved[:12]}...; now {shown}",
            why="importing a recipe runs its code; the run's weights were made with other code",
            fix="restore the recipe file as it was; " + fixes)
    if not remembered(now):
        raise RecipeError(
            f"the recipe file {now['file']} was not trained with on this machine: overt will not import it unasked",
            where=f"{shown}, named by {run or 'the run'}",
            why="importing a recipe runs its code; a run directory copied from elsewhere (or edited) must not "
                "decide what code runs on your machine (like trust_remote_code=False)",
            fix=fixes)
    return [f"overt: importing recipe {shown}: the file this run was trained with on this machine"]


def explicit(path: str) -> tuple[str, list[str]]:
    """``--recipe FILE``: the user names the recipe; (spec, lines to print before importing it)."""
    if path in BUILTIN:
        return path, []
    now = source_of(path)
    if now.get("file") is None or not now.get("sha256"):
        raise RecipeError(f"--recipe {path}: no such recipe file", fix="give the path of the recipe's .py file")
    return path, [f"overt: importing recipe {now['file']} (sha256 {now['sha256']}), named with --recipe"]
