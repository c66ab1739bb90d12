"""Run one wild case through overt's faces and collect what each one reports.

A case (``tests/wild/cases/wNN_*.py``) is a module with:

* a docstring naming the public report it comes from (URL / issue number) and, where the
  bug needs a GPU or a framework, how its effect is simulated on CPU;
* ``SLUGS``: the catalog slugs that count as catching it (a finding with another slug on
  the buggy program is reported but does not count as a catch);
* ``script(bug: bool) -> str``: a standalone training script (sklearn digits, CPU, seconds),
  the buggy one for ``bug=True`` and its correct twin for ``bug=False``.  A line
  ``#@guard`` marks where ``overt.guard(model, opt)`` goes for the ``guard`` face (after the
  model and optimizer exist); the face closes the guard at the end of the script;
* optionally ``setup(bug: bool) -> dict`` with ``model``, ``optimizer``, ``loss_fn``,
  ``train_data``, ``val_data`` (and engine settings under ``settings``) for the ``engine``
  face (``overt.Trainer``) and the ``doctor`` face (``overt.doctor``);
* optionally ``WORLD = 2``: the script runs on two gloo processes (the ``run`` face only);
* for the cases added for issue 33: ``REPORT`` (the report's id in ``tests/wild/split.json``),
  ``MECHANISM`` (a key of ``tests/wild/mechanisms.json``, whose slugs also name the cause, so a
  catalog entry added later counts without editing the case), ``METRIC`` (name, bug value, twin
  value, as measured with plain ``python``) and a script that ends by printing ``METRIC <value>``.

The faces: ``engine`` (guards inside ``overt.Trainer``), ``guard`` (``overt.guard``), ``run``
(``overt run script.py``, in-process), ``lint`` (``overt lint``), ``doctor``.  A face
*catches* the bug when it reports one of ``SLUGS`` (the doctor: a probe failing or warning
with such a finding, or failing outright for the data probe's leakage); any finding at all on
the twin is a false positive.
"""

from __future__ import annotations

import contextlib
import importlib
import io
import json
import os
import pkgutil
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from tests.conftest import TIMING

FACES = ("engine", "guard", "run", "lint", "doctor")

#: findings that measure time (tests.conftest.TIMING: a starved loader on a busy machine) are reported by
#: the runner, but are neither a catch nor a false positive -- they depend on the machine's load


@dataclass
class FaceResult:
    """What one face said about one program."""

    applies: bool
    slugs: list[str] = field(default_factory=list)
    error: str = ""

    @property
    def judged(self) -> list[str]:
        """The slugs that count (timing findings left out)."""
        return [s for s in self.slugs if s not in TIMING]


def cases() -> list[ModuleType]:
    """Every case module, in file order."""
    from tests.wild import cases as pkg

    names = sorted(m.name for m in pkgutil.iter_modules(pkg.__path__) if m.name.startswith("w"))
    return [importlib.import_module(f"tests.wild.cases.{n}") for n in names]


def case_id(case: ModuleType) -> str:
    return case.__name__.rsplit(".", 1)[-1]


def _write(tmp: Path, text: str, name: str = "train.py") -> Path:
    path = tmp / name
    path.write_text(text)
    return path


@contextlib.contextmanager
def _quiet():
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        yield out, err


@contextlib.contextmanager
def _in_dir(path: Path):
    """Run a case's script with ``path`` as the working directory, as ``tests.wild.metrics`` does: what a script
    writes by a relative name (a checkpoint, a feature cache) lands in the case's temporary folder, never in the
    directory the runner was started from (the repository)."""
    before = os.getcwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(before)


@contextlib.contextmanager
def _one_thread():
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def lint_face(case: ModuleType, bug: bool) -> FaceResult:
    """``overt lint script.py`` as a user runs it: the findings at the default levels (``info`` is style and
    hidden unless asked for)."""
    from overt.lint.config import LintConfig
    from overt.lint.engine import lint_file

    with tempfile.TemporaryDirectory() as d:
        res = lint_file(_write(Path(d), case.script(bug)))
    if res.error is not None:
        return FaceResult(True, error=str(res.error))
    return FaceResult(True, [f.slug for f in LintConfig().present(res.findings)])


def _run_script(path: Path, report: Path) -> tuple[int, str]:
    from overt.guards import run_cli

    saved = sys.argv[:], sys.path[0], sys.modules["__main__"]
    try:
        with _quiet() as (_, err):
            code = run_cli.main(["--report", str(report), str(path)])
    finally:
        sys.argv, sys.path[0], sys.modules["__main__"] = saved
    return code, err.getvalue()


def _report_slugs(report: Path) -> list[str]:
    if not report.exists():
        return []
    data = json.loads(report.read_text())
    return [f["slug"] for f in data.get("findings", [])]


