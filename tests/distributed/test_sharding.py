"""The seeded order split across ranks: every sample once, same global batches as one process."""

from __future__ import annotations

import pytest

from overt.distributed.sharding import ShardedBatchSampler, global_layout, window_plan
from overt.engine.accumulation import WindowPlan
from overt.engine.data import EpochSampler
from overt.errors import ConfigError


def _ranks(n, bs, world, **kw):
    return [ShardedBatchSampler(n, batch_size=bs, rank=r, world_size=world, **kw) for r in range(world)]


@pytest.mark.parametrize("n,bs,world", [(64, 8, 2), (65, 8, 2), (70, 8, 4), (10, 2, 4), (9, 4, 2), (3, 5, 3)])
def test_every_sample_exactly_once_and_equal_batch_counts(n, bs, world):
    for epoch in (0, 3):
        seen = []
        counts = set()
        for s in _ranks(n, bs, world, seed=7):
            s.set_epoch(epoch)
            batches = list(s)
            counts.add(len(batches))
            assert all(batches)  # no rank ever gets an empty batch
            seen += [i for b in batches for i in b]
        assert sorted(seen) == list(range(n))
        assert len(counts) == 1  # every rank runs the same number of batches (collectives match)


def test_global_batches_are_the_single_process_batches():
    n, bs, world = 100, 8, 2
    single = EpochSampler(n, seed=3)
    single.set_epoch(1)
    order = single.order().tolist()
    ranks = _ranks(n, bs, world, seed=3)
    for s in ranks:
        s.set_epoch(1)
    per_rank = [s.batches() for s in ranks]
    rebuilt = [sum((per_rank[r][k] for r in range(world)), []) for k in range(len(per_rank[0]))]
    assert rebuilt == [order[i:i + bs * world] for i in range(0, n, bs * world)]


def test_tail_smaller_than_world_is_merged_not_dropped():
    assert global_layout(10, 2, 4) == [[3, 3, 2, 2]]
    assert global_layout(17, 4, 2) == [[4, 4], [5, 4]]  # tail of 1 sample joins the last global batch
    assert global_layout(18, 4, 2) == [[4, 4], [4, 4], [1, 1]]
    assert global_layout(20, 4, 2) == [[4, 4], [4, 4], [2, 2]]


def test_fewer_samples_than_ranks_is_an_error():
    with pytest.raises(ConfigError, match="3 samples but the run has 4 ranks"):
        global_layout(3, 1, 4)


def test_window_weights_give_the_global_mean():
    layout = global_layout(21, 4, 2)  # [[4,4],[4,4],[7,6]]: an uneven last global batch
    for accumulate in (1, 2):
        plans = [window_plan(layout, r, accumulate) for r in range(2)]
        single = WindowPlan.build([sum(s) for s in layout], accumulate)
        assert plans[0].closes == single.closes
        # DDP averages over the W ranks: (1/W) * w_ri must be n_ri / (samples of all ranks in the window)
        for start in range(0, len(layout), accumulate):
            window = layout[start:start + accumulate]
            total = sum(map(sum, window))
            for i, sizes in enumerate(window, start):
                for r in range(2):
                    assert plans[r].weights[i] / 2 == pytest.approx(sizes[r] / total)


def test_skip_resumes_at_a_batch_boundary_and_refuses_others():
    s = ShardedBatchSampler(40, batch_size=4, rank=1, world_size=2, seed=0)
    s.set_epoch(2)
    full = s.batches()
    s.skip(8)
    assert list(s) == full[2:]
    with pytest.raises(ConfigError, match="not a batch boundary"):
        s.skip(6)
