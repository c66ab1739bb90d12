"""The run directory as one object (:class:`RunDir`: its paths, its lock, its safe writes), and
choosing and claiming one.

Every path of a run directory is built here (names from :mod:`overt.run.layout`), and every
write into one goes through :class:`RunDir`: a sub-folder that is a symbolic link (``report/``,
``tb/``, ``plots/``, ``checkpoints/``) is refused with a clear error, and files are written
without following links (:mod:`overt.run.atomic`), so that a run directory from elsewhere
cannot make overt write outside it.
"""

from __future__ import annotations

import contextlib
import os
import stat
import time
from pathlib import Path
from typing import Any, Callable, Iterator

from overt.errors import ConfigError, OvertError
from overt.run import layout, lock
from overt.run.layout import STATUS, SUMMARY, checkpoint_step, checkpoints_dir


class UnsafePathError(OvertError):
    """A path in a run directory that overt will not write through (a link, or a file where a folder
    belongs)."""


class RunDir:
    """One run directory: the paths of its files (:mod:`overt.run.layout` names them), its lock
    (:meth:`lock`, one owner), and its writes, which never follow a link nor leave the folder.

    ::

        run = RunDir("runs/digits-20260101-120000")
        with run.lock():                       # refused while another process trains it
            run.write_json(run.status, {"status": "running"})
    """

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self._lock = lock.RunLock(self.path)

    @classmethod
    def of(cls, path: str | Path) -> RunDir:
        """The run directory a path names: a checkpoint folder's (``RUN/checkpoints/step-NNNNNN``)
        run, else the path itself."""
        path = Path(path)
        return cls(path.parent.parent if checkpoint_step(path.name) is not None else path)

    def __reduce__(self) -> tuple[Any, ...]:
        return (RunDir, (self.path,))  # another process gets the paths, never this one's lock

    def __fspath__(self) -> str:
        return str(self.path)

    def __str__(self) -> str:
        return str(self.path)

    def __repr__(self) -> str:
        return f"RunDir({str(self.path)!r})"

    # -- paths ------------------------------------------------------------------------------

    config = property(lambda self: self.path / layout.CONFIG, doc="``config.yaml``")
    recipe_meta = property(lambda self: self.path / layout.RECIPE_META, doc="``recipe_meta.json``")
    inputs = property(lambda self: self.path / layout.INPUTS, doc="``inputs.json``")
    recipe_source = property(lambda self: self.path / layout.RECIPE_SOURCE, doc="``recipe_source.json``")
    metrics = property(lambda self: self.path / layout.METRICS, doc="``metrics.jsonl``")
    tensorboard = property(lambda self: self.path / layout.TENSORBOARD, doc="``tb/``")
    status = property(lambda self: self.path / layout.STATUS, doc="``status.json``")
    guards = property(lambda self: self.path / layout.GUARDS, doc="``guards.json``")
    checkpoints = property(lambda self: self.path / layout.CHECKPOINTS, doc="``checkpoints/``")
    weights = property(lambda self: self.path / layout.WEIGHTS, doc="``model.safetensors``")
    summary = property(lambda self: self.path / layout.SUMMARY, doc="``summary.json``")
    report = property(lambda self: self.path / layout.REPORT, doc="``report/`` (``overt report`` of this run)")
    plots = property(lambda self: self.path / layout.PLOTS, doc="``plots/`` (``plots=true``)")
    wandb = property(lambda self: self.path / layout.WANDB, doc="``wandb/`` (W&B's own files, ``wandb=true``)")
    mlflow = property(lambda self: self.path / layout.MLFLOW, doc="``mlflow.json``: the MLflow run of this run")

    def checkpoint(self, step: int) -> Path:
        """``checkpoints/step-NNNNNN``: the checkpoint taken after optimizer step ``step``."""
        return self.checkpoints / layout.checkpoint_name(step)

    def checkpoint_root(self) -> Path:
        """Where this path's checkpoint folders are (see :func:`overt.run.layout.checkpoint_root`)."""
        return layout.checkpoint_root(self.path)

    def export(self, fmt: str) -> Path:
        """``model.<fmt>``: the default place of ``overt export --format FMT``."""
        return self.path / f"model.{fmt}"

    # -- the lock ---------------------------------------------------------------------------

    def lock(self) -> lock.RunLock:
        """This run directory's lock, as a context manager (``with run.lock(): ...``) held by this
        object alone; :class:`ConfigError` naming the holder when another process (or another owner in
        this one) has it."""
        return self._lock

    @property
    def held(self) -> bool:
        """Whether this object holds the lock now."""
        return self._lock.held

    def held_here(self) -> bool:
        """Whether any owner in this process holds the lock (a callback then leaves it alone)."""
        return lock.is_held_here(self.path)

    def holder(self) -> dict[str, Any] | None:
        """Who holds the lock (``pid``, ``host``, ``since``), or None."""
        return lock.holder(self.path)

    # -- safe writes ------------------------------------------------------------------------

    def inside(self, path: str | Path) -> Path:
        """``path`` (a name, or a path below the run directory), checked for writing: below the run
        directory, through real folders only.  :class:`UnsafePathError` otherwise."""
        path = Path(path)
        if _below(path, self.path):
            rel: Path | None = path.relative_to(self.path)
        else:  # a name given relative to the run directory
            rel = None if path.is_absolute() else path
        if rel is None or not rel.parts or any(part in ("", ".", "..") for part in rel.parts):
            raise UnsafePathError(f"{path} is not a file of the run directory {self.path}",
                                  why="overt writes a run's files inside its run directory only",
                                  fix="report this as a bug of overt")
        folder = self.path
        for part in rel.parts[:-1]:
            folder = folder / part
            _check_folder(folder, self.path)
        return self.path / rel

    def folder(self, name: str | Path, create: bool = True) -> Path:
        """The sub-folder ``name`` (created when missing with ``create``), refused when it is a link
        or not a folder: overt never writes through a link out of a run directory."""
        path = self.inside(Path(name) / "_").parent
        if not create:
            _check_folder(path, self.path)
            return path
        folder = self.path
        for part in path.relative_to(self.path).parts:
            folder = folder / part
            with contextlib.suppress(FileExistsError):
                folder.mkdir()
            _check_folder(folder, self.path, missing_ok=False)
        return path

    def write_text(self, path: str | Path, text: str) -> None:
        """Write ``text`` to a file of the run directory, atomically, never through a link."""
        from overt.run.atomic import write_text_atomic

        write_text_atomic(self.inside(path), text)

    def write_json(self, path: str | Path, value: Any, *, indent: int | None = 2,
                   default: Callable[[Any], Any] | None = str) -> None:
        """Write ``value`` as strict JSON (:func:`overt.run.layout.dumps_json`), as :meth:`write_text`."""
        self.write_text(path, layout.dumps_json(value, indent=indent, default=default))

    @contextlib.contextmanager
    def atomic(self, path: str | Path) -> Iterator[Path]:
        """A new temporary file beside ``path`` for a writer that needs a path (safetensors, an
        exporter), renamed over ``path`` when the block ends (:func:`overt.run.atomic.atomic_path`)."""
        from overt.run.atomic import atomic_path

        with atomic_path(self.inside(path)) as tmp:
            yield tmp

    def open_append(self, path: str | Path) -> int:
        """A descriptor appending to a file of the run directory (a log); a link there is refused."""
        from overt.run.atomic import open_append

        path = self.inside(path)
        try:
            return open_append(path)
        except OSError:
            if os.path.islink(path):
                raise _link_error(path, self.path, "file") from None
            raise

    def check_no_links(self, folder: str | Path) -> None:
        """Refuse links inside ``folder`` (for a writer that picks its own file names, TensorBoard)."""
        folder = self.inside(Path(folder) / "_").parent
        with contextlib.suppress(FileNotFoundError, NotADirectoryError):
            for entry in os.scandir(folder):
                if entry.is_symlink():
                    raise _link_error(Path(entry.path), self.path, "file")


