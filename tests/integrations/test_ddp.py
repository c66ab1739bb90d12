"""``OvertCallback`` and ``OvertTrainerCallback`` under two gloo CPU processes.

Lightning runs its ``strategy="ddp"`` (``devices=2``) and the Hugging Face ``Trainer`` its
Accelerate DDP, each in two processes that torch's spawn forks as torchrun would start them
(``RANK``, ``WORLD_SIZE``, ... set; the process group already initialised, which both
frameworks then use).  Every scenario runs once per module, in the same two processes.
``tests/integrations/test_ddp_launch.py`` (slow) starts the same projects with the frameworks'
own launchers (Lightning's, torchrun).
"""

from __future__ import annotations

import io
import json
import os

import pytest
import torch
import torch.distributed as dist

from tests.conftest import TIMING

pytest.importorskip("lightning")

from tests.distributed.procs import run_ranks  # noqa: E402

pytestmark = pytest.mark.skipif(not dist.is_available() or not dist.is_gloo_available(),
                                reason="torch.distributed with gloo is not available")

LIGHTNING_BUGS = {"softmax-ce": "softmax-before-cross-entropy", "eval-in-train-mode": "train-mode-in-eval",
                  "manual-no-zero-grad": "stale-gradients", "frozen-mismatch": "params-not-optimized"}
HF_BUGS = {"softmax-ce": "softmax-before-cross-entropy", "frozen-mismatch": "params-not-optimized",
           "plain-list": "unregistered-submodule"}


class Collectives:
    """How many collectives and host reads of tensors this process makes while it is on (a count:
    every call still goes through)."""

    NAMES = ("all_reduce", "all_gather", "all_gather_object", "gather_object", "broadcast", "broadcast_object_list",
             "barrier", "reduce_scatter_tensor", "all_gather_into_tensor")

    def __init__(self):
        self.n = 0
        self.saved: dict = {}

    def _wrap(self, owner, name):
        original = getattr(owner, name)
        self.saved[(owner, name)] = original

        def counted(*args, **kwargs):
            self.n += 1
            return original(*args, **kwargs)

        setattr(owner, name, counted)

    def __enter__(self):
        for name in self.NAMES:
            self._wrap(dist, name)
        for name in ("item", "tolist"):
            self._wrap(torch.Tensor, name)
        return self

    def __exit__(self, *exc):
        for (owner, name), original in self.saved.items():
            setattr(owner, name, original)


def _params(module) -> list[list[float]]:
    return [p.detach().flatten()[:8].tolist() for p in module.parameters()]


# -- Lightning ---------------------------------------------------------------------------
def _lightning(rank, world, out_dir):
    os.environ["GROUP_RANK"] = "0"  # with RANK, LOCAL_RANK, LOCAL_WORLD_SIZE: Lightning sees a torchrun worker
    from overt.integrations.lightning import OvertCallback
    from tests.integrations.projects import lightning_digits

    def fit(bug, name, overt=True, **kw):
        stream = io.StringIO()
        callbacks = [OvertCallback(stream=stream, **kw)] if overt else []
        trainer, module = lightning_digits.fit(bug, callbacks=callbacks, root=str(out_dir / name), strategy="ddp",
                                               devices=2)
        findings = [f.to_dict() for f in callbacks[0].findings] if overt else []
        return {"findings": findings, "stream": stream.getvalue(), "step": trainer.global_step,
                "epoch": trainer.current_epoch, "world": trainer.world_size, "params": _params(module)}

    results = {"clean": fit(None, "clean", ignore=sorted(TIMING)), "plain": fit(None, "plain", overt=False)}
    for bug in LIGHTNING_BUGS:
        results[bug] = fit(bug, bug)
    results["stop"] = fit("manual-no-zero-grad", "stop", stop_on_error=True)
    counts = {}
    # 3 and 6 epochs: the first three passes over a data set re-arm the forward checks (each may read a
    # value more); after them nothing of overt's grows with the steps
    for name, overt, epochs in (("alone-3", False, 3), ("overt-3", True, 3), ("alone-6", False, 6),
                                ("overt-6", True, 6)):
        with Collectives() as c:
            lightning_digits.fit(None, callbacks=[OvertCallback(stream=io.StringIO())] if overt else [],
                                 root=str(out_dir / name), strategy="ddp", devices=2, epochs=epochs, logger=False)
        counts[name] = c.n
    results["counts"] = counts
    return results


@pytest.fixture(scope="module")
def lightning_ranks(tmp_path_factory):
    out = tmp_path_factory.mktemp("lightning-ddp")
    return out, run_ranks(_lightning, out)


