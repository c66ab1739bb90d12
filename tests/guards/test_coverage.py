"""Coverage of the data (issue 33): every DataLoader pass yields a batch, a training loop steps its
optimizer, and an evaluation pass scores every sample of its data set once (slugs loader-pass-empty,
optimizer-never-steps, eval-samples-repeated, eval-samples-missed, eval-loop-stops-early).  Planted bugs
in several forms (``overt.guard`` on a hand-written loop, a session that finds models itself as ``overt
run`` does, ``overt run`` of a script, the engine) and their clean twins, on digits."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
import torch
import torch.nn.functional as F
from torch.utils.data import (BatchSampler, DataLoader, Dataset, RandomSampler, Sampler, SequentialSampler, Subset,
                              SubsetRandomSampler, TensorDataset, WeightedRandomSampler)
from torch.utils.data.distributed import DistributedSampler

from tests.conftest import TIMING
from tests.guards.helpers import digits, guarded, guarded_run, mlp, slugs

COVERAGE = {"loader-pass-empty", "optimizer-never-steps", "eval-samples-repeated", "eval-samples-missed",
            "eval-loop-stops-early"}


def _data():
    x, y = digits()
    return TensorDataset(x[:1000], y[:1000]), TensorDataset(x[1000:1797], y[1000:1797])


def _fit(model, opt, train, epochs=1):
    model.train()
    for _ in range(epochs):
        for xb, yb in train:
            opt.zero_grad()
            F.cross_entropy(model(xb), yb).backward()
            opt.step()


def _evaluate(model, loader, stop=None):
    model.eval()
    hits = 0
    with torch.no_grad():
        for i, (xb, yb) in enumerate(loader):
            if stop is not None and i == stop:
                break
            hits += int((model(xb).argmax(1) == yb).sum())
    return hits


def _guarded_eval(make_val, epochs=2, stop=None, dataset=None):
    train_ds, val_ds = _data()
    val = make_val(val_ds if dataset is None else dataset)
    model = mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    g = guarded(model, opt, ignore=TIMING)
    for _ in range(epochs):
        _fit(model, opt, DataLoader(train_ds, batch_size=64, shuffle=True))
        _evaluate(model, val() if callable(val) else val, stop)
    findings = g.report()
    return [f for f in findings if f.slug in COVERAGE], g.session.options.stream.getvalue()


# -- eval-samples-repeated ---------------------------------------------------------------------------
def test_evaluation_sampler_with_replacement_repeats_samples():
    findings, text = _guarded_eval(lambda ds: DataLoader(ds, batch_size=100,
                                                         sampler=RandomSampler(ds, replacement=True)))
    assert slugs(findings) == ["eval-samples-repeated"], text
    assert "draws with replacement" in text and "test_coverage.py:" in text


def test_weighted_sampler_copied_to_the_evaluation_loader():
    def make(ds):
        y = ds.tensors[1]
        weights = (1.0 / torch.bincount(y).float())[y]
        return DataLoader(ds, batch_size=64, sampler=WeightedRandomSampler(weights, num_samples=len(ds)))

    findings, text = _guarded_eval(make)
    assert slugs(findings) == ["eval-samples-repeated"], text
    assert "WeightedRandomSampler" in text


class _Episodes(Sampler):
    """Each batch one random task: ``ways`` classes, ``per`` distinct samples of each; tasks drawn apart."""

    def __init__(self, labels, episodes=10, ways=5, per=4, seed=0):
        self.by_class = [torch.nonzero(labels == c).flatten().tolist() for c in range(10)]
        self.episodes, self.ways, self.per = episodes, ways, per
        self.g = torch.Generator().manual_seed(seed)

    def __len__(self):
        return self.episodes

    def __iter__(self):
        for _ in range(self.episodes):
            batch = []
            for c in torch.randperm(10, generator=self.g)[:self.ways].tolist():
                pool = self.by_class[c]
                batch += [pool[i] for i in torch.randperm(len(pool), generator=self.g)[:self.per].tolist()]
            yield batch


class _PaddedBuckets(Sampler):
    """Deals the whole set in batches of 64 and fills the last one up with the set's first indices."""

    def __init__(self, n, size=64):
        self.n, self.size = n, size

    def __len__(self):
        return -(-self.n // self.size)

    def __iter__(self):
        order = list(range(self.n))
        order += order[:len(self) * self.size - self.n]
        for i in range(0, len(order), self.size):
            yield order[i:i + self.size]


def test_episodic_evaluation_from_a_task_sampler_is_quiet():
    """few-shot's evaluation (fresh8-test, fewshot-proto and fewshot-matching): a batch sampler of its own draws
    each batch as one random task, a few tasks a pass; an image in two tasks is what independent draws give and
    the metric is the mean over tasks.  Reported ``eval-samples-repeated`` before (measured once, then fixed)."""
    findings, text = _guarded_eval(lambda ds: DataLoader(ds, batch_sampler=_Episodes(ds.tensors[1])))
    assert findings == [], text


def test_a_batch_sampler_that_deals_the_set_with_repeats_is_still_named():
    findings, text = _guarded_eval(lambda ds: DataLoader(ds, batch_sampler=_PaddedBuckets(len(ds))))
    assert slugs(findings) == ["eval-samples-repeated"], text


@pytest.mark.parametrize("drop_last", [True, False])
def test_distributed_sampler_over_the_evaluation_set(drop_last):
    """Three ranks simulated in one process, each through its own DistributedSampler (as each rank of a
    real run builds one), over 797 samples.  drop_last=True leaves 2 samples out on every rank; without it
    the sampler pads the set to 798 with one repeat, which a correct program drops when it gathers the
    results (cut to len(dataset), or put back at the indices): not judged."""
    x, y = digits()
    val_ds = TensorDataset(x[:797], y[:797])
    model = mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    g = guarded(model, opt, ignore=TIMING)
    _fit(model, opt, DataLoader(TensorDataset(x[:500], y[:500]), batch_size=50, shuffle=True))
    for rank in range(3):
        sampler = DistributedSampler(val_ds, num_replicas=3, rank=rank, shuffle=False, drop_last=drop_last)
        _evaluate(model, DataLoader(val_ds, batch_size=64, sampler=sampler))
    findings = [f for f in g.report() if f.slug in COVERAGE]
    text = g.session.options.stream.getvalue()
    if drop_last:
        assert slugs(findings) == ["eval-samples-missed"], text
        assert "2 samples are left out on every rank" in text
    else:
        assert findings == [], text


class _Twice(Sampler):
    """Test-time augmentation: every index twice (each sample the same weight)."""

    def __init__(self, n):
        self.n = n

    def __iter__(self):
        return iter([i for i in range(self.n) for _ in range(2)])

    def __len__(self):
        return 2 * self.n


class _BucketBatches(Sampler):
    """Batches of 64 consecutive indices of its sampler, the remainder dropped (a bucket sampler)."""

    def __init__(self, sampler, drop_rest):
        self.sampler, self.drop_rest = sampler, drop_rest

    def __iter__(self):
        idx = list(self.sampler)
        end = len(idx) - len(idx) % 64 if self.drop_rest else len(idx)
        return iter([idx[i:i + 64] for i in range(0, end, 64)])

    def __len__(self):
        n = len(self.sampler)
        return n // 64 if self.drop_rest else -(-n // 64)


@pytest.mark.parametrize("make", [
    lambda ds: DataLoader(ds, batch_size=100),
    lambda ds: DataLoader(ds, batch_size=100, sampler=_Twice(len(ds))),  # every sample twice: unbiased
    lambda ds: DataLoader(ds, batch_size=100, sampler=SubsetRandomSampler(range(300))),  # a chosen part
    lambda ds: DataLoader(Subset(ds, range(0, len(ds), 3)), batch_size=100),  # a Subset the user built
    lambda ds: DataLoader(ds, batch_sampler=_BucketBatches(SequentialSampler(ds), drop_rest=False)),
    lambda ds: DataLoader(ds, batch_size=100, num_workers=2),
], ids=["plain", "tta", "subset-sampler", "subset", "buckets", "workers"])
def test_complete_evaluation_passes_are_quiet(make):
    findings, text = _guarded_eval(make)
    assert findings == [], text


# -- eval-samples-missed -----------------------------------------------------------------------------
def test_batch_sampler_that_drops_its_remainder_misses_samples():
    findings, text = _guarded_eval(
        lambda ds: DataLoader(ds, batch_sampler=_BucketBatches(SequentialSampler(ds), drop_rest=True)))
    assert slugs(findings) == ["eval-samples-missed"], text
    assert "scored 768 of the 797 samples" in text


# -- eval-loop-stops-early ---------------------------------------------------------------------------
def test_evaluation_loop_that_breaks_after_a_few_batches():
    findings, text = _guarded_eval(lambda ds: DataLoader(ds, batch_size=64), stop=3)
    assert slugs(findings) == ["eval-loop-stops-early"], text
    assert "after 4 of its 13 batches had been fetched" in text
    line = next(i for i, t in enumerate(open(__file__).read().splitlines(), 1) if "i == stop:" in t) + 1
    assert f"left at tests/guards/test_coverage.py:{line} " in text, text  # the break


def test_one_batch_to_look_at_and_a_kept_iterator_are_not_judged():
    train_ds, val_ds = _data()
    model = mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    g = guarded(model, opt, ignore=TIMING)
    val = DataLoader(val_ds, batch_size=64)
    kept = iter(val)
    for _ in range(2):
        _fit(model, opt, DataLoader(train_ds, batch_size=64, shuffle=True))
        model.eval()
        with torch.no_grad():
            xb, _ = next(iter(val))  # one batch, to look at
            model(xb)
            for _ in range(3):  # a few batches of a kept iterator per evaluation
                model(next(kept)[0])
    findings = [f for f in g.report() if f.slug in COVERAGE]
    assert findings == [], g.session.options.stream.getvalue()


# -- loader-pass-empty and optimizer-never-steps: a session that finds models itself ------------------
def _auto(body):
    findings, text = guarded_run(body)
    return [f for f in findings if f.slug in COVERAGE], text


def test_training_loader_smaller_than_its_batch_with_drop_last():
    train_ds, val_ds = _data()
    small = Subset(train_ds, range(100))

    def body(drop=True):
        model = mlp()
        opt = torch.optim.Adam(model.parameters(), lr=1e-2)
        for _ in range(3):
            _fit(model, opt, DataLoader(small, batch_size=128, shuffle=True, drop_last=drop))
        _evaluate(model, DataLoader(val_ds, batch_size=100))

    findings, text = _auto(body)
    assert slugs(findings) == ["loader-pass-empty", "optimizer-never-steps"], text
    assert "drop_last=True with batch_size=128 and 100 samples" in text
    findings, text = _auto(lambda: body(drop=False))
    assert findings == [], text


class _Files(Dataset):
    """Samples listed from a directory (a glob that matched nothing gives an empty data set)."""

    def __init__(self, files, x, y):
        self.files, self.x, self.y = files, x, y

    def __len__(self):
        return len(self.files)

    def __getitem__(self, i):
        return self.x[self.files[i]], self.y[self.files[i]]


def test_empty_evaluation_listing():
    train_ds, _ = _data()
    x, y = digits()

    def body(files):
        model = mlp()
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        _fit(model, opt, DataLoader(train_ds, batch_size=64, shuffle=True))
        _evaluate(model, DataLoader(_Files(files, x, y), batch_size=32))

    findings, text = _auto(lambda: body([]))
    assert slugs(findings) == ["loader-pass-empty"], text
    assert "evaluation pass" in text and "has 0 samples" in text
    findings, text = _auto(lambda: body(list(range(1500, 1797))))
    assert findings == [], text


def test_step_under_a_condition_that_never_holds():
    """An accumulation window of 32 batches over a loader of 16: backward runs, step() is never reached."""
    train_ds, _ = _data()

    def body(window):
        model = mlp()
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        model.train()
        for _ in range(2):
            for i, (xb, yb) in enumerate(DataLoader(train_ds, batch_size=64, shuffle=True)):
                (F.cross_entropy(model(xb), yb) / window).backward()
                if (i + 1) % window == 0:
                    opt.step()
                    opt.zero_grad()

    findings, text = _auto(lambda: body(32))
    assert slugs(findings) == ["optimizer-never-steps"], text
    assert "backward passes ran" in text
    findings, text = _auto(lambda: body(4))
    assert findings == [], text


def test_evaluation_only_run_that_builds_an_optimizer_is_quiet():
    _, val_ds = _data()

    def body():
        model = mlp()
        torch.optim.SGD(model.parameters(), lr=0.1)  # built by shared setup code, never used
        _evaluate(model, DataLoader(val_ds, batch_size=100))

    findings, text = _auto(body)
    assert findings == [], text


# -- overt run of a script -----------------------------------------------------------------------------
_SCRIPT = '''
import glob, os, tempfile
import torch
import torch.nn.functional as F
from sklearn.datasets import load_digits
from torch import nn
from torch.utils.data import DataLoader, Dataset

d = load_digits()
X = torch.tensor(d.data, dtype=torch.float32) / 16
Y = torch.tensor(d.target)
root = tempfile.mkdtemp()
for i in range(300):
    open(os.path.join(root, f"{i}.txt"), "w").close()

class Listed(Dataset):
    def __init__(self, pattern):
        self.ids = [int(os.path.basename(p)[:-4]) for p in sorted(glob.glob(os.path.join(root, pattern)))]
    def __len__(self):
        return len(self.ids)
    def __getitem__(self, i):
        return X[self.ids[i]], Y[self.ids[i]]

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
train = DataLoader(torch.utils.data.TensorDataset(X[300:], Y[300:]), batch_size=32, shuffle=True)
test = DataLoader(Listed(PATTERN), batch_size=64)
for epoch in range(3):
    model.train()
    for xb, yb in train:
        opt.zero_grad()
        F.cross_entropy(model(xb), yb).backward()
        opt.step()
    model.eval()
    hits = seen = 0
    with torch.no_grad():
        for xb, yb in test:
            hits += int((model(xb).argmax(1) == yb).sum())
            seen += len(yb)
    print("test accuracy", hits / max(seen, 1))
'''


@pytest.mark.parametrize("pattern", ["*.png", "*.txt"])
def test_overt_run_of_a_script_whose_test_listing_is_empty(tmp_path, pattern):
    """A glob for files that are not there: the test set is empty and every evaluation prints accuracy 0.
    (An empty training set with shuffle=True is loud: RandomSampler refuses 0 samples.)"""
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent(_SCRIPT).replace("PATTERN", repr(pattern)))
    out = subprocess.run([sys.executable, "-m", "overt", "run", str(script)], capture_output=True, text=True,
                         timeout=300, cwd=tmp_path)
    text = out.stdout + out.stderr
    if pattern == "*.png":
        assert "OVT535 loader-pass-empty" in text and "built at train.py:28, iterated at train.py:38" in text, text
        assert "evaluation pass" in text and "has 0 samples" in text and "[warning]" in text, text
        assert out.returncode == 0, text  # an empty evaluation is a warning: the script's own exit status
        assert "OVT134" not in text, text
    else:
        assert "OVT535" not in text and "OVT134" not in text and out.returncode == 0, text


