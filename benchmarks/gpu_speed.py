"""Tokens per second and MFU on the ``gpt`` recipe: hand-written loops, overt, Lightning.

    python benchmarks/gpu_speed.py [--repeats 3] [--steps 50] [--warmup 10] [--json F] [--md F]
    python benchmarks/gpu_speed.py --tiny          # CPU, seconds: the same code paths on a tiny model

Six ways to train the same model (``overt.recipes.gpt.GPT``, fresh, same seed) on the same
data (Tiny Shakespeare windows, shuffled), interleaved over ``--repeats`` repetitions:

- ``a-hand-fp32``: the canonical hand-written loop: train(), batch to the device, forward,
  loss, backward, clip, step, zero_grad(set_to_none=True), the loss read with ``.item()``
  every step; fp32, no compile, AdamW's default (foreach) implementation.
- ``b-hand-tuned``: the same loop with bf16 autocast, ``torch.compile`` and fused AdamW; the
  loss stays on the device (read once at the end).
- ``c-overt-defaults``: ``overt.Trainer`` (default guards and callbacks, no run directory)
  with the recipe's defaults (precision ``auto`` = bf16 on a GPU that supports it, no compile).
- ``d-overt-bf16-compile``: the same with ``precision=bf16 compile=true``.
- ``f-overt-bf16-compile-unguarded``: (d) with ``guards=false``: what the guards cost at this size,
  so that a gap between (d) and (e) can be attributed (the guards, or the loop around them).
- ``e-lightning``: Lightning with ``precision="bf16-mixed"``, the model compiled, fused AdamW,
  clipping in ``on_before_optimizer_step`` (Lightning refuses ``gradient_clip_val`` with a fused
  optimizer); no logger, checkpointing or progress bar.

Every variant clips gradients at norm 1.0 and trains ``--warmup`` steps before the timed
``--steps`` (the warm-up time, compilation included, is reported apart). The clock starts and
stops after a device synchronisation. Tokens per step = batch x context.  MFU = 6 x N x
tokens/s / peak, N the distinct trainable parameters (attention's own FLOPs are not counted:
they add about 12 x layers x context x embed per token, ~5% at the default size); the peak
is ``--peak-tflops`` (default 989, the dense bf16 peak of an H100 SXM; the H200 has the
same), the same for the fp32 variant, and none on a CPU.  ``--tiny`` runs on the CPU with
compilation off (``--compile`` turns it on) so that the suite tests the script in seconds.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402
from torch.utils.data import DataLoader  # noqa: E402

VARIANTS = ("a-hand-fp32", "b-hand-tuned", "c-overt-defaults", "d-overt-bf16-compile", "e-lightning",
            "f-overt-bf16-compile-unguarded")
FULL = {"layers": 8, "heads": 8, "embed": 512, "context": 256, "batch_size": 128, "stride": 64, "limit_chars": 0}
TINY = {"layers": 1, "heads": 2, "embed": 32, "context": 32, "batch_size": 8, "stride": 16, "limit_chars": 20000}


def default_text() -> Path:
    """Tiny Shakespeare: ``$OVERT_GPT_TEXT``, else the shared data folder beside the checkout, else
    ``data/tinyshakespeare/input.txt`` (the recipe's default)."""
    import os

    for candidate in (os.environ.get("OVERT_GPT_TEXT"), ROOT.parent / "shared/data/tinyshakespeare/input.txt",
                      ROOT / ".gpudata/tinyshakespeare/input.txt", Path("data/tinyshakespeare/input.txt")):
        if candidate and Path(candidate).is_file():
            return Path(candidate)
    return Path("data/tinyshakespeare/input.txt")


class Spec:
    """What every variant trains: the resolved recipe config, device, step counts."""

    def __init__(self, args: argparse.Namespace):
        from overt.recipes.base import recipe_config

        sizes = dict(TINY if args.tiny else FULL)
        if args.batch_size:
            sizes["batch_size"] = args.batch_size
        self.device = torch.device(args.device or ("cuda" if torch.cuda.is_available() and not args.tiny else "cpu"))
        self.compile = args.compile if args.compile is not None else not args.tiny
        overrides = {**sizes, "text": str(args.text or default_text()), "epochs": 1000, "val_every": 1000,
                     "device": self.device.type, "progress": "off", "seed": 0}
        self.module, self.cfg = recipe_config("gpt", overrides)
        from overt.recipes.gpt import Windows, load_text

        self.vocab, train_ids, _ = load_text(self.cfg)
        self.data = Windows(train_ids, self.cfg.context, self.cfg.stride)
        self.warmup, self.steps = args.warmup, args.steps
        self.tokens_per_step = self.cfg.batch_size * self.cfg.context
        need = self.warmup + self.steps
        per_epoch = len(self.data) // self.cfg.batch_size
        if per_epoch < need:
            raise SystemExit(f"an epoch has {per_epoch} steps, fewer than warm-up + timed ({need}): "
                             "lower --steps/--warmup or the batch size")

    def model(self) -> torch.nn.Module:
        from overt.recipes.gpt import build_model

        torch.manual_seed(0)
        return build_model(self.cfg, {"vocab": self.vocab}).to(self.device)

    def optimizer(self, model: torch.nn.Module, fused: bool) -> torch.optim.Optimizer:
        from overt.recipes.gpt import make_optimizer

        return make_optimizer(model, self.cfg.lr, self.cfg.weight_decay, fused)

    def loader(self) -> DataLoader:
        return DataLoader(self.data, batch_size=self.cfg.batch_size, shuffle=True, drop_last=True,
                          pin_memory=self.device.type == "cuda", generator=torch.Generator().manual_seed(0))

    def sync(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)


def compiled_graphs() -> int:
    """Graphs Dynamo compiled so far in this process (recompilations included)."""
    try:
        from torch._dynamo.utils import counters
    except ImportError:  # pragma: no cover
        return 0
    return int(counters["stats"]["unique_graphs"])


def hand(spec: Spec, tuned: bool) -> dict[str, Any]:
    """(a) the canonical loop, or (b) the tuned one."""
    from overt.recipes.gpt import sequence_loss

    model = spec.model()
    optimizer = spec.optimizer(model, fused=tuned)
    forward = torch.compile(model) if tuned and spec.compile else model
    bf16 = tuned and spec.device.type in ("cuda", "cpu")
    autocast = (lambda: torch.autocast(spec.device.type, dtype=torch.bfloat16)) if bf16 else contextlib.nullcontext
    non_blocking = spec.device.type == "cuda"
    kept: list[Any] = []
    marks: list[float] = []
    start = time.perf_counter()
    model.train()
    for i, (x, y) in enumerate(spec.loader()):
        if i == spec.warmup:
            spec.sync()
            marks.append(time.perf_counter())
        if i == spec.warmup + spec.steps:
            break
        x, y = x.to(spec.device, non_blocking=non_blocking), y.to(spec.device, non_blocking=non_blocking)
        with autocast():
            loss = sequence_loss(forward(x), y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), spec.cfg.clip_grad_norm)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        kept.append(loss.detach() if tuned else loss.item())
    spec.sync()
    end = time.perf_counter()
    last = float(kept[-1]) if kept else float("nan")
    return {"warmup_s": marks[0] - start, "timed_s": end - marks[0], "last_loss": last}


