"""Steps per second: overt's engine vs a hand-written canonical loop, same process.

    python benchmarks/engine_overhead.py [--repeats 11] [--epochs 20] [--guards] [--compile BACKEND] [--cpu-time]
    python benchmarks/engine_overhead.py --step-minima [--repeats 7] [--epochs 20]   # on a loaded machine
    python benchmarks/engine_overhead.py --work [--epochs 20] [--top N] [--check-every N]   # counted, not timed
    python benchmarks/engine_overhead.py --work|--step-minima --model cnn|mid [--cpu-time]   # a costlier step
    python benchmarks/engine_overhead.py --every-step-checked [--repeats 5] [--epochs 8]   # one checked step's cost

Both loops train the same model (fresh, same seed) on the same data (the
digits training split, batch 64) for the same number of steps on CPU.  The
hand-written loop is the canonical one: train(), to(device), forward through
__call__, loss, backward, step, zero_grad(set_to_none=True), and it keeps the
loss for logging with ``loss.item()`` as such loops do.  Repetitions alternate
between the loops; the ratio of the fastest repetitions (the VM's noise only
adds time) and the ratio of the medians are printed.  Ratio = overt / hand
(1.00 = no overhead).  ``--guards`` also measures the engine with its default runtime
guards on (when the guards package is present).  ``--compile BACKEND`` runs every loop on
``torch.compile(model, backend=BACKEND)`` (the engine's ``compile=True``): with the guards on, the
checked steps run the model eagerly (overt/guards/compiled.py).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402
from torch import nn  # noqa: E402
from torch.utils.data import DataLoader  # noqa: E402

import overt  # noqa: E402
from overt.recipes.digits import load_digits_split  # noqa: E402

MODELS = {
    "tiny": lambda: nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10)),
    "mid": lambda: nn.Sequential(nn.Linear(64, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(),
                                 nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10)),
}


#: --model for --step-minima, --work, --every-step-checked: the guards' cost as a function of the step's cost, on
#: the same schedule (460 steps of 23 batches of 64 in 20 epochs): the tiny and mid MLPs on the digits training
#: split; the mnist recipe's CNN (overt/recipes/mnist.py, its defaults: 16/32 channels, 64 hidden, dropout) on the
#: first 1,437 MNIST t10k images (as many samples as the digits split: the same steps, epochs and checked steps)
def _cnn(channels: int, hidden: int):
    def make():
        from overt.recipes.mnist import MnistCNN

        return MnistCNN(channels, hidden, 0.25)
    return make


SCALED = {"tiny": ("tiny MLP", MODELS["tiny"], "digits"), "mid": ("mid MLP", MODELS["mid"], "digits"),
          "cnn": ("mnist CNN", _cnn(16, 64), "mnist")}


def _mnist_like(n: int, data_dir: str):
    """The first ``n`` MNIST t10k images of ``data_dir``, standardised as the mnist recipe does: (N, 1, 28, 28)
    floats and their labels."""
    from torch.utils.data import TensorDataset

    from overt.recipes.mnist import _pair, normalised

    images, labels = _pair(data_dir, "t10k")
    images, labels = images[:n], labels[:n]
    mean, std = float(images.mean()) / 255.0, float(images.std()) / 255.0
    return TensorDataset(normalised(images, mean, std), torch.as_tensor(labels.astype("int64")))


BACKEND: str | None = None  # --compile
CLOCK = time.perf_counter  # --cpu-time: time.process_time (this process's CPU: preemption left out)
CLOCK_NS = time.perf_counter_ns  # the same for --step-minima


def _reused(make):
    """``make`` returning the same module every time, its parameters reset (seeded by the caller)."""
    made = []

    def again():
        if not made:
            made.append(make())
        for m in made[0].modules():
            if hasattr(m, "reset_parameters"):
                m.reset_parameters()
        return made[0]
    return again


def hand_loop(make, data, epochs: int) -> tuple[float, int]:
    torch.manual_seed(0)
    device = torch.device("cpu")
    model = make().to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    if BACKEND:
        model = torch.compile(model, backend=BACKEND)
    loss_fn = nn.CrossEntropyLoss()
    loader = DataLoader(data, batch_size=64, shuffle=True, generator=torch.Generator().manual_seed(0))
    steps, running = 0, 0.0
    start = CLOCK()
    for _ in range(epochs):
        model.train()
        for x, y in loader:
            x, y = x.to(device), y.to(device)
            loss = loss_fn(model(x), y)
            loss.backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            running += loss.item()
            steps += 1
    return CLOCK() - start, steps


def overt_loop(make, data, epochs: int, guards: bool) -> tuple[float, int]:
    torch.manual_seed(0)
    model = make()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    trainer = overt.Trainer(model, optimizer, nn.CrossEntropyLoss(), data, epochs=epochs, batch_size=64,
                            device="cpu", progress="off", guards=guards, compile=bool(BACKEND))
    start = CLOCK()
    summary = trainer.fit()
    return CLOCK() - start, summary["steps"]


def split_costs(data) -> None:
    """Per-step and per-fit() cost of each loop: time(10 epochs) - time(1 epoch) over 9 epochs."""
    make = MODELS["tiny"]
    best: dict[int, dict[str, float]] = {}
    for epochs in (1, 10):
        variants = {"hand": lambda: hand_loop(make, data, epochs),
                    "overt": lambda: overt_loop(make, data, epochs, guards=False),
                    "overt+guards": lambda: overt_loop(make, data, epochs, guards=True)}
        for run in variants.values():
            run()
        times: dict[str, list[float]] = {k: [] for k in variants}
        steps = 0
        for _ in range(15):
            for key, run in variants.items():
                seconds, steps = run()
                times[key].append(seconds)
        best[epochs] = {k: min(v) for k, v in times.items()}
        if epochs == 1:
            steps_one = steps
    for key in best[1]:
        per_step = (best[10][key] - best[1][key]) / (9 * steps_one)
        fixed = best[1][key] - per_step * steps_one
        print(f"tiny MLP {key:>13}: {per_step * 1e6:6.1f} us per step, {fixed * 1e3:5.2f} ms per fit()")


def per_step_minima(data, epochs: int, repeats: int, model: str = "tiny") -> None:
    """The default guards' cost on the tiny MLP, robust to a loaded machine: every optimizer step
    of a run is timed (a global optimizer post-hook), the fastest of ``repeats`` repetitions of
    each step index is kept (preemption only adds time), and a run's time is the sum of those
    minima plus the fastest start (``fit()`` to the first step's end) and end (the last step to
    ``fit()``'s return).  Guards on vs off, alternating; the extra time is split by kind of step
    (checked, the one after a checked step, the first of an epoch, the others)."""
    import torch.optim.optimizer as optim_mod

    from overt.guards import clock
    from overt.guards.engine import GuardCallback

    defaults = GuardCallback.__init__.__kwdefaults__
    label, make, _ = SCALED[model]
    stamps: list[int] = []
    handle = optim_mod.register_optimizer_step_post_hook(lambda *_: stamps.append(CLOCK_NS()))

    def one(guards: bool) -> tuple[int, list[int], int]:
        torch.manual_seed(0)
        model = make()
        trainer = overt.Trainer(model, torch.optim.AdamW(model.parameters(), lr=1e-3), nn.CrossEntropyLoss(), data,
                                epochs=epochs, batch_size=64, device="cpu", progress="off", guards=guards)
        stamps.clear()
        t0 = CLOCK_NS()
        trainer.fit()
        t1 = CLOCK_NS()
        return stamps[0] - t0, [b - a for a, b in zip(stamps, stamps[1:])], t1 - stamps[-1]

    one(True), one(False)  # warm-up
    runs: dict[bool, list[tuple[int, list[int], int]]] = {True: [], False: []}
    for _ in range(repeats):
        for guards in (False, True):
            runs[guards].append(one(guards))
    handle.remove()
    best = {g: (min(r[0] for r in rs), [min(r[1][i] for r in rs) for i in range(len(rs[0][1]))],
                min(r[2] for r in rs)) for g, rs in runs.items()}
    n = len(best[True][1]) + 1
    per_epoch = -(-len(data) // 64)
    checked = set(clock.checked_steps(n, check_every=defaults["check_every"], warmup_steps=defaults["warmup_steps"]))
    kinds: dict[str, float] = {}
    for i, (on, off) in enumerate(zip(best[True][1], best[False][1])):
        step = i + 1
        kind = ("checked, warm-up" if step in checked and step < defaults["warmup_steps"]
                else "checked, later" if step in checked else "after a checked one" if step - 1 in checked
                else "first of an epoch" if step % per_epoch == 0 else "other")
        kinds[kind] = kinds.get(kind, 0.0) + (on - off) / 1e6
    total = {g: (b[0] + sum(b[1]) + b[2]) / 1e6 for g, b in best.items()}
    print(f"{label}, {n} steps ({len(checked)} checked), sum of per-step minima over {repeats} repeats: "
          f"guards off {total[False]:.1f} ms, on {total[True]:.1f} ms, guards' cost "
          f"{(total[True] / total[False] - 1) * 100:+.1f}%")
    kinds = {"checked": kinds.get("checked, warm-up", 0.0) + kinds.get("checked, later", 0.0), **kinds}
    print(f"  extra time: start (with the first checked step) {(best[True][0] - best[False][0]) / 1e6:+.2f} ms, end "
          f"{(best[True][2] - best[False][2]) / 1e6:+.2f} ms, "
          + ", ".join(f"{k} steps {v:+.2f} ms" for k, v in kinds.items()))
    print(f"  a plain step (median of the minima, guards off) {statistics.median(best[False][1]) / 1e3:.0f} us")


def every_step_checked(data, epochs: int, repeats: int) -> None:
    """What one checked step costs on the tiny MLP, robust to a loaded machine: every step after the
    warm-up is checked (the clock's interval set to 1, a probe, not a schedule anyone runs), every optimizer
    step is timed, the fastest of ``repeats`` repetitions of each step index is kept, and the median over
    the step indices of (guards on - guards off) is printed, with its quartiles."""
    import torch.optim.optimizer as optim_mod

    from overt.guards import clock

    stamps: list[int] = []
    handle = optim_mod.register_optimizer_step_post_hook(lambda *_: stamps.append(time.perf_counter_ns()))
    interval = clock.interval
    clock.interval = lambda index, check_every: 1

    def one(guards: bool) -> list[int]:
        torch.manual_seed(0)
        model = MODELS["tiny"]()
        trainer = overt.Trainer(model, torch.optim.AdamW(model.parameters(), lr=1e-3), nn.CrossEntropyLoss(), data,
                                epochs=epochs, batch_size=64, device="cpu", progress="off", guards=guards)
        stamps.clear()
        trainer.fit()
        return [b - a for a, b in zip(stamps, stamps[1:])]

    try:
        one(True), one(False)  # warm-up
        runs: dict[bool, list[list[int]]] = {True: [], False: []}
        for _ in range(repeats):
            for guards in (False, True):
                runs[guards].append(one(guards))
    finally:
        clock.interval = interval
        handle.remove()
    best = {g: [min(r[i] for r in rs) for i in range(len(rs[0]))] for g, rs in runs.items()}
    extra = [(on - off) / 1e3 for on, off in zip(best[True][5:], best[False][5:])]  # past the warm-up
    q1, _, q3 = statistics.quantiles(extra, n=4)
    print(f"tiny MLP, every step checked, {len(extra)} steps, fastest of {repeats} repeats per step: a checked step "
          f"costs {statistics.median(extra):.0f} us more (quartiles {q1:.0f}-{q3:.0f}) than a plain step of "
          f"{statistics.median(best[False]) / 1e3:.0f} us")


def work_counts(data, epochs: int, val=None, top: int = 0, model: str = "tiny") -> None:
    """What the default guards add to each kind of step of the tiny MLP, counted instead of timed (the same
    on a busy machine and a quiet one): PyTorch operators dispatched (a ``TorchDispatchMode``) and Python
    calls (``sys.setprofile``: functions and builtins), guards on minus guards off, per step index (a global
    optimizer post-hook ends each step), then summed by kind of step as ``--step-minima`` splits them, the
    checked steps also apart: the first (with ``fit()``'s start), the rest of the warm-up, the later ones.
    With ``val`` (``--val``) the engine evaluates after every epoch: each evaluation pass counts with the first
    step of the next epoch (the last one with the end of ``fit()``).  With ``top`` (``--top N``) the N functions
    that make the most extra Python calls in each kind of step are listed under it (each call counted for its
    caller, so that what a wrapper passes through cancels out: where to cut next)."""
    import collections

    import torch.optim.optimizer as optim_mod
    from torch.utils._python_dispatch import TorchDispatchMode

    from overt.guards import clock
    from overt.guards.engine import GuardCallback

    defaults = GuardCallback.__init__.__kwdefaults__
    label, make, _ = SCALED[model]
    step = [0]
    ops: dict[int, int] = {}
    calls: dict[int, int] = {}

    class Count(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            ops[step[0]] = ops.get(step[0], 0) + 1
            return func(*args, **(kwargs or {}))

    by_function: dict[int, collections.Counter] = {}

    def profile(frame, event, arg):
        if event in ("call", "c_call"):
            calls[step[0]] = calls.get(step[0], 0) + 1
            if top:  # the call counts for the function that makes it (what a wrapper passes on cancels out)
                caller = frame.f_back if event == "call" else frame
                code = caller.f_code if caller is not None else None
                where = f"{code.co_filename}:{code.co_firstlineno}({code.co_name})" if code else "?"
                by_function.setdefault(step[0], collections.Counter())[where] += 1

    handle = optim_mod.register_optimizer_step_post_hook(lambda *_: step.__setitem__(0, step[0] + 1))

    def one(guards: bool) -> tuple[dict[int, int], dict[int, int]]:
        torch.manual_seed(0)
        model = make()
        trainer = overt.Trainer(model, torch.optim.AdamW(model.parameters(), lr=1e-3), nn.CrossEntropyLoss(), data,
                                epochs=epochs, batch_size=64, device="cpu", progress="off", guards=guards,
                                val_data=val)
        step[0] = 0
        ops.clear()
        calls.clear()
        by_function.clear()
        with Count():
            sys.setprofile(profile)
            try:
                trainer.fit()
            finally:
                sys.setprofile(None)
        return dict(ops), dict(calls), dict(by_function)

    one(True)  # warm-up: first-call caches
    on, off = one(True), one(False)
    handle.remove()
    n = step[0]
    per_epoch = -(-len(data) // 64)
    checked = set(clock.checked_steps(n, check_every=defaults["check_every"], warmup_steps=defaults["warmup_steps"]))
    kinds: dict[str, list[int]] = {}
    functions: dict[str, collections.Counter] = {}
    for index in range(n + 1):  # index n: after the last step (the end of fit())
        kind = ("end of fit()" if index == n else "checked, the first" if index == 0
                else "checked, warm-up" if index in checked and index < defaults["warmup_steps"]
                else "checked, later" if index in checked
                else "after a checked one" if index - 1 in checked
                else "first of an epoch" if index % per_epoch == 0 else "other")
        row = kinds.setdefault(kind, [0, 0, 0])
        row[0] += 1
        row[1] += on[0].get(index, 0) - off[0].get(index, 0)
        row[2] += on[1].get(index, 0) - off[1].get(index, 0)
        if top:
            extra = functions.setdefault(kind, collections.Counter())
            extra.update(on[2].get(index, {}))
            extra.subtract(off[2].get(index, {}))
    print(f"{label}, {n} steps ({len(checked)} checked; the first includes fit()'s start)"
          + (", evaluated after every epoch" if val is not None else "") + ", guards on minus off:")
    rows = [kinds[k] for k in kinds if k.startswith("checked")]
    kinds = {"checked": [sum(r[i] for r in rows) for i in range(3)], **kinds}
    for kind, (count, extra_ops, extra_calls) in kinds.items():
        print(f"  {kind:>20}: {count:4d} step(s), {extra_ops / count:7.1f} operators and {extra_calls / count:8.1f} "
              f"Python calls more per step ({extra_ops} and {extra_calls} in all)")
        for where, extra in sorted(functions.get(kind, {}).items(), key=lambda item: -abs(item[1]))[:top]:
            print(f"{'':>24}{extra / count:9.1f}  {where}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=11)
    parser.add_argument("--epochs", type=int, default=20)
    parser.add_argument("--guards", action="store_true", help="also time the engine with default guards on")
    parser.add_argument("--split", action="store_true",
                        help="split the tiny MLP's overhead into a per-step and a per-fit() part "
                             "(fastest of 15 runs of 1 and of 10 epochs)")
    parser.add_argument("--compile", metavar="BACKEND", default=None,
                        help="torch.compile every model with this backend (aot_eager, inductor)")
    parser.add_argument("--cpu-time", action="store_true",
                        help="time with this process's CPU time, not the wall clock (a busy shared machine; "
                             "also for --step-minima)")
    parser.add_argument("--step-minima", action="store_true",
                        help="the default guards' cost on the tiny MLP from the fastest of --repeats repetitions "
                             "of each step (robust to a loaded machine; --epochs per run)")
    parser.add_argument("--work", action="store_true",
                        help="count the default guards' work on the tiny MLP (PyTorch operators and Python calls "
                             "per kind of step, guards on minus off): no timing, so the same on any machine")
    parser.add_argument("--val", action="store_true",
                        help="with --work: the engine evaluates on the digits validation split after every epoch")
    parser.add_argument("--top", type=int, default=0, metavar="N",
                        help="with --work: under each kind of step, the N functions whose own calls (Python "
                             "functions and builtins they call) change the most with the guards on (a wrapper's "
                             "callee has another caller: a pair of rows)")
    parser.add_argument("--check-every", type=int, default=None, metavar="N",
                        help="with --work or --step-minima: the engine's guards check one step in N after the "
                             "warm-up instead of their default (what a sparser schedule would save; the default "
                             "schedule is the one the budget is measured on)")
    parser.add_argument("--model", choices=sorted(SCALED), default="tiny",
                        help="with --work or --step-minima: the model (tiny/mid MLP on digits; the mnist recipe's CNN "
                             "on as many MNIST t10k images: the same 460-step schedule)")
    parser.add_argument("--mnist-dir", default=str(Path(__file__).resolve().parents[2] / "shared" / "data"
                                                   / "mnist-t10k"),
                        help="the MNIST t10k files for --model cnn")
    parser.add_argument("--every-step-checked", action="store_true",
                        help="what one checked step costs on the tiny MLP: every step checked, per-step minima "
                             "of --repeats repetitions (--epochs per run)")
    args = parser.parse_args()
    if args.cpu_time:
        global CLOCK, CLOCK_NS
        CLOCK, CLOCK_NS = time.process_time, time.process_time_ns
    if args.compile:
        global BACKEND
        BACKEND = args.compile
        real = torch.compile
        torch.compile = lambda model, **kw: real(model, **{"backend": BACKEND, **kw})  # the engine's too
        for name, make in list(MODELS.items()):  # one module per model, re-initialised for each run:
            MODELS[name] = _reused(make)         # dynamo compiles it once, not once per run
    if args.check_every is not None:  # the engine's GuardCallback default, which both modes read and use
        from overt.guards.engine import GuardCallback

        GuardCallback.__init__.__kwdefaults__["check_every"] = args.check_every
    torch.set_num_threads(1)
    data, val = load_digits_split(0.2, 0)
    if SCALED[args.model][2] == "mnist":
        if args.val:
            parser.error("--val is for the digits models")
        data = _mnist_like(len(data), args.mnist_dir)
    if args.split:
        split_costs(data)
        return
    if args.step_minima:
        per_step_minima(data, args.epochs, args.repeats, args.model)
        return
    if args.work:
        work_counts(data, args.epochs, val if args.val else None, args.top, args.model)
        return
    if args.every_step_checked:
        every_step_checked(data, args.epochs, args.repeats)
        return
    print(f"torch {torch.__version__}, {torch.get_num_threads()} thread, compile {args.compile or 'off'}, "
          "digits train split "
          f"({len(data)} samples), batch 64, {args.epochs} epochs per run, {args.repeats} repeats")
    for name, make in MODELS.items():
        variants = {"hand": lambda: hand_loop(make, data, args.epochs),
                    "overt": lambda: overt_loop(make, data, args.epochs, guards=False)}
        if args.guards:
            variants["overt+guards"] = lambda: overt_loop(make, data, args.epochs, guards=True)
        for run in variants.values():  # warm-up
            run()
        times: dict[str, list[float]] = {k: [] for k in variants}
        steps = {}
        for _ in range(args.repeats):
            for key, run in variants.items():
                seconds, steps[key] = run()
                times[key].append(seconds)
        assert len(set(steps.values())) == 1, steps
        # the VM is noisy: the minimum estimates each loop's intrinsic cost, the median its typical cost
        best = {k: steps[k] / min(v) for k, v in times.items()}
        typical = {k: steps[k] / statistics.median(v) for k, v in times.items()}
        line = (f"{name:>5} MLP: hand {best['hand']:7.0f} steps/s   overt {best['overt']:7.0f} steps/s   "
                f"ratio {best['overt'] / best['hand']:.3f} (median-based {typical['overt'] / typical['hand']:.3f})")
        if args.guards:
            line += (f"   overt+guards {best['overt+guards']:7.0f} steps/s   ratio "
                     f"{best['overt+guards'] / best['hand']:.3f} (median-based "
                     f"{typical['overt+guards'] / typical['hand']:.3f})")
        print(line)


if __name__ == "__main__":
    main()
