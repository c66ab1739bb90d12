"""Data pipeline settings (drop_last, persistent_workers, prefetch_factor), the padding collate
for variable-length sequences, and train-only augmentation that resumes exactly."""

from __future__ import annotations

import pytest
import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence
from torch.utils.data import DataLoader, Dataset, Subset

import overt
from overt.engine.augment import sample_seed
from overt.engine.callbacks import Callback
from overt.engine.data import EpochSampler
from overt.engine.loop import Trainer
from overt.errors import ConfigError, OvertError


def _mlp():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(64, 32), nn.BatchNorm1d(32), nn.ReLU(), nn.Linear(32, 10))


class Sizes(Callback):
    def __init__(self):
        self.sizes = []

    def on_batch_start(self, trainer, batch, batch_index):
        self.sizes.append(len(batch[1]))


@pytest.mark.parametrize("drop_last", [True, False])
def test_drop_last_drops_the_tiny_last_training_batch_only(digits, drop_last):
    model, sizes = _mlp(), Sizes()
    train, val = Subset(digits[0], range(129)), Subset(digits[1], range(65))  # 2 x 64 + 1 (a batch of 1)
    trainer = Trainer(model, torch.optim.SGD(model.parameters(), lr=0.1), nn.CrossEntropyLoss(), train, val,
                      epochs=1, batch_size=64, val_batch_size=64, drop_last=drop_last, callbacks=[sizes])
    if not drop_last:  # planted: the last batch of 1 reaches BatchNorm; the error says to drop it
        with pytest.raises(OvertError, match="batch of 1 sample reached a BatchNorm") as caught:
            trainer.fit()
        assert "drop_last=true" in str(caught.value) and sizes.sizes == [64, 64, 1]
        return
    trainer.fit()
    assert sizes.sizes == [64, 64] and trainer.steps_per_epoch == 2
    assert not trainer.val_loader.drop_last  # validation always sees every sample
    assert sum(len(b[1]) for b in trainer.val_loader) == 65


def test_worker_settings_reach_the_loader_and_need_workers(digits):
    model = _mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    trainer = Trainer(model, opt, nn.CrossEntropyLoss(), digits[0], epochs=2, num_workers=2,
                      persistent_workers=True, prefetch_factor=3)
    loader = trainer.train_loader
    assert loader.persistent_workers and loader.prefetch_factor == 3 and loader.num_workers == 2
    trainer.fit()
    assert loader._iterator is not None  # the workers outlived the epoch
    assert trainer.state.epoch == 2
    with pytest.raises(ConfigError, match="need loader workers, but num_workers=0"):
        Trainer(model, opt, nn.CrossEntropyLoss(), digits[0], persistent_workers=True)
    with pytest.raises(ConfigError, match="prefetch_factor need"):
        Trainer(model, opt, nn.CrossEntropyLoss(), digits[0], prefetch_factor=2)


# -- variable-length sequences ---------------------------------------------------------------

class Sequences(Dataset):
    """Token sequences of length 2..12; the label is the last token's parity (learnable only
    if the model reads the sequence up to where it really ends)."""

    def __init__(self, n: int, seed: int = 0):
        g = torch.Generator().manual_seed(seed)
        self.items = []
        for _ in range(n):
            length = int(torch.randint(2, 13, (1,), generator=g))
            tokens = torch.randint(1, 20, (length,), generator=g)
            self.items.append((tokens, int(tokens[-1] % 2)))

    def __len__(self):
        return len(self.items)

    def __getitem__(self, i):
        return self.items[i]


class Reader(nn.Module):
    def __init__(self, pack: bool = True):
        super().__init__()
        self.pack = pack
        self.embed = nn.Embedding(20, 16, padding_idx=0)
        self.rnn = nn.GRU(16, 32, batch_first=True)
        self.head = nn.Linear(32, 2)

    def forward(self, inputs):
        padded, lengths = inputs
        x = self.embed(padded)
        if self.pack:
            x = pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
        _, h = self.rnn(x)
        return self.head(h[-1])