def _rank_run(rank: int, world: int, out_dir: Path, script: str) -> list[str]:
    from overt.guards import run_cli

    path = _write(out_dir, script, f"train{rank}.py")
    report = out_dir / f"report{rank}.json"
    with _quiet():
        run_cli.main(["--report", str(report), str(path)])
    return _report_slugs(report) if rank == 0 else []


def run_face(case: ModuleType, bug: bool) -> FaceResult:
    with tempfile.TemporaryDirectory() as d, _one_thread():
        tmp = Path(d)
        if getattr(case, "WORLD", 1) > 1:
            from tests.distributed.procs import run_ranks

            results = run_ranks(_rank_run, tmp / "ranks", case.script(bug), world=case.WORLD)
            return FaceResult(True, results[0])
        path = _write(tmp, case.script(bug))
        report = tmp / "report.json"
        with _in_dir(tmp):
            code, err = _run_script(path, report)
        slugs = _report_slugs(report)
        error = "" if code == 0 or slugs else err[-800:]
        return FaceResult(True, slugs, error)


def guarded_script(text: str) -> str | None:
    """The script with ``overt.guard(model, opt)`` at its ``#@guard`` line, closed at the end."""
    lines = text.split("\n")
    marks = [i for i, line in enumerate(lines) if line.strip() == "#@guard"]
    if not marks:
        return None
    i = marks[0]
    indent = lines[i][: len(lines[i]) - len(lines[i].lstrip())]
    lines[i] = f"{indent}import overt as _overt; _G = _overt.guard(model, opt, report_path=_REPORT)"
    lines.append("_G.report()")
    return "\n".join(lines)


def guard_face(case: ModuleType, bug: bool) -> FaceResult:
    text = guarded_script(case.script(bug))
    if text is None or getattr(case, "WORLD", 1) > 1:
        return FaceResult(False)
    with tempfile.TemporaryDirectory() as d, _one_thread():
        tmp = Path(d)
        report = tmp / "report.json"
        path = _write(tmp, text.replace("_REPORT", repr(str(report))))
        with _in_dir(tmp):
            code, err, stopped = _run_plain(path)
        slugs = _report_slugs(report) + stopped
        return FaceResult(True, slugs, "" if code == 0 or slugs else err[-800:])


def _run_plain(path: Path) -> tuple[int, str, list[str]]:
    """Run the script as ``python script.py`` would, in-process (no guards of overt run's).
    Returns the exit code, stderr and the slug of a guard that stopped the run (if one did)."""
    from overt.guards.script import run_as_main

    saved = sys.argv[:], sys.path[0], sys.modules["__main__"]
    code = 0
    stopped: list[str] = []
    try:
        with _quiet() as (_, err):
            try:
                run_as_main(str(path), [])
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else 1
            except BaseException as exc:  # the script's error (a guard that stopped it included)
                finding = getattr(exc, "finding", None)
                if finding is not None:
                    stopped.append(finding.slug)
                print(f"{type(exc).__name__}: {exc}", file=sys.stderr)
                code = 1
    finally:
        _close_guards()
        sys.argv, sys.path[0], sys.modules["__main__"] = saved
    return code, err.getvalue(), stopped


def _close_guards() -> None:
    """A script that raised left its ``overt.guard`` open: close it (hooks and patches removed)."""
    main = sys.modules.get("__main__")
    g = getattr(main, "_G", None)
    if g is not None and not g.session.closed:
        g.session.close()


def engine_face(case: ModuleType, bug: bool) -> FaceResult:
    if not hasattr(case, "setup"):
        return FaceResult(False)
    import overt

    s = case.setup(bug)
    settings = {"epochs": 2, "batch_size": 64, "progress": "off", **s.get("settings", {})}
    with _quiet() as (_, err), _one_thread():
        try:
            summary = overt.Trainer(s["model"], s["optimizer"], s["loss_fn"], s["train_data"], s.get("val_data"),
                                    **settings).fit()
        except Exception as exc:  # a guard that stopped the run names its finding
            finding = getattr(exc, "finding", None)
            if finding is not None:
                return FaceResult(True, [finding.slug])
            return FaceResult(True, error=f"{type(exc).__name__}: {exc}")
    return FaceResult(True, [f["slug"] for f in summary.get("findings", [])])


def doctor_face(case: ModuleType, bug: bool) -> FaceResult:
    if not hasattr(case, "setup"):
        return FaceResult(False)
    import overt

    s = case.setup(bug)
    settings = {"batch_size": 64, "overfit_time_s": 600.0, **s.get("doctor", {})}  # steps decide, not load
    with _quiet(), _one_thread():
        try:
            r = overt.doctor(s["model"], s["optimizer"], s["loss_fn"], s["train_data"], s.get("val_data"),
                             progress=False, **settings)
        except Exception as exc:
            return FaceResult(True, error=f"{type(exc).__name__}: {exc}")
    from overt.doctor.result import Verdict

    slugs = [f.slug for p in r.probes if p.verdict in (Verdict.WARN, Verdict.FAIL) for f in p.findings]
    slugs += [f"probe:{p.name}:{p.verdict.value}" for p in r.probes if p.verdict is Verdict.FAIL]
    return FaceResult(True, slugs)


