"""The engine on two gloo processes equals the engine on one process with the same global batch."""

from __future__ import annotations

import pytest
import torch
import torch.distributed as dist
from torch import nn
from torch.utils.data import Dataset

from tests.distributed.procs import run_ranks

pytestmark = pytest.mark.skipif(not dist.is_available() or not dist.is_gloo_available(),
                                reason="torch.distributed with gloo is not available")

N_TRAIN, N_VAL, BATCH = 301, 101, 8  # odd sizes: the last global batch is split unevenly (7 / 6)


class Recorded(Dataset):
    """Digits samples; remembers which indices were loaded."""

    def __init__(self, x, y):
        self.x, self.y, self.seen = x, y, []

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        self.seen.append(int(i))
        return self.x[i], self.y[i]


def _data():
    from sklearn.datasets import load_digits

    d = load_digits()
    x = torch.tensor(d.data, dtype=torch.float32) / 16.0
    y = torch.tensor(d.target)
    return Recorded(x[:N_TRAIN], y[:N_TRAIN]), Recorded(x[N_TRAIN:N_TRAIN + N_VAL], y[N_TRAIN:N_TRAIN + N_VAL])


def _train(batch_size: int, **kw):
    from overt.compose import Trainer  # the engine alone runs one process; the composition picks DDP/FSDP2
    from overt.engine.metrics import accuracy

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10))
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    train, val = _data()
    trainer = Trainer(model, opt, nn.CrossEntropyLoss(), train, val, metrics={"accuracy": accuracy}, epochs=2,
                      batch_size=batch_size, log_every=7, progress="off", guards=False, checkpoint=False,
                      seed=3, **kw)
    summary = trainer.fit()
    weights = _full_weights(trainer.model)
    return {"weights": weights, "final": summary["final"], "train_seen": train.seen, "val_seen": val.seen,
            "strategy": summary.get("strategy"), "world": summary.get("world_size")}


def _full_weights(model):
    out = {}
    for name, p in model.state_dict().items():
        t = p.full_tensor() if hasattr(p, "full_tensor") else p
        out[name] = t.detach().double().flatten().tolist()
    return out


def _ranks(rank, world, out_dir):
    return {"ddp": _train(BATCH, strategy="ddp"), "fsdp": _train(BATCH, strategy="fsdp"),
            "ddp_acc": _train(BATCH, strategy="ddp", accumulate=3), "fsdp_acc": _train(BATCH, strategy="fsdp", accumulate=3)}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    ranks = run_ranks(_ranks, tmp_path_factory.mktemp("engine-ranks"))
    torch.set_num_threads(1)
    single = _train(BATCH * 2)
    single["acc"] = _train(BATCH * 2, accumulate=3)
    return ranks, single


def _close(a, b, tol=1e-5):
    for name in a:
        ta, tb = torch.tensor(a[name]), torch.tensor(b[name])
        assert torch.allclose(ta, tb, atol=tol, rtol=tol), (name, (ta - tb).abs().max().item())


def test_ddp_equals_one_process_with_the_same_global_batch(runs):
    ranks, single = runs
    assert ranks[0]["ddp"]["strategy"] == "ddp" and ranks[0]["ddp"]["world"] == 2
    _close(ranks[0]["ddp"]["weights"], single["weights"])
    _close(ranks[1]["ddp"]["weights"], ranks[0]["ddp"]["weights"], tol=0)  # replicas identical


def test_fsdp_equals_ddp(runs):
    ranks, _ = runs
    assert ranks[0]["fsdp"]["strategy"] == "fsdp"
    _close(ranks[0]["fsdp"]["weights"], ranks[0]["ddp"]["weights"])


def test_gradient_accumulation_across_ranks_equals_one_process(runs):
    ranks, single = runs  # no_sync (DDP) / set_requires_gradient_sync (FSDP2) inside a window; a partial last window
    _close(ranks[0]["ddp_acc"]["weights"], single["acc"]["weights"])
    _close(ranks[0]["fsdp_acc"]["weights"], single["acc"]["weights"])


def test_every_training_sample_once_per_epoch_and_validation_once(runs):
    ranks, _ = runs
    for kind in ("ddp", "fsdp"):
        train = [ranks[0][kind]["train_seen"], ranks[1][kind]["train_seen"]]
        assert not set(train[0][:N_TRAIN // 2]) & set(train[1][:N_TRAIN // 2])
        assert sorted(train[0] + train[1]) == sorted(list(range(N_TRAIN)) * 2)  # 2 epochs, each sample once each
        val = ranks[0][kind]["val_seen"] + ranks[1][kind]["val_seen"]
        assert sorted(val) == sorted(list(range(N_VAL)) * 2)  # validated after each of the 2 epochs


def test_global_metrics_equal_one_process(runs):
    ranks, single = runs
    for kind in ("ddp", "fsdp"):
        for rank in (0, 1):
            final = ranks[rank][kind]["final"]
            assert final.keys() == single["final"].keys()
            for key, value in single["final"].items():
                assert final[key] == pytest.approx(value, abs=1e-5), (kind, rank, key)