def test_pad_collate_returns_lengths_that_pack_padded_sequence_takes():
    data = Sequences(3)
    (padded, lengths), labels = overt.pad_collate([data[0], data[1], data[2]])
    assert lengths.dtype == torch.int64 and lengths.device.type == "cpu"
    assert padded.shape == (3, int(lengths.max()))
    for row, (tokens, label), n in zip(padded, [data[0], data[1], data[2]], lengths.tolist()):
        assert torch.equal(row[:n], tokens) and not row[n:].any()
    assert labels.tolist() == [data[i][1] for i in range(3)]
    # sequence labels of their own lengths are padded with ignore_index
    (_, _), tags = overt.PadCollate()([(torch.ones(2), torch.tensor([1, 2])), (torch.ones(3), torch.tensor([1, 2, 3]))])
    assert tags.tolist() == [[1, 2, -100], [1, 2, 3]]


@pytest.mark.parametrize("pack", [True, False])
def test_padded_sequences_train_through_the_engine_and_packing_hides_the_padding(pack):
    torch.manual_seed(0)
    model = Reader(pack)
    trainer = Trainer(model, torch.optim.Adam(model.parameters(), lr=1e-2), nn.CrossEntropyLoss(),
                      Sequences(256), Sequences(128, seed=1), epochs=4, batch_size=32, collate_fn=overt.pad_collate,
                      metrics={"accuracy": overt.metrics.accuracy})
    trainer.fit()
    model.eval()
    short = Sequences(1, seed=5)[0]
    long = (torch.randint(1, 20, (12,)), 0)
    with torch.no_grad():
        alone = model(overt.pad_collate([short])[0])[0]
        beside_a_longer_one = model(overt.pad_collate([short, long])[0])[0]
    if pack:  # the clean program: a sequence's output does not depend on how much padding it got
        assert torch.allclose(alone, beside_a_longer_one, atol=1e-6)
        assert trainer.last_metrics["val/accuracy"] > 0.9
    else:  # planted: without packing the GRU reads the padding, and the output changes with it
        assert not torch.allclose(alone, beside_a_longer_one, atol=1e-4)


# -- train-only augmentation ---------------------------------------------------------------

def jitter(sample, generator):
    x, y = sample
    return x + 0.5 * torch.randn(x.shape, generator=generator), y


class Seen(Callback):
    def __init__(self):
        self.batches = []

    def on_batch_start(self, trainer, batch, batch_index):
        self.batches.append(batch[0].clone())


def _augmented_trainer(digits, callbacks=(), **kw):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Dropout(0.2), nn.Linear(32, 10))
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    settings = dict(epochs=2, batch_size=64, seed=3, num_workers=2, persistent_workers=True)
    return Trainer(model, opt, nn.CrossEntropyLoss(), Subset(digits[0], range(640)), Subset(digits[1], range(128)),
                   train_transform=jitter, callbacks=list(callbacks), **{**settings, **kw})


class StopAt(Callback):
    def __init__(self, step):
        self.step = step

    def on_step_end(self, trainer, logs):
        if trainer.state.global_step == self.step:
            trainer.should_stop = True


