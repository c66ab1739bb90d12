"""The Checkpointer on its own: round trips, verification, fallback, policy, background writes,
a hand-written loop resumed exactly, fine-tuning loads, and state that is not plain data."""

from __future__ import annotations

import hashlib
import json
import random
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

from overt.checkpoint import Checkpointer, CheckpointError, load_weights
from overt.checkpoint.codec import decode, encode
from overt.engine.data import EpochSampler
from overt.engine.seeding import seed_everything


def make(seed: int = 0):
    torch.manual_seed(seed)
    model = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Dropout(0.3), nn.Linear(32, 10))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=1e-2, total_steps=200)
    return model, opt, sched


def digest(model: nn.Module) -> str:
    h = hashlib.sha256()
    for key, value in model.state_dict().items():
        h.update(key.encode())
        h.update(value.detach().cpu().numpy().tobytes())
    return h.hexdigest()


def train_steps(model, opt, sched, data, sampler, start: int, stop: int, ckpt=None, every=0, bs=32):
    """A hand-written loop over (epoch, batch) positions start..stop-1 with a resumable sampler."""
    x, y = data
    per_epoch = len(x) // bs
    step = start
    while step < stop:
        epoch, i = divmod(step, per_epoch)
        sampler.set_epoch(epoch)
        sampler.skip(i * bs)
        order = list(sampler)
        for j in range(0, len(order) - len(order) % bs, bs):
            idx = torch.tensor(order[j:j + bs])
            loss = nn.functional.cross_entropy(model(x[idx]), y[idx])
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            sched.step()
            step += 1
            if ckpt is not None and step % every == 0:
                ckpt.save(step, {"model": model, "optimizer": opt, "scheduler": sched, "position": {"step": step}})
            if step >= stop:
                return


def test_hand_written_loop_resumes_bit_identical(tmp_path, digits):
    train, _ = digits
    data = (train.tensors[0], train.tensors[1])
    # uninterrupted
    seed_everything(0)
    model, opt, sched = make()
    train_steps(model, opt, sched, data, EpochSampler(len(data[0]), seed=3), 0, 100)
    expected = digest(model)
    # interrupted after step 70, checkpoints every 20 (background writes)
    seed_everything(0)
    model, opt, sched = make()
    ckpt = Checkpointer(tmp_path / "ckpts", keep_last=2, background=True)
    train_steps(model, opt, sched, data, EpochSampler(len(data[0]), seed=3), 0, 70, ckpt, every=20)
    ckpt.wait()
    assert [p.name for p in ckpt.checkpoints()] == ["step-000040", "step-000060"]
    for rng in (False, True):
        torch.rand(100)  # the "crash" loses the process: RNG, weights, everything
        model, opt, sched = make(seed=123)
        restored = Checkpointer(tmp_path / "ckpts").restore({"model": model, "optimizer": opt, "scheduler": sched},
                                                            rng=rng)
        start = restored.objects["position"]["step"]
        assert start == 60 and restored.step == 60
        train_steps(model, opt, sched, data, EpochSampler(len(data[0]), seed=3), start, 100)
        # without the RNG states the dropout masks differ: the comparison can fail
        assert (digest(model) == expected) is rng


def test_rng_states_are_restored():
    from overt.checkpoint.rng import capture_rng, restore_rng

    state = encode(capture_rng(), "rng", tensors := {})
    expected = (random.random(), np.random.rand(), torch.rand(3))
    restore_rng(decode(json.loads(json.dumps(state)), tensors))
    again = (random.random(), np.random.rand(), torch.rand(3))
    assert expected[:2] == again[:2] and torch.equal(expected[2], again[2])


def test_codec_round_trips_structures_exactly():
    tree = {"state": {0: {"step": torch.tensor(3.0), "m": torch.randn(2, 2)}}, "betas": (0.9, 0.999),
            "nan": float("nan"), "inf": float("-inf"), "arr": np.arange(4, dtype=np.uint32), "none": None,
            "nested": [1, "a", (2, [3.5])], "dtype": torch.bfloat16}
    tensors: dict = {}
    back = decode(json.loads(json.dumps(encode(tree, "x", tensors), allow_nan=False)), tensors)
    assert back["betas"] == (0.9, 0.999) and isinstance(back["betas"], tuple)
    assert list(back["state"]) == [0] and torch.equal(back["state"][0]["m"], tree["state"][0]["m"])
    assert np.isnan(back["nan"]) and back["inf"] == float("-inf")
    assert back["arr"].dtype == np.uint32 and back["arr"].tolist() == [0, 1, 2, 3]
    assert back["nested"] == [1, "a", (2, [3.5])] and back["dtype"] is torch.bfloat16


def test_state_that_is_not_plain_data_is_refused_with_its_path(tmp_path):
    class Opaque:
        pass

    with pytest.raises(CheckpointError, match=r"cannot store a Opaque at 'extra.thing'"):
        Checkpointer(tmp_path).save(1, {"extra": {"thing": Opaque()}})
    assert not list(tmp_path.iterdir())


def _three_checkpoints(root: Path) -> Checkpointer:
    model, opt, _ = make()
    ckpt = Checkpointer(root, keep_last=None)
    for step in (10, 20, 30):
        with torch.no_grad():
            model[0].weight.add_(1.0)
        ckpt.save(step, {"model": model, "optimizer": opt})
    return ckpt


