"""partial-resume and a scheduler built at its place in the schedule (``last_epoch=start_epoch - 1``): the
constructor restores the schedule's position, so the finding names only what is lost (lint corpus, issue 33)."""

from __future__ import annotations

from pathlib import Path

from overt.lint.engine import lint_file

HERE = Path(__file__).parent / "fixtures" / "partial-resume"


def test_a_positioned_schedule_is_not_said_to_restart() -> None:
    res = lint_file(HERE / "bad_positioned_schedule.py")
    (finding,) = [f for f in res.findings if f.slug == "partial-resume"]
    assert "momentum" in finding.message and "`opt`" in finding.message
    assert "first value" not in finding.message and "`sched`" not in finding.message


def test_a_schedule_built_from_its_start_is_still_named(tmp_path: Path) -> None:
    src = (HERE / "bad_positioned_schedule.py").read_text().replace(", last_epoch=start_epoch - 1", "")
    (tmp_path / "train.py").write_text(src)
    res = lint_file(tmp_path / "train.py")
    (finding,) = [f for f in res.findings if f.slug == "partial-resume"]
    assert "first value" in finding.message and "`sched`" in finding.message


def test_last_epoch_minus_one_is_a_schedule_from_its_start(tmp_path: Path) -> None:
    src = (HERE / "bad_positioned_schedule.py").read_text().replace("last_epoch=start_epoch - 1", "last_epoch=-1")
    (tmp_path / "train.py").write_text(src)
    res = lint_file(tmp_path / "train.py")
    (finding,) = [f for f in res.findings if f.slug == "partial-resume"]
    assert "`sched`" in finding.message
