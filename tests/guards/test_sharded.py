"""``overt.guard(model, optimizer)`` on FSDP-sharded models, two gloo CPU processes.

FSDP1 (``FullyShardedDataParallel``, flat parameters, and ``use_orig_params=True``) and FSDP2
(``fully_shard``): the guard attaches through the wrapper, planted bugs are found, the clean
run is quiet (no ``ddp-out-of-sync`` from shards that differ by design, no ``no-gradient`` from
a rank's empty shard), and the weights are bit-identical with and without the guard.
"""

from __future__ import annotations

import io

import pytest
import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

from tests.distributed.procs import run_ranks

pytestmark = pytest.mark.skipif(not dist.is_available() or not dist.is_gloo_available(),
                                reason="torch.distributed with gloo is not available")

WRAPS = ("fsdp1", "fsdp1-orig-params", "fsdp2")
BUGS = {"softmax-ce": "softmax-before-cross-entropy", "eval-in-train-mode": "train-mode-in-eval",
        "head-only-optimizer": "params-not-optimized"}


def _model(wrap: str) -> nn.Module:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Dropout(0.2), nn.Linear(32, 4))
    if wrap.startswith("fsdp1"):
        from torch.distributed.fsdp import FullyShardedDataParallel as FSDP

        return FSDP(model, device_id=torch.device("cpu"), use_orig_params=wrap == "fsdp1-orig-params")
    from torch.distributed.fsdp import fully_shard

    fully_shard(model[0])
    fully_shard(model[3])
    fully_shard(model)
    return model


def _train(wrap: str, bug: str | None, guarded: bool) -> dict:
    import overt

    model = _model(wrap)
    inner = model.module if wrap.startswith("fsdp1") else model
    params = inner[3].parameters() if bug == "head-only-optimizer" else model.parameters()
    opt = torch.optim.SGD(params, lr=0.1, momentum=0.9)
    g = torch.Generator().manual_seed(dist.get_rank())
    guard = overt.guard(model, opt, stream=io.StringIO()) if guarded else None
    for step in range(12):
        x, y = torch.randn(8, 16, generator=g), torch.randint(0, 4, (8,), generator=g)
        opt.zero_grad()
        logits = model(x)
        loss = F.cross_entropy(F.softmax(logits, 1) if bug == "softmax-ce" else logits, y)
        loss.backward()
        opt.step()
        if step % 4 == 3:  # a hand-written evaluation
            if bug != "eval-in-train-mode":
                model.eval()
            with torch.no_grad():
                model(torch.randn(8, 16, generator=g))
            model.train()
    findings = [f.to_dict() for f in guard.report(quiet=True)] if guard is not None else []
    local = [p.detach().to_local() if hasattr(p, "to_local") else p.detach() for p in model.parameters()]
    return {"findings": findings, "weights": [t.flatten().tolist() for t in local]}


def _nan_in_one_shard(wrap: str) -> dict:
    """A non-finite gradient in rank 1's shard only (step 2), ``stop_on_error=True``: where each rank stops."""
    import overt
    from overt.guards import GuardError

    model = _model(wrap)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    g = torch.Generator().manual_seed(dist.get_rank())
    overt.guard(model, opt, stream=io.StringIO())
    try:
        for step in range(12):
            x, y = torch.randn(8, 16, generator=g), torch.randint(0, 4, (8,), generator=g)
            opt.zero_grad()
            F.cross_entropy(model(x), y).backward()
            if step == 2 and dist.get_rank() == 1:
                grad = next(p.grad for p in model.parameters() if p.grad is not None and p.grad.numel())
                (grad.to_local() if hasattr(grad, "to_local") else grad).view(-1)[0] = float("nan")
            opt.step()
    except GuardError as exc:
        return {"slug": exc.finding.slug, "step": exc.finding.step}
    return {"slug": None, "step": None}


def _runs(wrap: str, bug: str | None) -> bool:
    # FSDP1's single flat parameter holds every layer: there is no head to give an optimizer alone
    return not (wrap == "fsdp1" and bug == "head-only-optimizer")


def _scenarios(rank, world, out_dir):
    results = {}
    for wrap in WRAPS:
        for bug in (None, *BUGS):
            if _runs(wrap, bug):
                results[f"{wrap}/{bug}"] = {"guarded": _train(wrap, bug, True), "alone": _train(wrap, bug, False)}
        results[f"{wrap}/nan"] = _nan_in_one_shard(wrap)
    return results


@pytest.fixture(scope="module")
def ranks(tmp_path_factory):
    return run_ranks(_scenarios, tmp_path_factory.mktemp("sharded-guards"))


@pytest.mark.parametrize("wrap", WRAPS)
def test_clean_sharded_run_is_quiet_and_trains_as_without_the_guard(ranks, wrap):
    for rank in ranks:
        run = rank[f"{wrap}/None"]
        assert run["guarded"]["findings"] == []
        assert run["guarded"]["weights"] == run["alone"]["weights"]


@pytest.mark.parametrize("wrap, bug", [(w, b) for w in WRAPS for b in BUGS if _runs(w, b)])
def test_planted_bug_found_under_sharding_and_training_unchanged(ranks, wrap, bug):
    key = f"{wrap}/{bug}"
    for rank in ranks:
        run = rank[key]
        assert [f["slug"] for f in run["guarded"]["findings"]] == [BUGS[bug]]
        assert run["guarded"]["weights"] == run["alone"]["weights"]


@pytest.mark.parametrize("wrap", WRAPS)
def test_a_non_finite_gradient_in_one_ranks_shard_stops_every_rank_at_the_same_step(ranks, wrap):
    """The gradient norms of sharded parameters are summed over the ranks on the checked steps:
    both ranks raise GuardError before the same step (one rank alone would leave the other in
    FSDP's next collective)."""
    assert [rank[f"{wrap}/nan"] for rank in ranks] == [{"slug": "non-finite", "step": 2}] * 2
