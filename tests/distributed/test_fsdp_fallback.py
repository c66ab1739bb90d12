"""A damaged newest FSDP2 (DCP) checkpoint is named and skipped: resume falls back to the previous
one, as it does for single-process checkpoints (two gloo processes)."""

from __future__ import annotations

import pytest
import torch.distributed as dist

from tests.distributed.procs import build_trainer, run_ranks, whole_weights

pytestmark = pytest.mark.skipif(not dist.is_available() or not dist.is_gloo_available(),
                                reason="torch.distributed with gloo is not available")


def _scenario(rank, world, out_dir):
    from overt.checkpoint import resume

    first = build_trainer(out_dir / "run", "fsdp")
    first.fit()  # checkpoints at the two epoch ends: step-000013 and step-000026
    plain = whole_weights(first)
    if rank == 0:
        shard = out_dir / "run" / "checkpoints" / "step-000026" / "dcp" / "__1_0.distcp"
        data = bytearray(shard.read_bytes())
        data[len(data) // 2] ^= 0xFF  # one flipped byte in rank 1's shard
        shard.write_bytes(bytes(data))
        (out_dir / "run" / "summary.json").unlink()
    dist.barrier()
    log: list[str] = []
    again = build_trainer(out_dir / "run", "fsdp")
    restored = resume(again, log=log.append)
    again.fit()
    return {"resumed_from": str(restored.path), "log": log, "plain": plain, "resumed": whole_weights(again)}


def test_a_damaged_newest_fsdp_shard_is_skipped_and_resume_uses_the_previous_checkpoint(tmp_path):
    results = run_ranks(_scenario, tmp_path)
    for r in results:
        assert r["resumed_from"].endswith("step-000013")
        assert r["resumed"] == r["plain"]  # the last epoch trained again, from the epoch-1 checkpoint
    said = "\n".join(results[0]["log"])
    assert "step-000026 is unusable" in said and "shard __1_0.distcp does not match" in said, said
    assert "moved the unusable checkpoint step-000026 aside" in said