def _report(root):
    (path,) = list(root.rglob("guards.json"))  # written once
    assert not [p for p in path.parent.iterdir() if p.name.startswith(".guards.json")]  # no temporary left
    return path, json.loads(path.read_text())


def test_lightning_ddp_clean_run_is_quiet_and_trains_as_without_overt(lightning_ranks):
    out, ranks = lightning_ranks
    for rank in ranks:
        assert rank["clean"]["world"] == 2 and rank["clean"]["findings"] == []
        assert rank["clean"]["params"] == rank["plain"]["params"]  # training unchanged
        assert rank["clean"]["step"] == rank["plain"]["step"] == 16
    assert ranks[0]["clean"]["stream"].strip() == "overt guard: no findings."
    assert ranks[1]["clean"]["stream"] == ""  # the other ranks check silently
    path, report = _report(out / "clean")
    assert path.parent.name == "version_0" and report == {"findings": []}  # trainer.log_dir, as one process


@pytest.mark.parametrize("bug", list(LIGHTNING_BUGS))
def test_lightning_ddp_planted_bug_reported_once_on_rank_0_naming_both_ranks(lightning_ranks, bug):
    out, ranks = lightning_ranks
    slug = LIGHTNING_BUGS[bug]
    mine = [f for f in ranks[0][bug]["findings"] if f["slug"] == slug]
    assert len(mine) == 1 and mine[0]["details"]["ranks"] == [0, 1]
    assert 0 <= mine[0]["step"] <= ranks[0][bug]["step"]  # the trainer's global_step
    assert slug in {f["slug"] for f in ranks[1][bug]["findings"]}  # found on rank 1 too, kept there
    path, report = _report(out / bug)
    assert [f for f in report["findings"] if f["slug"] == slug] == mine
    assert slug in ranks[0][bug]["stream"] and ranks[1][bug]["stream"] == ""
    rows = (path.parent / "metrics.csv").read_text()
    assert "overt/findings" in rows  # the logger got the counts (rank 0's CSVLogger)
    assert not any(f["slug"] in ("ddp-out-of-sync", "unsharded-sampler", "eval-mode-in-train", "dropout-always-on")
                   for f in ranks[0][bug]["findings"])  # the DDP wrapper is seen through


def test_lightning_ddp_stop_on_error_stops_both_ranks_at_the_same_step(lightning_ranks):
    _, ranks = lightning_ranks
    steps = {r["stop"]["step"] for r in ranks}
    assert len(steps) == 1 and steps.pop() < 16  # stopped early, together, without a hang


def test_lightning_ddp_overts_collectives_and_host_reads_do_not_grow_with_the_steps(lightning_ranks):
    _, ranks = lightning_ranks
    for rank in ranks:
        c = rank["counts"]
        # the warm-up checks, the first passes' looks and one gather at the end: as many for 24 steps as for 48
        assert c["overt-6"] - c["alone-6"] == c["overt-3"] - c["alone-3"]


# -- Hugging Face Trainer -------------------------------------------------------------------
def _hf(rank, world, out_dir):
    from overt.integrations.hf import OvertTrainerCallback
    from tests.integrations.projects import hf_digits

    _fresh_accelerate_state()

    def train(bug, name, overt=True, **kw):
        stream = io.StringIO()
        callbacks = [OvertTrainerCallback(stream=stream, **kw)] if overt else []
        trainer = hf_digits.build(bug, out_dir=str(out_dir / name), callbacks=callbacks)
        trainer.train()
        return {"findings": [f.to_dict() for f in callbacks[0].findings] if overt else [],
                "stream": stream.getvalue(), "step": trainer.state.global_step, "world": trainer.args.world_size,
                "history": trainer.state.log_history, "params": _params(trainer.model)}

    results = {"clean": train(None, "clean", ignore=sorted(TIMING)), "plain": train(None, "plain", overt=False)}
    for bug in HF_BUGS:
        results[bug] = train(bug, bug)
    results["stop"] = train("softmax-ce", "stop", stop_on_error=True)
    return results


@pytest.fixture(scope="module")
def hf_ranks(tmp_path_factory):
    pytest.importorskip("transformers")
    pytest.importorskip("datasets")
    import transformers  # noqa: F401  once here, inherited by both forked processes

    out = tmp_path_factory.mktemp("hf-ddp")
    return out, run_ranks(_hf, out)


def _losses(history):
    return [{k: v for k, v in e.items() if k in ("loss", "eval_loss", "grad_norm", "step")}
            for e in history if "loss" in e or "eval_loss" in e]


