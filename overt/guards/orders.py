"""Guard on training epochs that repeat one shuffled order (slug ``shuffle-order-repeats``; issue 33,
invariants of correct training).

An invariant of a shuffled training loader: every epoch draws its samples in a new order.  Code that
puts the random state back inside the training loop breaks it without an error: ``torch.manual_seed``
called in an evaluation function (``generator=torch.manual_seed(seed)`` in a sampling call,
huggingface/diffusers#7991), in a callback or at the top of every epoch; a ``torch.Generator`` seeded
with a constant and made again for every epoch's loader; ``random.seed``/``np.random.seed`` before a
sampler that draws from them.  Every epoch then sees the same sequence of batches (and, for
augmentation drawn from the same generator, the same noise): the model fits one fixed stream.

Seen once per DataLoader pass, never per batch: when the iterator of a training pass is made (or a
persistent one reset), before any index is drawn, the first batches of indices are taken from its
sampler iterator and put back in front of it (``itertools.chain``: the loader yields exactly what it
would have, and the random state is consumed in the same order).  A pass counts as an epoch when the
optimizer stepped at least twice before the next pass over the same data set began (a peek with
``next(iter(loader))`` is not an epoch); an epoch whose first indices, in order, equal an earlier
epoch's is reported.

Premise, proved or silent:

- the sampler is one of torch's random samplers (``RandomSampler`` -- ``shuffle=True`` --,
  ``SubsetRandomSampler``, ``WeightedRandomSampler`` with replacement, or a subclass); an unshuffled
  loader, a custom sampler (a bucket sampler may legitimately keep most of its order) and an
  ``IterableDataset`` are not judged;
- the chance that two independent shuffles agree on the indices compared is below one in 10**9
  (worked out from the sampler's size, or its weights);
- a sampler with ``set_epoch`` whose ``epoch`` did not change between the two passes is
  ``unset-epoch``'s (:mod:`overt.guards.samplers`): not reported twice.

The cause is named where overt saw it: ``torch.manual_seed``, ``random.seed`` and
``numpy.random.seed`` are wrapped while the guards are active, and the calls made between the two
epochs (from the user's code) are the finding's ``where``; else the loader's own generator (made or
seeded again for each epoch), else the line that built the loader.
"""

from __future__ import annotations

import functools
import itertools
import math
import sys
from dataclasses import dataclass, field
from typing import Any

from torch.utils.data import RandomSampler, SubsetRandomSampler, WeightedRandomSampler

from overt.guards.check import Check
from overt.guards.where import is_user_file, user_location

#: batches (index-sampler items) taken ahead at the start of a pass, at most
AHEAD = 3
#: the largest chance, over all epochs compared, that two independent shuffles agree on what is compared
CHANCE = 1e-9

_SEEDS: list[tuple[int, str, str]] = []  # (serial, "torch.manual_seed", caller) of seeding calls, latest last
_SERIAL = itertools.count(1)
_LAST_SERIAL = [0]


def _sampler_of(it: Any) -> Any:
    index_sampler = getattr(it, "_index_sampler", None)
    return getattr(index_sampler, "sampler", index_sampler)


def _log_chance_per_index(sampler: Any) -> tuple[float, int] | None:
    """(log of the chance that one drawn index matches, the number of indices a permutation has, or 0 when
    drawn with replacement), or None when ``sampler`` is not one of torch's random samplers."""
    if isinstance(sampler, WeightedRandomSampler):
        if not sampler.replacement:
            return None
        w = sampler.weights.double()
        total = float(w.sum())
        if not total > 0:
            return None
        return math.log(float(((w / total) ** 2).sum())), 0
    if isinstance(sampler, SubsetRandomSampler):
        return 0.0, len(sampler.indices)
    if isinstance(sampler, RandomSampler):
        n = len(sampler.data_source)
        if sampler.replacement:
            return (-math.log(n), 0) if n > 1 else None
        return 0.0, n
    return None