# -- the engine ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("replacement", [True, False])
def test_engine_evaluation_loader_with_replacement(replacement):
    from torch import nn

    from overt import Trainer
    from overt.guards.engine import GuardCallback

    train_ds, val_ds = _data()
    model = mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    val = DataLoader(val_ds, batch_size=100, sampler=RandomSampler(val_ds, replacement=replacement))
    summary = Trainer(model, opt, nn.CrossEntropyLoss(), train_ds, val, callbacks=[GuardCallback()], epochs=2,
                      batch_size=64, progress="off").fit()
    found = sorted({f["slug"] for f in summary["findings"] if f["slug"] in COVERAGE})
    assert found == (["eval-samples-repeated"] if replacement else []), summary["findings"]


def test_batch_sampler_drop_last_is_left_to_eval_drops_samples():
    findings, text = _guarded_eval(
        lambda ds: DataLoader(ds, batch_sampler=BatchSampler(SequentialSampler(ds), 64, drop_last=True)))
    assert findings == [], text


# -- Lightning: its own evaluation loop ------------------------------------------------------------------
@pytest.mark.parametrize("replacement", [False, True])
def test_lightning_validation_loop(replacement):
    """Lightning stops a validation pass at its length (no StopIteration): the pass is judged at the end
    of the run.  limit_val_batches=3 (of 8) stops every validation pass early: a setting the user gave
    Lightning's loop, not a break left in the code.  A validation loader drawing with replacement is
    reported either way."""
    pytest.importorskip("lightning")
    import tempfile

    from overt.integrations.lightning import OvertCallback
    from tests.integrations.projects import lightning_digits

    class Data(lightning_digits.DigitsData):
        def val_dataloader(self):
            sampler = RandomSampler(self.val_set, replacement=True) if replacement else None
            return DataLoader(self.val_set, batch_size=32, sampler=sampler)

    found = {}
    for limit in (1.0, 3):
        cb = OvertCallback(ignore=sorted(TIMING))
        with tempfile.TemporaryDirectory() as root:
            lightning_digits.fit(None, callbacks=[cb], root=root, limit_val_batches=limit, logger=False,
                                 datamodule=Data())
        found[limit] = slugs([f for f in cb.findings if f.slug in COVERAGE])
    assert found == ({1.0: ["eval-samples-repeated"], 3: []} if replacement else {1.0: [], 3: []}), found