def _below(path: Path, root: Path) -> bool:
    try:
        path.relative_to(root)
        return True
    except ValueError:
        return False


def _check_folder(folder: Path, root: Path, missing_ok: bool = True) -> None:
    try:
        info = folder.lstat()
    except FileNotFoundError:
        if missing_ok:
            return
        raise
    if stat.S_ISLNK(info.st_mode):
        raise _link_error(folder, root, "folder")
    if not stat.S_ISDIR(info.st_mode):
        raise UnsafePathError(f"{folder} is a file where the run keeps a folder",
                              where=str(root), why="overt writes the run's files into it",
                              fix=f"move {folder} away, then run the command again")


def _link_error(path: Path, root: Path, kind: str) -> UnsafePathError:
    try:
        target = os.readlink(path)
    except OSError:
        target = "?"
    return UnsafePathError(
        f"{path} is a symbolic link (to {target}); overt does not write through links in a run directory",
        where=str(root),
        why="a run directory can come from elsewhere: a planted link would make overt write outside it",
        fix=f"remove the link (rm {path}){' and create the folder' if kind == 'folder' else ''}; to keep a run's "
            "files on another disk, put the whole run directory there (run_dir= or runs_root=)")


def run_dir_for(run_dir: str | None, runs_root: str, name: str | None, recipe: str) -> Path:
    """``run_dir`` if given, else ``runs_root/name``, else ``runs_root/<recipe>-<timestamp>``.
    A ``name`` is one folder name: one that would leave ``runs_root`` (``..``, ``a/b``) is refused."""
    if run_dir:
        return Path(run_dir)
    if name is not None:
        check_name(name, runs_root)
    if not name:
        stem = Path(recipe).stem if recipe.endswith((".py", ".yaml", ".yml")) else recipe.rsplit(".", 1)[-1]
        name = f"{stem}-{time.strftime('%Y%m%d-%H%M%S')}"
    return Path(runs_root) / name