def _chance(sampler: Any, m: int) -> float | None:
    """log of the chance that two independent passes of ``sampler`` hand out the same first ``m`` indices."""
    per = _log_chance_per_index(sampler)
    if per is None:
        return None
    log_p, n = per
    if not n:
        return m * log_p
    m = min(m, n)
    return math.lgamma(n - m + 1) - math.lgamma(n + 1)  # (n - m)! / n!


def _indices(item: Any) -> tuple[int, ...] | None:
    if isinstance(item, int):
        return (item,)
    tolist = getattr(item, "tolist", None)
    if tolist is not None:
        item = tolist()
        if isinstance(item, int):
            return (item,)
    if isinstance(item, (list, tuple)) and all(isinstance(i, int) for i in item):
        return tuple(item)
    return None


@dataclass
class Start:
    """The start of a training pass over one data set."""

    indices: tuple[int, ...]
    serial: int  # the seeding-call serial when the pass began (calls after it are between this pass and the next)
    step: int  # the session's optimizer steps when the pass began
    epoch: Any  # the sampler's ``epoch`` attribute, when it has one
    sampler: Any
    built: str | None
    it_id: int
    run: tuple[int, int] = (0, 0)  # the optimizers made before it began: a new run builds new ones
    number: int = 0  # the pass's number among the epochs of its data set (1-based), once it is one
    judged: bool = False


@dataclass
class History:
    epochs: dict[tuple, Start] = field(default_factory=dict)  # (run, first indices) -> the first epoch with them
    pending: Start | None = None
    count: int = 0


def take_first(it: Any) -> tuple[int, ...] | None:
    """Called once per training pass when its iterator is made or reset, before any index is drawn: the first
    indices its sampler hands out (the batches taken are put back in front of the sampler iterator), or
    None when the pass is not judged (its sampler is not one of torch's random samplers, fewer than two
    batches)."""
    sampler = _sampler_of(it)
    if _log_chance_per_index(sampler) is None:
        return None
    index_sampler = getattr(it, "_index_sampler", None)
    try:
        if len(index_sampler) < 2:
            return None
    except TypeError:
        return None
    source = getattr(it, "_sampler_iter", None)
    if source is None:
        return None
    taken: list[Any] = []
    try:
        for _ in range(AHEAD):
            taken.append(next(source))
    except StopIteration:
        pass
    except Exception as exc:  # the sampler's own error: raised where the loader would have raised it
        it._sampler_iter = itertools.chain(taken, _raising(exc))
        return None
    it._sampler_iter = itertools.chain(taken, source)
    out: list[int] = []
    for item in taken:
        idx = _indices(item)
        if idx is None:
            return None
        out.extend(idx)
    return tuple(out)


def _raising(exc: Exception) -> Any:
    raise exc
    yield  # a generator


def seed_wrapper(what: str, orig: Any) -> Any:
    """A wrapper of the seeding function ``orig`` (``what``: its name) that notes its caller while guards are active."""
    from overt.guards import patches

    @functools.wraps(orig)
    def seed(*args: Any, **kwargs: Any) -> Any:
        if patches.ACTIVE:
            where = user_location(2)
            if where is not None:
                serial = next(_SERIAL)
                _LAST_SERIAL[0] = serial
                _SEEDS.append((serial, what, where))
                if len(_SEEDS) > 64:
                    del _SEEDS[:32]
                if any(s.step > 0 for s in patches.ACTIVE):
                    _arm_draws(_family(what), serial)
        return orig(*args, **kwargs)

    return seed


#: generator family -> the serial of its seeding call made after training started whose next training draw is not
#: seen yet (0: none)
_ARMED = {"torch": 0, "np": 0, "random": 0}


#: a generator of one's own, per family, for the fixes
_OWN = {"torch": "g = torch.Generator().manual_seed(seed), passed as generator=g; or torch.random.fork_rng()",
        "np": "rng = np.random.default_rng(seed)", "random": "rng = random.Random(seed)"}


def _family(name: str) -> str:
    """The global generator a seeding function or a draw uses: "torch", "np" or "random"."""
    return name.split(".", 1)[0]


