"""Two gloo processes through overt.Trainer with a run directory: SIGTERM to one rank stops both at
the same step, only rank 0 writes (DDP), and resuming the stop checkpoint ends bit-identical to an
uninterrupted run (DDP and FSDP2)."""

from __future__ import annotations

import os
import signal
import sys

import pytest
import torch.distributed as dist

from tests.distributed.procs import build_trainer, run_ranks, whole_weights

pytestmark = pytest.mark.skipif(not dist.is_available() or not dist.is_gloo_available(),
                                reason="torch.distributed with gloo is not available")


class _Term:
    """Rank 1 sends itself SIGTERM after optimizer step 4."""

    def on_step_end(self, trainer, logs):
        if trainer.rank == 1 and trainer.state.global_step == 4:
            os.kill(os.getpid(), signal.SIGTERM)

    def __getattr__(self, name):  # every other hook: nothing
        if name.startswith("on_"):
            return lambda *a: None
        raise AttributeError(name)


def _writes_under(root, path, mode, flags) -> bool:
    """An "open" audit event that writes under ``root``: ``open(path, "w")`` (a mode string) or
    ``os.open(name, O_WRONLY|..., dir_fd=folder)`` (flags; the run directory's safe writes open a bare
    name inside a folder's descriptor, so a relative name counts as the run directory's)."""
    if not isinstance(path, str) or not (path.startswith(root) or not os.path.isabs(path)):
        return False
    if isinstance(mode, str):
        return any(c in mode for c in "wax+")
    return isinstance(flags, int) and bool(flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND))


def _scenario(rank, world, out_dir, strategy):
    from overt.checkpoint import resume
    from overt.engine.callbacks import Callback

    writes = []
    root = str(out_dir)
    sys.addaudithook(lambda event, args: writes.append(str(args[0])) if event == "open" and _writes_under(root, *args)
                     else None)

    term = type("Term", (Callback,), {"on_step_end": _Term.on_step_end})()
    stopped = build_trainer(out_dir / "run", strategy, [term])
    summary = stopped.fit()
    result = {"stopped_at": stopped.state.global_step, "preempted": summary.get("preempted"),
              "saved": summary["checkpoint"]["saved"], "writes": sorted(set(writes))}
    writes.clear()
    resumed = build_trainer(out_dir / "run", strategy)
    resume(resumed)
    resumed.fit()
    result["resumed"] = whole_weights(resumed)
    plain = build_trainer(out_dir / "plain", strategy)
    plain.fit()
    result["plain"] = whole_weights(plain)
    return result


@pytest.fixture(scope="module", params=["ddp", "fsdp"])
def ranks(request, tmp_path_factory):
    return request.param, run_ranks(_scenario, tmp_path_factory.mktemp(f"stop-{request.param}"), request.param)


def test_sigterm_to_one_rank_stops_every_rank_at_the_same_step_and_saves_once(ranks):
    _, results = ranks
    steps = {r["stopped_at"] for r in results}
    assert steps == {6}  # the signal came after step 4; the ranks agreed at the next log point (step 6)
    for r in results:
        assert r["preempted"]["signal"] == "SIGTERM" and r["preempted"]["exit_code"] == 143
        assert r["preempted"]["checkpoint"].endswith("step-000006")


def test_only_rank_0_writes_the_run_directory(ranks):
    strategy, results = ranks
    assert any(w.endswith("summary.json") or "status.json" in w for w in results[0]["writes"])
    if strategy == "ddp":
        assert results[1]["writes"] == []
    else:  # FSDP2: every rank writes its own checkpoint shards, nothing else
        assert results[1]["writes"] and all("/dcp/" in w for w in results[1]["writes"])


def test_resumed_run_is_bit_identical_to_an_uninterrupted_one(ranks):
    _, results = ranks
    for r in results:
        assert r["resumed"] == r["plain"]
