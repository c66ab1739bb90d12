"""``overt export RUN_DIR --format onnx|pt2``: export a finished run's model, parity-checked."""

from __future__ import annotations

import argparse
import sys

HELP = """\
Export a finished run's model and check it against the eager model on real validation
inputs (onnxruntime for ONNX, the reloaded program for .pt2); the maximum absolute
difference is printed.

  overt export runs/mnist-... --format onnx            # writes runs/mnist-.../model.onnx
  overt export runs/mnist-... --format pt2 --out m.pt2

Exit status: 0 when the difference is within --atol, 1 when it is not, 2 on an error.
The recipe is code: a recipe file the run names is imported only when this machine
trained the run with it, or with --trust-recipe / --recipe FILE (see overt predict --help).
ONNX needs the optional extra: pip install "overt[export]".
"""


def main(argv: list[str]) -> int:
    from overt.errors import OvertError
    from overt.export.exporter import FORMATS, export_run

    parser = argparse.ArgumentParser(prog="overt export", description=HELP,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run_dir", help="a finished run directory")
    parser.add_argument("--format", choices=FORMATS, default="onnx", help="onnx (default) or pt2 (torch.export)")
    parser.add_argument("--out", default=None, help="output file (default: RUN_DIR/model.onnx or model.pt2)")
    parser.add_argument("--samples", type=int, default=64, help="validation samples for the parity check")
    parser.add_argument("--atol", type=float, default=1e-4, help="largest acceptable absolute difference")
    parser.add_argument("--recipe", default=None, metavar="FILE",
                        help="import this recipe file instead of the one the run names (you vouch for it)")
    parser.add_argument("--trust-recipe", action="store_true",
                        help="import the recipe file the run names even though this machine did not train with it")
    args = parser.parse_args(argv)
    try:
        result = export_run(args.run_dir, args.format, args.out, samples=args.samples, atol=args.atol,
                            recipe=args.recipe, trust_recipe=args.trust_recipe)
    except OvertError as exc:
        print(f"overt export: error: {exc}", file=sys.stderr)
        return 2
    verdict = "ok" if result.ok else f"FAILED: above --atol {result.atol:g}"
    engine = "onnxruntime" if result.format == "onnx" else "torch.export"
    print(f"overt export: wrote {result.path}")
    print(f"parity ({engine} vs eager, {result.samples} validation samples): "
          f"max abs diff {result.max_abs_diff:.3g} -- {verdict}")
    return 0 if result.ok else 1