def test_a_shuffled_evaluation_stopped_early_is_an_estimate():
    """makemore's evaluate(..., max_batches=10) over a shuffled loader: a random subsample, on purpose."""
    findings, text = _guarded_eval(lambda ds: DataLoader(ds, batch_size=64, shuffle=True), stop=3)
    assert findings == [], text


@pytest.mark.parametrize("how", ["split", "filter", "sampler", "twin"])
def test_evaluation_set_emptied_by_a_split_a_filter_or_a_sampler(how):
    """A validation fraction that rounds to 0 samples, a filter that keeps nothing, a sampler given no
    index: the evaluation loop never runs.  The twin splits off 10%."""
    train_ds, _ = _data()
    x, y = digits()

    def body():
        model = mlp()
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        full = TensorDataset(x[:1000], y[:1000])
        fraction = 0.0004 if how == "split" else 0.1
        n_val = int(len(full) * fraction)
        fit_ds, val_ds = torch.utils.data.random_split(full, [len(full) - n_val, n_val],
                                                       generator=torch.Generator().manual_seed(0))
        _fit(model, opt, DataLoader(fit_ds, batch_size=64, shuffle=True))
        if how == "filter":
            keep = [i for i in range(len(val_ds)) if val_ds[i][1] > 9]  # labels are 0..9: nothing kept
            val_ds = Subset(val_ds, keep)
        sampler = SubsetRandomSampler([]) if how == "sampler" else None
        _evaluate(model, DataLoader(val_ds, batch_size=32, sampler=sampler))

    findings, text = _auto(body)
    if how == "twin":
        assert findings == [], text
    else:
        assert slugs(findings) == ["loader-pass-empty"], text
        assert ("hands out no index" if how == "sampler" else "has 0 samples") in text