def test_hf_ddp_clean_run_is_quiet_and_trains_as_without_overt(hf_ranks):
    out, ranks = hf_ranks
    for rank in ranks:
        assert rank["clean"]["world"] == 2 and rank["clean"]["findings"] == []
        assert rank["clean"]["params"] == rank["plain"]["params"]
        assert _losses(rank["clean"]["history"]) == _losses(rank["plain"]["history"])
    assert ranks[0]["clean"]["stream"].strip() == "overt guard: no findings." and ranks[1]["clean"]["stream"] == ""
    path, report = _report(out / "clean")
    assert path.parent == out / "clean" and report == {"findings": []}  # args.output_dir


@pytest.mark.parametrize("bug", list(HF_BUGS))
def test_hf_ddp_planted_bug_reported_once_on_rank_0_naming_both_ranks(hf_ranks, bug):
    out, ranks = hf_ranks
    slug = HF_BUGS[bug]
    mine = [f for f in ranks[0][bug]["findings"] if f["slug"] == slug]
    assert len(mine) == 1 and mine[0]["details"]["ranks"] == [0, 1]
    assert 0 <= mine[0]["step"] <= ranks[0][bug]["step"]  # state.global_step
    _, report = _report(out / bug)
    assert [f for f in report["findings"] if f["slug"] == slug] == mine
    logged = [e for e in ranks[0][bug]["history"] if "overt/findings" in e]
    assert logged and logged[0]["overt/findings"] >= 1
    assert not any("overt/findings" in e for e in ranks[1][bug]["history"])  # the main process logs
    # Accelerate's BatchSamplerShard splits the batches: not an unsharded sampler
    assert not any(f["slug"] in ("unsharded-sampler", "ddp-out-of-sync") for f in ranks[0][bug]["findings"])


def test_hf_ddp_stop_on_error_stops_both_ranks_at_the_same_step(hf_ranks):
    _, ranks = hf_ranks
    steps = {r["stop"]["step"] for r in ranks}
    assert len(steps) == 1 and steps.pop() < 16


# -- an Accelerate loop with overt.guard --------------------------------------------------------
ACCELERATE_BUGS = {"no-zero-grad": "stale-gradients", "eval-in-train-mode": "train-mode-in-eval",
                   "softmax-ce": "softmax-before-cross-entropy", "frozen-mismatch": "params-not-optimized"}


def _fresh_accelerate_state() -> None:
    """Forget the single-process Accelerate state a test before may have left in the parent
    (the forked processes inherit it, and Accelerate would not shard their loaders)."""
    from accelerate.state import AcceleratorState

    AcceleratorState._reset_state(reset_partial_state=True)


def _accelerate(rank, world, out_dir):
    from overt.guards import GuardError
    from tests.integrations.projects import accelerate_loop

    _fresh_accelerate_state()

    def train(bug, guard=True, **kw):
        stream = io.StringIO()
        result = accelerate_loop.train(bug, guard=guard, stream=stream, **kw)
        return {"findings": [f.to_dict() for f in result["findings"]], "losses": result["losses"],
                "stream": stream.getvalue()}

    results = {"clean": train(None, ignore=sorted(TIMING)), "plain": train(None, guard=False)}
    for bug in ACCELERATE_BUGS:
        results[bug] = train(bug, stop_on_error=False)
    try:
        train("no-zero-grad")  # stop_on_error=True, overt.guard's default
        results["stop"] = None
    except GuardError as exc:
        results["stop"] = exc.finding.step
    return results


@pytest.fixture(scope="module")
def accelerate_ranks(tmp_path_factory):
    pytest.importorskip("accelerate")
    import accelerate  # noqa: F401  once here, inherited by both forked processes

    return run_ranks(_accelerate, tmp_path_factory.mktemp("accelerate-ddp"))


def test_accelerate_ddp_clean_loop_is_quiet_and_trains_as_without_overt(accelerate_ranks):
    for rank in accelerate_ranks:
        assert rank["clean"]["findings"] == [] and rank["clean"]["losses"] == rank["plain"]["losses"]


@pytest.mark.parametrize("bug", list(ACCELERATE_BUGS))
def test_accelerate_ddp_planted_bug_found_on_every_rank(accelerate_ranks, bug):
    for rank in accelerate_ranks:  # overt.guard reports per process (no gather): each rank names its bug
        assert [f["slug"] for f in rank[bug]["findings"]] == [ACCELERATE_BUGS[bug]]


def test_accelerate_ddp_guard_error_stops_both_ranks_at_the_same_step(accelerate_ranks):
    stops = [rank["stop"] for rank in accelerate_ranks]
    assert stops[0] is not None and stops[0] == stops[1]  # both raised GuardError, same step: no hang
