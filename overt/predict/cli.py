"""``overt predict RUN_DIR [inputs...]``: a finished run's model on new inputs, JSON lines out."""

from __future__ import annotations

import argparse
import json
import sys

HELP = """\
Predict with a finished run's model.  Inputs: CSV files (rows of numbers, or a header
row and named columns), .npy arrays (one input per row), text files (one input per
line), literal strings, or stdin (no inputs or `-`).  One JSON line per input on stdout.

  overt predict runs/tiny-... rows.csv
  overt predict runs/sentiment-... "what a great phone" "never again"
  cat prompts.txt | overt predict runs/char-rnn-...

The model is rebuilt from the run's config.yaml with the recipe it names.  A recipe is
code: a built-in one is always used; a recipe file only when this machine trained the run
with that exact file (its sha256 was recorded then), or when you vouch for it with
--trust-recipe or --recipe FILE.  The file and its hash are printed before it is imported.
Weights are read from model.safetensors, never unpickled.
Exit status 2 on a bad run directory or bad inputs.
"""


def main(argv: list[str]) -> int:
    from overt.errors import OvertError
    from overt.predict.inputs import FORMATS, read_inputs

    parser = argparse.ArgumentParser(prog="overt predict", description=HELP,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run_dir", help="a finished run directory")
    parser.add_argument("inputs", nargs="*", help="input files, literal inputs, or - for stdin")
    parser.add_argument("--format", choices=FORMATS, default=None, help="read every input file (and stdin) as this")
    parser.add_argument("--device", default="auto", help="auto, cpu, cuda, mps (default: auto)")
    parser.add_argument("--batch-size", type=int, default=256, help="inputs per forward pass (default: 256)")
    parser.add_argument("--recipe", default=None, metavar="FILE",
                        help="import this recipe file instead of the one the run names (you vouch for it)")
    parser.add_argument("--trust-recipe", action="store_true",
                        help="import the recipe file the run names even though this machine did not train with it")
    args = parser.parse_args(argv)
    try:
        from overt.predict.predictor import Predictor

        inputs = read_inputs(args.inputs, args.format)
        predictor = Predictor.from_run(args.run_dir, device=args.device, batch_size=args.batch_size,
                                       recipe=args.recipe, trust_recipe=args.trust_recipe)
        results = predictor.predict(inputs)
    except OvertError as exc:
        print(f"overt predict: error: {exc}", file=sys.stderr)
        return 2
    try:
        for result in results:
            sys.stdout.write(json.dumps(result) + "\n")
        sys.stdout.flush()
    except BrokenPipeError:  # `overt predict ... | head`: the reader has what it wanted
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return 0