def _draw_targets() -> list[tuple[Any, str, str]]:
    """(owner, attribute, the name findings use) of the draws a hand-written shuffle or batch draw makes."""
    import random

    import torch

    out: list[tuple[Any, str, str]] = [(torch, "randperm", "torch.randperm"), (torch, "randint", "torch.randint"),
                                       (random, "shuffle", "random.shuffle")]
    np = sys.modules.get("numpy")
    if np is not None:
        out += [(np.random, "permutation", "np.random.permutation"), (np.random, "shuffle", "np.random.shuffle")]
    return out


def _arm_draws(family: str, serial: int) -> None:
    """A reseed after training started: look at the next hand-written shuffle or batch draw of a training context
    (``torch.randperm``, ``torch.randint``, ``np.random.permutation``, ``np.random.shuffle``, ``random.shuffle``).
    The wrappers are installed at the first such reseed only: a program that never reseeds in its loop pays
    nothing."""
    from overt.guards import patches

    _ARMED[family] = serial
    for owner, attr, name in _draw_targets():
        if (owner, attr) not in patches._ORIGINALS:  # put back by patches.deactivate
            patches._patch(owner, attr, functools.partial(_draw_wrapper, name))


def _training_context() -> list[Any]:
    """The active sessions whose watched models train with autograd on."""
    import torch

    from overt.guards import patches

    if not torch.is_grad_enabled():
        return []
    return [s for s in patches.ACTIVE if s.models and any(i.module.training for i in s.models.values())]


def _fingerprint(name: str, args: tuple, out: Any) -> tuple[tuple, float, tuple] | None:
    """(the first values drawn, log of the chance that an independent draw gives them, a shape key), or None when
    they are not read: a device tensor (no synchronisation), fewer than two values."""
    import torch

    if name.endswith("shuffle"):  # in place: the shuffled sequence
        seq = args[0] if args else None
        if seq is None or not hasattr(seq, "__len__") or isinstance(seq, torch.Tensor):
            return None
        n = len(seq)
        head = list(seq[:64]) if not hasattr(seq, "tolist") else seq[:64].tolist()
        kind = "perm"
    else:
        if isinstance(out, torch.Tensor):
            if out.device.type != "cpu":
                return None
            n, head = out.numel(), out.reshape(-1)[:64].tolist()
        elif hasattr(out, "tolist") and hasattr(out, "size"):
            n, head = int(out.size), out.reshape(-1)[:64].tolist()
        else:
            return None
        kind = "int" if name == "torch.randint" else "perm"
    try:
        values = tuple(head)
        hash(values)
    except TypeError:
        return None
    m = len(values)
    if m < 2:
        return None
    if kind == "perm":
        if len(set(values)) < m:
            return None  # repeated values: equal sequences are likelier than a permutation's
        log_chance = math.lgamma(n - m + 1) - math.lgamma(n + 1)
    else:  # randint: the range is at least the span of the values drawn
        span = max(values) - min(values) + 1
        log_chance = -m * math.log(span) if span > 1 else 0.0
    return values, log_chance, (n,)


def _draw_wrapper(name: str, orig: Any) -> Any:
    family = _family(name)

    @functools.wraps(orig)
    def draw(*args: Any, **kwargs: Any) -> Any:
        out = orig(*args, **kwargs)
        if _ARMED[family]:
            sessions = _training_context() if is_user_file(sys._getframe(1).f_code.co_filename) else []
            if sessions:  # called from the user's own code (a DataLoader's sampler is judged per pass)
                serial, _ARMED[family] = _ARMED[family], 0
                where = user_location(2)
                try:
                    fp = _fingerprint(name, args, out) if where is not None else None
                except Exception:  # never break training
                    fp = None
                if fp is not None:
                    for s in sessions:
                        orders = getattr(s, "orders", None)
                        if orders is not None:
                            try:
                                orders.drawn(name, fp, serial, where)
                            except Exception as exc:  # never break training
                                s.check_failed(orders, exc)
        return out

    return draw