def test_an_unused_optimizer_beside_an_update_written_by_hand_is_quiet():
    """The weights move (a hand-written SGD update) while the optimizer built beside it never steps."""
    train_ds, _ = _data()

    def body():
        model = mlp()
        torch.optim.SGD(model.parameters(), lr=0.1)  # built, never used
        for xb, yb in DataLoader(train_ds, batch_size=64, shuffle=True):
            model.zero_grad()
            F.cross_entropy(model(xb), yb).backward()
            with torch.no_grad():
                for p in model.parameters():
                    p -= 0.1 * p.grad

    findings, text = _auto(body)
    assert findings == [], text


class _Stream(torch.utils.data.IterableDataset):
    """Digits streamed one sample at a time; ``split``: each DataLoader worker takes its share."""

    def __init__(self, x, y, split):
        self.x, self.y, self.split = x, y, split

    def __len__(self):
        return len(self.x)

    def __iter__(self):
        info = torch.utils.data.get_worker_info()
        start, step = (info.id, info.num_workers) if self.split and info is not None else (0, 1)
        for i in range(start, len(self.x), step):
            yield self.x[i], self.y[i]


@pytest.mark.parametrize("split", [False, True])
def test_iterable_evaluation_set_read_whole_by_every_worker(split):
    x, y = digits()
    findings, text = _guarded_eval(lambda ds: DataLoader(_Stream(x[1000:1797], y[1000:1797], split), batch_size=100,
                                                         num_workers=2), epochs=1)
    if split:
        assert findings == [], text
    else:
        assert slugs(findings) == ["eval-samples-repeated"], text
        assert "each of its 2 worker processes iterated the whole data set" in text