class _Clock:
    """A callback (overt's or Lightning's shape) that marks the start and end of the timed steps."""

    def __init__(self, spec: Spec, stop: Callable[[Any], None]):
        self.spec, self.stop, self.step, self.marks = spec, stop, 0, [time.perf_counter()]

    def tick(self, trainer: Any) -> None:
        self.step += 1
        if self.step in (self.spec.warmup, self.spec.warmup + self.spec.steps):
            self.spec.sync()
            self.marks.append(time.perf_counter())
        if self.step == self.spec.warmup + self.spec.steps:
            self.stop(trainer)


def overt_run(spec: Spec, **overrides: Any) -> dict[str, Any]:
    """(c) and (d): ``overt.Trainer`` with the recipe's defaults and ``overrides``."""
    import overt
    from overt.engine.callbacks import Callback
    from overt.recipes.base import build_recipe, recipe_config

    keys = ("layers", "heads", "embed", "context", "batch_size", "stride", "limit_chars", "text", "epochs",
            "val_every", "device", "progress", "seed")
    values = {k: getattr(spec.cfg, k) for k in keys}
    module, cfg = recipe_config("gpt", {**values, **overrides})
    torch.manual_seed(0)
    recipe = build_recipe(module, cfg)

    def stop(trainer: Any) -> None:
        trainer.should_stop = True

    clock = _Clock(spec, stop)

    class Timed(Callback):
        def on_step_end(self, trainer: Any, logs: dict[str, Any]) -> None:
            clock.tick(trainer)

    trainer = overt.Trainer(recipe.model, recipe.optimizer, recipe.loss_fn, recipe.train_data, recipe.val_data,
                            metrics=recipe.metrics, callbacks=[*recipe.callbacks, Timed()], config=cfg)
    clock.marks = [time.perf_counter()]
    summary = trainer.fit()
    start, warm, end = clock.marks
    return {"warmup_s": warm - start, "timed_s": end - warm, "precision": summary["precision"],
            "last_loss": trainer.running_loss.read_interval()}