def install(patch: Any) -> None:
    """Wrap the global seeding functions (called by :func:`overt.guards.patches.activate`)."""
    import random

    import torch

    patch(torch, "manual_seed", functools.partial(seed_wrapper, "torch.manual_seed"))
    patch(torch.random, "manual_seed", functools.partial(seed_wrapper, "torch.manual_seed"))
    patch(random, "seed", functools.partial(seed_wrapper, "random.seed"))
    np = sys.modules.get("numpy")
    if np is not None:
        patch(np.random, "seed", functools.partial(seed_wrapper, "np.random.seed"))


class OrderChecks(Check):
    """``prepared`` and ``pass_ended`` are called by :mod:`overt.guards.patches`."""

    name = "orders"

    def __init__(self, session: Any):
        super().__init__(session)
        self.data: dict[int, History] = {}  # id(dataset) -> its training passes
        self.built = 0  # optimizers made while the session is active
        self.draws: dict[tuple, list] = {}  # (torch function, line, shape) -> (values, step, reseed serial) drawn

    def prepared(self, it: Any, indices: tuple[int, ...]) -> None:
        """A training pass over ``it``'s data set begins; ``indices``: its first indices (:func:`take_first`)."""
        key = id(getattr(it, "_dataset", it))
        hist = self.data.get(key)
        if hist is None:
            if len(self.data) >= 64:
                del self.data[next(iter(self.data))]
            hist = self.data[key] = History()
        if hist.pending is not None:
            self._judge(hist, hist.pending)
        sampler = _sampler_of(it)
        hist.pending = Start(indices, _LAST_SERIAL[0], self.s.step, getattr(sampler, "epoch", None), sampler,
                             getattr(it, "_overt_built", None), id(it), self._run())

    def drawn(self, name: str, fp: tuple[tuple, float, tuple], serial: int, where: str) -> None:
        """The first draw ``name`` (``torch.randperm``, ...) of a training context after the reseed ``serial``, at
        ``where``: a hand-written shuffle or batch draw; ``fp``: :func:`_fingerprint`'s.  The same values at the
        same line after two reseeds, with training steps between them, repeat the training order."""
        values, log_chance, shape = fp
        key = (name, where, shape, self._run())
        records = self.draws.setdefault(key, [])
        for earlier_values, earlier_step, earlier_serial in records:
            if earlier_values == values and self.s.step - earlier_step >= 2 \
                    and log_chance + math.log(len(records)) <= math.log(CHANCE):
                self._report_draw(name, where, values, serial, earlier_serial)
                break
        if len(records) < 256:
            records.append((values, self.s.step, serial))

    def _report_draw(self, name: str, where: str, values: tuple, serial: int, earlier_serial: int) -> None:
        seeds = [(what, w) for sr, what, w in _SEEDS if sr == serial]
        if not seeds:
            return
        what, seed_where = seeds[0]
        kind = "batch draw" if name == "torch.randint" else "shuffle"
        shown = ", ".join(map(str, values[:6])) + (", ..." if len(values) > 6 else "")
        self.s.report(
            "shuffle-order-repeats",
            f"the training {kind} {name}(...) at {where} draws exactly the same values ({shown}) after each "
            f"call of {what}() at {seed_where}, and training steps run in between: the reseed, made after training "
            "started, puts the global random generator back in the same state, so every epoch feeds the model the "
            "same sequence of batches (and any noise or dropout mask drawn after it repeats too), and it fits that "
            "one stream.",
            where=f"{what} at {seed_where}",
            fix=f"do not reseed inside the training loop: give the code at {seed_where} its own generator "
            f"({_OWN[_family(what)]}) and draw from it, or save and restore the global state around it; seed once, "
            "before training",
            key=f"reseed:{seed_where}")

    def _run(self) -> tuple[int, int]:
        """The optimizers made so far, and those the session watches: a script that trains several models in turn
        (a sweep, folds) and seeds before building each is not repeating one run's epochs."""
        return self.built, 0

    def pass_ended(self, it: Any) -> None:
        """A pass ran to its end: judge it now when it trained (reported at the end of the epoch, not the next)."""
        hist = self.data.get(id(getattr(it, "_dataset", it)))
        if hist is not None and hist.pending is not None and hist.pending.it_id == id(it):
            self._judge(hist, hist.pending)

    def _judge(self, hist: History, start: Start) -> None:
        if start.judged or self.s.step - start.step < 2:
            return  # judged already, or not an epoch of training (a peek, an evaluation over the training data)
        start.judged = True
        hist.count += 1
        start.number = hist.count
        earlier = hist.epochs.get((start.run, start.indices))
        if earlier is None:
            if len(hist.epochs) < 4096:
                hist.epochs[(start.run, start.indices)] = start
            return
        log_chance = _chance(start.sampler, len(start.indices))
        if log_chance is None or log_chance + math.log(max(1, len(hist.epochs))) > math.log(CHANCE):
            return
        sampler = start.sampler
        if (getattr(sampler, "shuffle", False) and hasattr(sampler, "set_epoch") and start.epoch is not None
                and start.epoch == earlier.epoch):
            return  # set_epoch() not called: unset-epoch's finding (overt/guards/samplers.py)
        self._report(hist, earlier, start)

    def _report(self, hist: History, earlier: Start, start: Start) -> None:
        sampler = start.sampler
        name = type(sampler).__name__
        generator = getattr(sampler, "generator", None)
        kinds = ("torch.manual_seed",) if generator is None and type(sampler).__module__.startswith("torch.") else (
            "torch.manual_seed", "random.seed", "np.random.seed")
        calls = [(what, where) for serial, what, where in _SEEDS
                 if earlier.serial < serial <= start.serial and what in kinds] if generator is None else []
        key = str(id(hist))
        loader = f"the training DataLoader ({name}){' built at ' + start.built if start.built else ''}"
        shown = ", ".join(map(str, start.indices[:6])) + (", ..." if len(start.indices) > 6 else "")
        head = (f"epoch {start.number} of {loader} draws its first {len(start.indices)} samples in exactly the order "
                f"of epoch {earlier.number} ({shown}): the shuffle repeats, so every such epoch feeds the model the "
                "same sequence of batches (and any augmentation or noise drawn from the same generator repeats too), "
                "and it fits that one stream.")
        if calls:
            what, where = calls[-1]
            others = sorted({w for _, w in calls if w != where})
            cause = (f" {what}() at {where} runs between the two epochs, after training started: it puts the global "
                     "random generator back in the state the shuffle drew from"
                     + (f" (also at {', '.join(others)})" if others else "") + ".")
            fix = (f"do not reseed inside the training loop: give the call at {where} its own generator "
                   "(torch.Generator().manual_seed(seed), passed as generator=...), or wrap it in "
                   "torch.random.fork_rng(); seed once, before training")
            place = f"{what} at {where}"
            key = f"reseed:{where}"
        elif generator is not None:
            cause = (" The sampler draws from its own torch.Generator, which starts each of these epochs in the same "
                     "state: it is made again (or seeded again) with the same seed for every epoch.")
            fix = ("make the generator once, before the training loop, and pass the same object to every DataLoader "
                   "(DataLoader(..., shuffle=True, generator=g)); do not call g.manual_seed inside the loop")
            place = f"{name}(generator=...)" + (f" of the DataLoader built at {start.built}" if start.built else "")
        else:
            cause = (" The random state the shuffle draws from is put back to the same value before each of these "
                     "epochs (a seed or torch.set_rng_state call that overt did not see).")
            fix = ("seed once, before the training loop; anything that needs a fixed random stream inside the loop "
                   "gets its own torch.Generator or runs under torch.random.fork_rng()")
            place = "training DataLoader" + (f" built at {start.built}" if start.built else "")
        self.s.report("shuffle-order-repeats", head + cause, where=place, fix=fix, key=key)