def check_name(name: str, runs_root: str = "runs") -> None:
    """Refuse a run ``name`` that is not one plain folder name inside ``runs_root``."""
    seps = [s for s in (os.sep, os.altsep, "/") if s]
    if name in (".", "..") or any(s in name for s in seps) or "\0" in name or not name.strip():
        raise ConfigError(
            f"name={name!r} is not a folder name",
            why=f"a run's name is the name of its folder inside runs_root ({runs_root}); "
                "a separator, '.' or '..' would put the run somewhere else",
            fix="give a plain name such as name=exp1 (no '/', not '.' or '..'), or choose the folder itself "
                "with run_dir=PATH")


def written_by_overt(path: Path) -> bool:
    """Whether ``path`` holds a run overt wrote: checkpoint folders (``checkpoints/step-NNNNNN``), or
    the lock file overt creates when it claims a run directory together with a record of the run
    (``status.json``/``summary.json`` saying how it went, the inputs or recipe record).  Only such a
    folder is ever suggested for deletion."""
    from overt.run.reader import read_json

    if _has_checkpoints(path):
        return True
    if not (path / lock.LOCK).is_file() or (path / lock.LOCK).is_symlink():
        return False
    return (any("status" in (read_json(path / name) or {}) for name in (SUMMARY, STATUS))
            or any(isinstance(read_json(path / name), dict) for name in (layout.INPUTS, layout.RECIPE_SOURCE)))


def run_status(path: Path) -> str | None:
    """completed / stopped / failed / running / ..., from the run's own files.  A run that says
    ``running`` while no process holds its lock ended without saying so (killed, or its last
    status write failed): that is reported as ``ended abruptly``."""
    from overt.run.reader import read_json

    for name in (SUMMARY, STATUS):
        data = read_json(path / name)
        if data is None:
            continue
        status = str(data.get("status"))
        if status == "running" and lock.holder(path) is None:
            return "ended abruptly"
        return status
    return None


#: files beside config.yaml that make a folder look like a run directory (written by overt, or copied)
_RUN_FILES = (layout.STATUS, layout.SUMMARY, layout.METRICS, layout.CHECKPOINTS, layout.RECIPE_SOURCE, layout.INPUTS,
              layout.WEIGHTS, lock.LOCK)