def lightning(spec: Spec) -> dict[str, Any]:
    """(e) Lightning, bf16-mixed, the model compiled, fused AdamW, clipping at the same norm."""
    import lightning as L

    from overt.recipes.gpt import sequence_loss

    model = spec.model()
    forward = torch.compile(model) if spec.compile else model

    class Lit(L.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def training_step(self, batch: Any, index: int) -> torch.Tensor:
            x, y = batch
            return sequence_loss(forward(x), y)

        def configure_optimizers(self) -> Any:
            return spec.optimizer(self.model, fused=True)

        def on_before_optimizer_step(self, optimizer: Any) -> None:
            # Lightning refuses gradient_clip_val with a fused optimizer (it assumes a loss scaler
            # unscales inside the step); under bf16 there is none, so clip here, as the others do
            torch.nn.utils.clip_grad_norm_(self.parameters(), spec.cfg.clip_grad_norm)

    def stop(trainer: Any) -> None:
        trainer.should_stop = True

    clock = _Clock(spec, stop)

    class Timed(L.Callback):
        def on_train_batch_end(self, trainer: Any, *args: Any) -> None:
            clock.tick(trainer)

    trainer = L.Trainer(accelerator="gpu" if spec.device.type == "cuda" else "cpu", devices=1,
                        precision="bf16-mixed", max_steps=spec.warmup + spec.steps, max_epochs=1000,
                        logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False, num_sanity_val_steps=0,
                        limit_val_batches=0, callbacks=[Timed()], default_root_dir=tempfile.mkdtemp())
    clock.marks = [time.perf_counter()]
    trainer.fit(Lit(), train_dataloaders=spec.loader())
    start, warm, end = clock.marks
    return {"warmup_s": warm - start, "timed_s": end - warm}


def run_variant(spec: Spec, name: str) -> dict[str, Any]:
    graphs = compiled_graphs()
    if name == "a-hand-fp32":
        result = hand(spec, tuned=False)
    elif name == "b-hand-tuned":
        result = hand(spec, tuned=True)
    elif name == "c-overt-defaults":
        result = overt_run(spec)
    elif name == "d-overt-bf16-compile":
        result = overt_run(spec, precision="bf16", compile=spec.compile)
    elif name == "f-overt-bf16-compile-unguarded":
        result = overt_run(spec, precision="bf16", compile=spec.compile, guards=False)
    else:
        result = lightning(spec)
    result["graphs_compiled"] = compiled_graphs() - graphs
    return result


def peak_flops(spec: Spec, peak_tflops: float) -> float | None:
    return peak_tflops * 1e12 if spec.device.type == "cuda" else None


def report(args: argparse.Namespace, spec: Spec, header: str, device_name: str, n: int, peak: float | None,
           runs: dict[str, list[dict[str, Any]]], quiet: bool = False) -> dict[str, Any]:
    """The summary, ratios, markdown table; written to --json/--md (after every repetition, so a
    run cut short still leaves what it measured)."""
    summary = {}
    for name, rs in runs.items():
        ok = [r for r in rs if "tokens_per_s" in r]
        if not ok:
            summary[name] = {"error": rs[0].get("error") if rs else "not run"}
            continue
        best = max(r["tokens_per_s"] for r in ok)
        summary[name] = {"tokens_per_s_best": best,
                         "tokens_per_s_median": statistics.median(r["tokens_per_s"] for r in ok),
                         "mfu_best": None if peak is None else 6 * n * best / peak,
                         "warmup_s_first": ok[0]["warmup_s"], "graphs_compiled": [r["graphs_compiled"] for r in ok],
                         "errors": [r["error"] for r in rs if "error" in r]}

    def ratio(x: str, y: str) -> float | None:
        if "tokens_per_s_best" in summary.get(x, {}) and "tokens_per_s_best" in summary.get(y, {}):
            return summary[x]["tokens_per_s_best"] / summary[y]["tokens_per_s_best"]
        return None

    ratios = {"d/b (target >= 0.98)": ratio("d-overt-bf16-compile", "b-hand-tuned"),
              "d/a (target >= 1.6)": ratio("d-overt-bf16-compile", "a-hand-fp32"),
              "d/e (target >= 1.0)": ratio("d-overt-bf16-compile", "e-lightning"),
              "c/a": ratio("c-overt-defaults", "a-hand-fp32"),
              "d/f (the guards' share)": ratio("d-overt-bf16-compile", "f-overt-bf16-compile-unguarded"),
              "f/e": ratio("f-overt-bf16-compile-unguarded", "e-lightning")}
    result = {"header": header, "torch": torch.__version__, "device": device_name, "params": n,
              "peak_flops_assumed": peak, "tokens_per_step": spec.tokens_per_step, "warmup": args.warmup,
              "steps": args.steps, "repeats": args.repeats, "compile": spec.compile,
              "config": FULL if not args.tiny else TINY,
              "summary": summary, "ratios": ratios, "runs": runs}
    lines = [f"# gpu_speed: {header}", "",
             "| variant | tokens/s (best) | median | MFU (best) | first warm-up s | graphs compiled |",
             "|---|---|---|---|---|---|"]
    for name, s in summary.items():
        if "error" in s:
            lines.append(f"| {name} | error: {s['error']} | | | | |")
            continue
        mfu = "n/a" if s["mfu_best"] is None else f"{100 * s['mfu_best']:.1f}%"
        lines.append(f"| {name} | {s['tokens_per_s_best']:,.0f} | {s['tokens_per_s_median']:,.0f} | {mfu} | "
                     f"{s['warmup_s_first']:.1f} | {s['graphs_compiled']} |")
    lines += ["", *[f"- {k}: {'n/a' if v is None else f'{v:.3f}'}" for k, v in ratios.items()],
              "", f"MFU = 6 x N x tokens/s / {args.peak_tflops:g} TFLOP/s (dense bf16 peak assumed; attention FLOPs "
              "not counted)."]
    text = "\n".join(lines) + "\n"
    if not quiet:
        print(text, flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1, default=str) + "\n")
    if args.md:
        Path(args.md).write_text(text)
    return result


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tiny", action="store_true", help="a tiny model on the CPU (seconds)")
    parser.add_argument("--repeats", type=int, default=None, help="interleaved repetitions (3; tiny: 1)")
    parser.add_argument("--steps", type=int, default=None, help="timed steps per run (50; tiny: 4)")
    parser.add_argument("--warmup", type=int, default=None, help="untimed steps first (10; tiny: 2)")
    parser.add_argument("--batch-size", type=int, default=0)
    parser.add_argument("--variants", default=",".join(VARIANTS), help="comma list (prefixes a,b,c,d,e,f)")
    parser.add_argument("--device", default=None)
    parser.add_argument("--compile", dest="compile", action="store_true", default=None)
    parser.add_argument("--no-compile", dest="compile", action="store_false")
    parser.add_argument("--text", default=None, help="the text file (default: Tiny Shakespeare, found as the tests do)")
    parser.add_argument("--peak-tflops", type=float, default=989.0, help="dense bf16 peak of the GPU (H100/H200 SXM)")
    parser.add_argument("--json", default=None)
    parser.add_argument("--md", default=None)
    args = parser.parse_args(argv)
    args.repeats = args.repeats or (1 if args.tiny else 3)
    args.steps = args.steps or (4 if args.tiny else 50)
    args.warmup = args.warmup or (2 if args.tiny else 10)
    wanted = [v for v in VARIANTS if any(v.startswith(p.strip()) for p in args.variants.split(",") if p.strip())]
    spec = Spec(args)
    from overt.recipes.gpt import n_params

    n = n_params(spec.model())
    peak = peak_flops(spec, args.peak_tflops)
    device_name = torch.cuda.get_device_name(spec.device) if spec.device.type == "cuda" else "cpu"
    header = (f"torch {torch.__version__}, {device_name}, gpt {spec.cfg.layers}x{spec.cfg.embed} "
              f"({n / 1e6:.2f}M parameters), context {spec.cfg.context}, batch {spec.cfg.batch_size} "
              f"({spec.tokens_per_step} tokens/step), {args.warmup} warm-up + {args.steps} timed steps, "
              f"{args.repeats} repetitions, compile {'on' if spec.compile else 'off'}")
    print(header, flush=True)
    runs: dict[str, list[dict[str, Any]]] = {v: [] for v in wanted}
    for rep in range(args.repeats):
        for name in wanted:
            try:
                r = run_variant(spec, name)
            except Exception as exc:  # noqa: BLE001 -- one variant failing must not hide the others
                r = {"error": f"{type(exc).__name__}: {exc}"[:2000]}
            if "timed_s" in r:
                r["tokens_per_s"] = spec.tokens_per_step * args.steps / r["timed_s"]
                r["mfu"] = None if peak is None else 6 * n * r["tokens_per_s"] / peak
            runs[name].append(r)
            shown = (f"{r['tokens_per_s']:12,.0f} tokens/s  warm-up {r['warmup_s']:6.1f} s  "
                     f"graphs {r['graphs_compiled']}" if "timed_s" in r else r["error"])
            print(f"rep {rep + 1} {name:22s} {shown}", flush=True)
        result = report(args, spec, header, device_name, n, peak, runs, quiet=rep + 1 < args.repeats)
    return result


if __name__ == "__main__":
    main()