def test_augmentation_is_redrawn_every_epoch_for_training_only_and_resumes_exactly_in_workers(digits):
    seen = Seen()
    reference = _augmented_trainer(digits, [seen])
    reference.fit()
    raw = digits[0].tensors[0]
    sampler = EpochSampler(640, seed=3)
    for epoch, batch in ((0, seen.batches[0]), (1, seen.batches[10])):  # the first batch of each epoch
        sampler.set_epoch(epoch)
        idx = sampler.order()[:64].tolist()
        drawn = [raw[i] + 0.5 * torch.randn(64, generator=torch.Generator().manual_seed(sample_seed(3, epoch, i)))
                 for i in idx]
        assert torch.equal(batch, torch.stack(drawn))  # each sample's own draw, whichever worker loaded it
    # re-drawn every epoch: sample i's noise in epoch 1 is not its noise of epoch 0
    i = idx[0]
    assert not torch.equal(jitter(digits[0][i], torch.Generator().manual_seed(sample_seed(3, 0, i)))[0],
                           jitter(digits[0][i], torch.Generator().manual_seed(sample_seed(3, 1, i)))[0])
    assert sum(len(b[1]) for b in reference.val_loader) == 128
    assert torch.equal(next(iter(reference.val_loader))[0], digits[1].tensors[0][:128])  # validation untouched

    stopped = _augmented_trainer(digits, [StopAt(7)])  # mid-epoch 1 (10 steps per epoch)
    stopped.fit()
    saved = stopped.state_dict()
    resumed_seen = Seen()
    resumed = _augmented_trainer(digits, [resumed_seen])
    resumed.load_state_dict(saved)
    resumed.fit()
    assert all(torch.equal(a, b) for a, b in zip(resumed_seen.batches, seen.batches[7:]))
    for key, value in reference.model.state_dict().items():
        assert torch.equal(value, resumed.model.state_dict()[key])


def test_a_transform_needs_a_dataset_not_a_ready_loader(digits):
    model = _mlp()
    with pytest.raises(ConfigError, match="train_transform was given with a ready DataLoader"):
        Trainer(model, torch.optim.SGD(model.parameters(), lr=0.1), nn.CrossEntropyLoss(),
                DataLoader(digits[0], batch_size=8), train_transform=jitter)


def test_a_process_holding_persistent_workers_still_exits(tmp_path):
    """Workers block the preemption signals, so multiprocessing's exit-time SIGTERM cannot end
    them: the loader stops them itself, or the interpreter would wait for them forever."""
    import subprocess
    import sys
    import textwrap

    script = tmp_path / "hold.py"
    script.write_text(textwrap.dedent("""
        import torch
        from torch import nn
        from torch.utils.data import TensorDataset
        from overt.engine.loop import Trainer

        data = TensorDataset(torch.randn(64, 4), torch.randint(0, 2, (64,)))
        model = nn.Linear(4, 2)
        trainer = Trainer(model, torch.optim.SGD(model.parameters(), lr=0.1), nn.CrossEntropyLoss(), data,
                          epochs=1, batch_size=16, num_workers=2, persistent_workers=True)
        trainer.fit()
        assert trainer.train_loader._iterator is not None  # alive at exit
        print("trained")
    """))
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert "trained" in done.stdout


_DISCARDED_TRAINER = """
import gc, sys
import torch
from torch import nn
from overt.engine.loop import Trainer
from overt.recipes.digits import load_digits_split

train, _ = load_digits_split(0.2, 0)
model = nn.Linear(64, 10)
trainer = Trainer(model, torch.optim.SGD(model.parameters(), lr=0.1), nn.CrossEntropyLoss(), train, epochs=1,
                  num_workers=2, persistent_workers=True, progress="off")
trainer.fit()
workers = list(trainer.train_loader._iterator._workers)
trainer.cycle = trainer  # garbage only the cycle collector frees: the queues' feeders close first
del trainer
gc.collect()
print([w.is_alive() for w in workers])
"""


def test_persistent_workers_of_a_trainer_collected_in_a_cycle_end_and_the_process_exits():
    """The workers block SIGTERM (WorkerSafeLoader); when PyTorch's None cannot reach them any more
    (their iterator collected in a reference cycle), they are killed, not left waiting forever with
    the interpreter's exit waiting on them."""
    import subprocess
    import sys

    from tests.conftest import REPO

    proc = subprocess.run([sys.executable, "-c", _DISCARDED_TRAINER], cwd=REPO, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[False, False]"