def _two_fits(weighted_evaluation: bool):
    """A library's fit() called twice (pytorch-tabnet, session 51): each fit builds a new model and optimizer
    and a training loader with a WeightedRandomSampler (class balancing, with replacement), validates in eval
    mode after every epoch, and leaves the model in eval mode.  The second fit's first training pass starts
    before its new model has run a forward (so before a session that finds models itself has seen it), with
    the one model seen so far in eval mode."""
    from overt.guards.options import GuardOptions
    from overt.guards.session import GuardSession
    import io

    train_ds, val_ds = _data()
    y = train_ds.tensors[1]
    weights = (1.0 / torch.bincount(y).float())[y]
    train = DataLoader(train_ds, batch_size=100, sampler=WeightedRandomSampler(weights, num_samples=len(train_ds)))
    yv = val_ds.tensors[1]
    val = DataLoader(val_ds, batch_size=100, sampler=WeightedRandomSampler(
        (1.0 / torch.bincount(yv).float())[yv], num_samples=len(val_ds))) if weighted_evaluation else \
        DataLoader(val_ds, batch_size=100)
    session = GuardSession(GuardOptions(stream=io.StringIO(), ignore=TIMING), auto=True)
    try:
        for fit in range(2):
            model = mlp()
            opt = torch.optim.Adam(model.parameters(), lr=1e-2)
            for epoch in range(2):
                _fit(model, opt, train)
                _evaluate(model, val)
    finally:
        findings = session.close()
    return [f for f in findings if f.slug in COVERAGE], session.options.stream.getvalue()


def test_a_training_pass_begun_before_a_new_model_is_seen_is_not_an_evaluation():
    """The second fit's training passes draw with replacement, as training samplers may: the pass steps the
    optimizer, so it is no evaluation, whatever the modes of the models seen when its iterator was made."""
    findings, text = _two_fits(weighted_evaluation=False)
    assert findings == [], text


def test_a_weighted_evaluation_loader_across_two_fits_is_still_named():
    findings, text = _two_fits(weighted_evaluation=True)
    assert slugs(findings) == ["eval-samples-repeated"], text