RUNNERS = {"engine": engine_face, "guard": guard_face, "run": run_face, "lint": lint_face, "doctor": doctor_face}


def mechanisms() -> dict[str, list[str]]:
    """``tests/wild/mechanisms.json``: MECHANISM key -> the catalog slugs that name that cause."""
    data = json.loads(Path(__file__).with_name("mechanisms.json").read_text(), object_pairs_hook=_unique_keys)
    return {k: v for k, v in data.items() if not k.startswith("_")}


def _unique_keys(pairs: list[tuple[str, object]]) -> dict[str, object]:
    """A JSON object whose keys are unique: json.loads keeps the last of two equal keys without a word, so a
    mechanism listed twice (once empty, once with its slugs) would count as whichever came last."""
    seen: dict[str, object] = {}
    for key, value in pairs:
        if key in seen:
            raise ValueError(f"tests/wild/mechanisms.json lists {key!r} twice: keep one entry with all its slugs")
        seen[key] = value
    return seen


def cause_slugs(case: ModuleType) -> frozenset[str]:
    """The slugs that name the case's cause: its ``SLUGS`` and those of its ``MECHANISM``."""
    extra = mechanisms().get(getattr(case, "MECHANISM", ""), [])
    return frozenset(case.SLUGS) | frozenset(extra)


def report_id(case: ModuleType) -> str:
    """The id the held-out split uses: ``REPORT`` (N01...) for the new cases, ``wNN`` for the old."""
    return getattr(case, "REPORT", case_id(case)[:3])


def half(case: ModuleType) -> str:
    """The case's half in the committed split (tests/wild/split.json): ``"dev"`` or ``"test"`` for
    round one (w01-w54), ``"dev2"`` or ``"test2"`` for round two (N29-N52), ``"dev3"`` or ``"test3"``
    for round three (N53-N76), ``"dev4"`` or ``"test4"`` for round four (N77-N100), ``"dev5"`` or
    ``"test5"`` for round five (N101-N124), ``"dev6"`` or ``"test6"`` for round six (N125-N148), ``"dev7"``
    or ``"test7"`` for round seven (N149-N168), ``"dev8"`` or ``"test8"`` for round eight (N169-N188), ``"dev9"``
    or ``"test9"`` for round nine (N189-N208), ``"dev10"`` or ``"test10"`` for round ten (N209-N228), ``"dev11"``
    or ``"test11"`` for round eleven (N229-N248), ``"dev12"`` or ``"test12"`` for round twelve (N249-N268), ``"dev13"``
    or ``"test13"`` for round thirteen (N269-N288), ``"dev14"`` or ``"test14"`` for round fourteen (N289-N308),
    ``"dev15"`` or ``"test15"`` for round fifteen (N309-N328), ``"dev16"`` or ``"test16"`` for round sixteen
    (N329-N348), ``"dev17"`` or ``"test17"`` for round seventeen (N349-N368), ``"dev18"`` or ``"test18"`` for round
    eighteen (N369-N388), ``"dev19"`` or ``"test19"`` for round nineteen (N389-N408), ``"dev20"`` or ``"test20"``
    for round twenty (N409-N428), ``"dev21"`` or ``"test21"`` for round twenty-one (N429-N448)."""
    split = json.loads(Path(__file__).with_name("split.json").read_text())
    rid = report_id(case)
    for name in ("test", "dev2", "test2", "dev3", "test3", "dev4", "test4", "dev5", "test5", "dev6", "test6",
                 "dev7", "test7", "dev8", "test8", "dev9", "test9", "dev10", "test10", "dev11", "test11",
                 "dev12", "test12", "dev13", "test13", "dev14", "test14", "dev15", "test15",
                 "dev16", "test16", "dev17", "test17", "dev18", "test18", "dev19", "test19",
                 "dev20", "test20", "dev21", "test21"):
        if rid in split.get(name, ()):
            return name
    return "dev"


def caught(case: ModuleType, result: FaceResult) -> bool:
    """Whether ``result`` (on the buggy program) names the case's cause."""
    wanted = cause_slugs(case)
    return any(s in wanted for s in result.slugs)


def verdict(case: ModuleType, results: list[FaceResult]) -> str:
    """What the faces said about the buggy program together: ``"cause"`` when one named the cause,
    ``"symptom"`` when they reported only other (non-timing) findings, ``"-"`` when nothing."""
    if any(caught(case, r) for r in results):
        return "cause"
    return "symptom" if any(r.judged for r in results) else "-"


def evaluate(case: ModuleType, faces: tuple[str, ...] = FACES) -> dict[str, dict[str, Any]]:
    """Each face's result on the bug and on its twin: {face: {"bug": FaceResult, "twin": FaceResult}}."""
    return {face: {"bug": RUNNERS[face](case, True), "twin": RUNNERS[face](case, False)} for face in faces}