@pytest.mark.parametrize("damage", ["flip", "truncate", "no_manifest", "missing_file", "bad_json"])
def test_a_damaged_newest_checkpoint_is_named_and_the_previous_one_used(tmp_path, damage):
    ckpt = _three_checkpoints(tmp_path)
    newest = tmp_path / "step-000030"
    if damage == "flip":
        data = bytearray((newest / "state.safetensors").read_bytes())
        data[-5] ^= 0xFF
        (newest / "state.safetensors").write_bytes(bytes(data))
        expected = "state.safetensors does not match its SHA-256"
    elif damage == "truncate":
        (newest / "model.safetensors").write_bytes((newest / "model.safetensors").read_bytes()[:100])
        expected = "model.safetensors has 100 bytes, the manifest says"
    elif damage == "no_manifest":
        (newest / "manifest.json").unlink()
        expected = "has no manifest.json"
    elif damage == "missing_file":
        (newest / "state.json").unlink()
        expected = "state.json is missing"
    else:
        (newest / "manifest.json").write_text("{not json")
        expected = "manifest.json is unreadable"
    messages: list[str] = []
    ckpt.log = messages.append
    model, opt, _ = make(seed=5)
    restored = ckpt.restore({"model": model, "optimizer": opt})
    assert restored.step == 20
    assert [p.name for p, _ in restored.skipped] == ["step-000030"]
    assert any("step-000030 is unusable" in m and expected in m for m in messages), messages
    with pytest.raises(CheckpointError, match=expected.split(",")[0]):
        ckpt.load(newest)


def test_no_valid_checkpoint_at_all_is_an_error_naming_each(tmp_path):
    ckpt = _three_checkpoints(tmp_path)
    for p in ckpt.checkpoints():
        (p / "manifest.json").unlink()
    ckpt.log = lambda m: None
    with pytest.raises(CheckpointError, match="no valid checkpoint") as info:
        ckpt.load()
    assert "step-000010: step-000010 has no manifest.json" in str(info.value)


def test_retention_keeps_last_k_and_best_k(tmp_path):
    model, opt, _ = make()
    ckpt = Checkpointer(tmp_path, keep_last=2, keep_best=2, mode="max", metric_name="val/accuracy")
    accuracy = {1: 0.5, 2: 0.9, 3: 0.7, 4: 0.95, 5: 0.6, 6: None, 7: 0.1}
    for step, acc in accuracy.items():
        ckpt.save(step, {"model": model}, metric=acc)
    # last two: 6, 7; best two by accuracy: 4 (0.95), 2 (0.9)
    assert [p.name for p in ckpt.checkpoints()] == ["step-000002", "step-000004", "step-000006", "step-000007"]
    assert json.loads((tmp_path / "step-000004" / "manifest.json").read_text())["metric"]["value"] == 0.95


def test_background_write_blocks_only_for_the_host_copy_and_lands_verified(tmp_path):
    model = nn.Linear(1000, 1000)
    ckpt = Checkpointer(tmp_path, background=True)
    path = ckpt.save(1, {"model": model})
    with torch.no_grad():
        model.weight.zero_()  # training goes on; the checkpoint keeps the copy taken at save()
    ckpt.wait()
    assert path.is_dir() and ckpt.last_saved == path
    fresh = nn.Linear(1000, 1000)
    torch.nn.init.ones_(fresh.weight)
    Checkpointer(tmp_path).restore({"model": fresh}, rng=False)
    assert fresh.weight.abs().sum() > 0 and not torch.equal(fresh.weight, torch.ones_like(fresh.weight))


def test_a_failed_background_write_is_reported(tmp_path):
    target = tmp_path / "file-not-folder"
    target.write_text("x")
    ckpt = Checkpointer(target, background=True)
    ckpt.save(1, {"model": nn.Linear(2, 2)})
    with pytest.raises(CheckpointError, match="writing a checkpoint in .*file-not-folder failed"):
        ckpt.wait()


def test_fine_tuning_load_reports_keys_strict_by_default(tmp_path):
    model, opt, _ = make()
    Checkpointer(tmp_path).save(1, {"model": model})
    changed = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Dropout(0.3), nn.Linear(32, 5), nn.Linear(5, 2))
    with pytest.raises(CheckpointError) as info:
        load_weights(changed, tmp_path / "step-000001")
    text = str(info.value)
    assert "3.weight: saved [10, 32], model [5, 32]" in text
    assert "missing (kept as initialised): 4.weight, 4.bias" in text
    before = changed[3].weight.detach().clone()
    report = load_weights(changed, tmp_path, strict=False)  # newest valid checkpoint of the folder
    assert sorted(report.loaded) == ["0.bias", "0.weight"]
    assert report.missing == ["4.weight", "4.bias"] and set(report.mismatched) == {"3.weight", "3.bias"}
    assert torch.equal(changed[0].weight, model[0].weight) and torch.equal(changed[3].weight, before)
    same = make(seed=9)[0]
    assert load_weights(same, tmp_path / "step-000001" / "model.safetensors").exact
    assert torch.equal(same[3].weight, model[3].weight)
    extra = nn.Sequential(nn.Linear(64, 32))
    report = load_weights(extra, tmp_path, strict=False)
    assert report.unexpected == ["3.bias", "3.weight"]


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU-only path")
def test_cuda_rng_states_from_a_gpu_machine_are_reported_not_fatal_on_cpu():
    from overt.checkpoint.rng import capture_rng, restore_rng

    state = capture_rng()
    state["torch_cuda"] = [torch.zeros(16, dtype=torch.uint8)]  # as saved on a 1-GPU machine
    notes = restore_rng(state)
    assert notes == ["the checkpoint holds RNG states of 1 CUDA device(s); this machine has none, "
                     "so they were not restored"]