def enclosing_run(path: str | Path) -> Path | None:
    """The run directory ``path`` lies in (itself or a folder above it that holds ``config.yaml`` and
    another run file), or None.  Liberal on purpose: a copied or downloaded run counts too."""
    folder = Path(os.path.abspath(path))
    for candidate in [folder, *folder.parents][:64]:
        try:
            if (candidate / layout.CONFIG).is_file() and any((candidate / n).exists() for n in _RUN_FILES):
                return candidate
        except OSError:
            continue
    return None


def _has_checkpoints(path: Path) -> bool:
    root = checkpoints_dir(path)
    try:
        return root.is_dir() and any(checkpoint_step(p.name) is not None for p in root.iterdir())
    except OSError:  # unreadable: not counted
        return False


def _contents(path: Path) -> list[Path]:
    return [p for p in path.iterdir() if p.name != lock.LOCK]


def check_claimable(path: Path) -> None:
    """Raise the error :func:`claim` would raise for ``path``, without creating or locking anything
    (so that a bad run directory is reported before any data is loaded)."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise ConfigError(f"run directory {path} is an existing file, not a folder",
                          why="a run writes its config, metrics, checkpoints and weights into a folder",
                          fix="choose another run_dir= (or name=), or move the file away")
    if not path.is_dir():
        return
    info = lock.holder(path)
    if info is not None and not lock.is_held_here(path):
        raise ConfigError(
            f"run directory {path} is in use by another overt process ({lock.describe_holder(info)})",
            why="two processes training one run would overwrite each other's checkpoints and metrics",
            fix="wait for that process to end (or stop it), or use another run directory",
        )
    if not _contents(path):
        return
    if not written_by_overt(path):
        names = sorted(p.name for p in _contents(path))
        shown = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
        raise ConfigError(
            f"run directory {path} is a folder that is not empty and holds no run of overt ({shown})",
            why="a run writes its config, metrics, checkpoints and weights into its own folder; overt will not "
                "mix them into a folder of other files",
            fix="choose a new or empty folder: another name= or run_dir=")
    status = run_status(path)
    if status == "completed":
        fix = "choose another name= or run_dir=, or delete the folder"
    elif _has_checkpoints(path):
        fix = f"to continue that run use `overt resume {path}`; to start over, choose another name= or run_dir="
    else:
        fix = (f"it has no checkpoint to continue from, so start it again: delete the folder (rm -r {path}) "
               "and run the same command, or choose another name= or run_dir=")
    raise ConfigError(
        f"run directory {path} already holds {_describe(status)}",
        why="writing a new run into it would mix two runs' metrics and weights",
        fix=fix,
    )


def _describe(status: str | None) -> str:
    if status == "completed":
        return "a finished run"
    if status == "ended abruptly":
        return "a run that ended abruptly (its process was killed, or could not record how it ended)"
    return f"a {status} run" if status else "a previous run"


def claim(path: Path, *, unique: bool = False) -> RunDir:
    """Create ``path`` for a new run and return it as a :class:`RunDir` holding its lock (the caller
    owns it: ``run.lock().release()`` when done); refuse one that already holds a run, or that
    another process holds.  With ``unique`` (a generated name) an existing folder of that name is
    not an error: ``-2``, ``-3``, ... is appended until a new folder is created."""
    path = Path(path)
    if unique:
        path = _new_folder(path)
    check_claimable(path)
    path.mkdir(parents=True, exist_ok=True)
    run = RunDir(path)
    run.lock().acquire()  # raises, naming the holder, when another process got here first
    try:
        check_claimable(path)  # again, under the lock: another process may have written it meanwhile
    except ConfigError:
        run.lock().release()
        raise
    return run


def _new_folder(path: Path) -> Path:
    """Create a folder at ``path`` or, when it exists, at ``path-2``, ``path-3``...; atomic (mkdir)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    candidate, n = path, 1
    while True:
        try:
            candidate.mkdir()
            return candidate
        except FileExistsError:
            n += 1
            candidate = path.with_name(f"{path.name}-{n}")
