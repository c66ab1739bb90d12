"""``overt export RUN_DIR --format onnx|pt2``: export a finished run's model, parity-checked."""

from __future__ import annotations

import argparse

from overt.command import command

HELP = """\
Export a finished run's model and check it against the eager model on real validation
inputs (onnxruntime for ONNX, the reloaded program for .pt2); the maximum absolute
difference is printed.  Beside the model, MODEL.serving.json (model.onnx.serving.json,
model.pt2.serving.json: one per export, so both formats can sit side by side) carries the run's declared
preprocessing and input record; overt.serving.load_exported(path) serves both, and the
parity check runs raw validation inputs through that path (answers must equal predict's).

  overt export runs/mnist-... --format onnx            # writes runs/mnist-.../model.onnx
  overt export runs/mnist-... --format pt2 --out m.pt2

Exit status: 0 when the difference is within --atol, 1 when it is not, 2 on an error.
The recipe is code: a recipe file the run names is imported only when this machine
trained the run with it, or with --trust-recipe / --recipe FILE (see overt predict --help).
ONNX needs the optional extra: pip install "overt[export]".
"""


@command("overt export")
def main(argv: list[str]) -> int:
    from overt.export.exporter import FORMATS, export_run

    parser = argparse.ArgumentParser(prog="overt export", description=HELP,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run_dir", help="a finished run directory")
    parser.add_argument("--format", choices=FORMATS, default="onnx", help="onnx (default) or pt2 (torch.export)")
    parser.add_argument("--out", default=None, help="output file (default: RUN_DIR/model.onnx or model.pt2)")
    parser.add_argument("--samples", type=int, default=64, help="validation samples for the parity check")
    parser.add_argument("--checkpoint", choices=("final", "best", "last"), default="final",
                        help="which weights: final (model.safetensors, default), best (by the run's monitored "
                             "metric) or last (the newest valid checkpoint)")
    parser.add_argument("--atol", type=float, default=1e-4, help="largest acceptable absolute difference")
    parser.add_argument("--recipe", default=None, metavar="FILE",
                        help="import this recipe file instead of the one the run names (you vouch for it)")
    parser.add_argument("--trust-recipe", action="store_true",
                        help="import the recipe file the run names even though this machine did not train with it")
    args = parser.parse_args(argv)
    result = export_run(args.run_dir, args.format, args.out, samples=args.samples, atol=args.atol,
                        recipe=args.recipe, trust_recipe=args.trust_recipe, checkpoint=args.checkpoint)
    verdict = "ok" if result.ok else f"FAILED: above --atol {result.atol:g}"
    engine = "onnxruntime" if result.format == "onnx" else "torch.export"
    names = ", ".join(str(f) for f in result.files[:-1]) + f" and {result.files[-1]}"
    print(f"overt export: wrote {names} (the serving JSON holds the preprocessing and input record; "
          f"copy all {len(result.files)} files together and load them with overt.serving.load_exported)")
    what = "raw validation inputs through the declared preprocessing" if result.raw else "validation samples"
    answers = "" if result.same_answers is None else (
        "; answers identical to overt predict" if result.same_answers else "; answers DIFFER from overt predict")
    print(f"parity ({engine} vs eager, {result.samples} {what}): "
          f"max abs diff {result.max_abs_diff:.3g}{answers} -- {verdict}")
    return 0 if result.ok else 1
