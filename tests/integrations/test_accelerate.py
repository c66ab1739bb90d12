"""``overt.guard`` on what ``accelerator.prepare`` returns, and on DDP-wrapped modules."""

from __future__ import annotations

import gc
import io

import pytest
import torch
from torch import nn

from tests.conftest import correctness_findings

pytest.importorskip("accelerate")

import overt  # noqa: E402
from overt.guards.unwrap import unwrap_model, unwrap_optimizer  # noqa: E402
from tests.integrations.projects import accelerate_loop  # noqa: E402


def test_accelerated_optimizer_is_not_a_hookable_optimizer():
    """The bug this fixes: PyTorch's own hook registration fails on Accelerate's wrapper."""
    from accelerate import Accelerator

    model = nn.Linear(4, 2)
    _, opt = Accelerator(cpu=True).prepare(model, torch.optim.SGD(model.parameters(), lr=0.1))
    with pytest.raises(AttributeError, match="_optimizer_step_pre_hooks"):
        opt.register_step_pre_hook(lambda *a: None)
    assert unwrap_optimizer(opt) is opt.optimizer


def test_guard_accepts_accelerate_objects_and_a_clean_loop_is_quiet():
    out = io.StringIO()
    result = accelerate_loop.train(None, stream=out)
    assert correctness_findings(result["findings"]) == []
    assert "internal error" not in out.getvalue()


@pytest.mark.parametrize("bug, slug", [
    ("no-zero-grad", "stale-gradients"),
    ("eval-in-train-mode", "train-mode-in-eval"),
    ("softmax-ce", "softmax-before-cross-entropy"),
    ("frozen-mismatch", "params-not-optimized"),
])
def test_planted_bugs_are_found_through_accelerate(bug, slug):
    result = accelerate_loop.train(bug, stream=io.StringIO(), stop_on_error=False)
    assert slug in {f.slug for f in result["findings"]}


def test_metrics_identical_with_and_without_the_guards():
    plain = accelerate_loop.train(None, guard=False)
    guarded = accelerate_loop.train(None, stream=io.StringIO())
    assert plain["losses"] == guarded["losses"]
    assert plain["val_loss"] == guarded["val_loss"]


def test_an_object_the_guards_cannot_watch_does_not_stop_training():
    out = io.StringIO()
    model = nn.Linear(4, 2)

    class NotAnOptimizer:
        def step(self):
            pass

    g = overt.guard(model, NotAnOptimizer(), stream=out)
    model(torch.randn(3, 4)).sum().backward()
    assert g.report(quiet=True) == []
    assert "internal error in watch_optimizer(NotAnOptimizer)" in out.getvalue()


def test_ddp_wrapped_model_is_unwrapped(tmp_path):
    import torch.distributed as dist

    from tests.guards.helpers import batches, mlp

    dist.init_process_group("gloo", init_method=f"file://{tmp_path}/store", rank=0, world_size=1)
    try:
        inner = mlp(dropout=0.2)
        ddp = nn.parallel.DistributedDataParallel(inner)
        assert unwrap_model(ddp) is inner
        opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
        out = io.StringIO()
        g = overt.guard(ddp, opt, stream=out, stop_on_error=False)
        for x, y in batches(n=8):
            nn.functional.cross_entropy(ddp(x), y).backward()
            opt.step()  # planted: no zero_grad
        slugs = {f.slug for f in g.report(quiet=True)}
        assert "stale-gradients" in slugs
        assert "DistributedDataParallel" not in out.getvalue().split("stale-gradients")[1].split("\n")[0]
    finally:
        # DDP's reducer holds the process group: freed after destroy_process_group(), gloo's destructor
        # joins its threads and can hang (seen once in a full suite run): free it while the group lives
        ddp = g = opt = None  # noqa: F841
        gc.collect()
        dist.destroy_process_group()


def test_dataparallel_is_unwrapped_and_a_user_submodule_named_module_is_not():
    inner = nn.Linear(3, 3)

    class Holder(nn.Module):
        def __init__(self):
            super().__init__()
            self.module = nn.Linear(3, 3)

    holder = Holder()
    assert unwrap_model(holder) is holder
    assert unwrap_model(nn.DataParallel(inner)) is inner
