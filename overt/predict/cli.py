"""``overt predict RUN_DIR [inputs...]``: a finished run's model on new inputs, JSON lines out."""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

from overt.command import Failed, command

HELP = """\
Predict with a finished run's model.  Inputs: CSV files (rows of numbers, or a header
row and named columns), .npy arrays (one input per row), text files (one input per
line), literal strings (for a model of numbers, one comma-separated row), or stdin (no
inputs or `-`: CSV for a model of numbers, text lines for a model of sentences).  One
JSON line per input, in order, on stdout: for a classifier the class, its label, its
probability and the top classes (--top-k); for a regression the target in its own units;
--raw gives the model's outputs (logits).  Answers are streamed: read, computed and
written 4096 inputs at a time, in bounded memory (a progress line on a terminal's stderr).

  overt predict runs/digits-... rows.csv        # rows straight from load_digits(): 0..16 pixels
  overt predict runs/sentiment-... "what a great phone" "never again"
  cat prompts.txt | overt predict runs/char-rnn-...

One answer per input row, or an error naming the file and line: a CSV's first row is a
header when a cell is not a number or when it spells the model's own columns (0,1,...,63
as pandas writes them; said on stderr); a record of empty cells, a header with no rows,
or no inputs at all is an error.

The run's declared preprocessing is applied (inputs are raw data, as the recipe reads
it), and the prepared inputs are checked against what the model was trained on
(inputs.json in the run): inputs on another scale, far outside the training range or
constant are a train-serve-skew finding on stderr (and in --report FILE); --strict makes
it an error (exit 1, nothing written).  The run's files are checked first (inputs.json,
recipe_source.json, config.yaml against the weights' shapes, model.safetensors against the
SHA-256 recorded when the run finished): a damaged one is an error naming it and its field.

The model is rebuilt from the run's config.yaml with the recipe it names.  A recipe is
code: a built-in one is always used; a recipe file only when this machine trained the run
with that exact file (its sha256 was recorded then), or when you vouch for it with
--trust-recipe or --recipe FILE.  The file and its hash are printed before it is imported.
Weights are read from model.safetensors (--checkpoint final, the default), the best
checkpoint by the run's monitored metric (best) or the newest valid one (last); never
unpickled.  Exit status 2 on a bad run directory or bad inputs.
"""


def parse_args(argv: list[str]) -> argparse.Namespace:
    from overt.predict.inputs import FORMATS

    parser = argparse.ArgumentParser(prog="overt predict", description=HELP,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run_dir", help="a finished run directory")
    parser.add_argument("inputs", nargs="*", help="input files, literal inputs, or - for stdin")
    parser.add_argument("--format", choices=FORMATS, default=None, help="read every input file (and stdin) as this")
    parser.add_argument("--device", default="auto", help="auto, cpu, cuda, mps (default: auto)")
    parser.add_argument("--batch-size", type=int, default=256, help="inputs per forward pass (default: 256)")
    parser.add_argument("--checkpoint", choices=("final", "best", "last"), default="final",
                        help="which weights: final (model.safetensors, default), best (by the run's monitored "
                             "metric) or last (the newest valid checkpoint)")
    parser.add_argument("--top-k", type=int, default=3, help="classes listed per answer for a classifier (default 3)")
    parser.add_argument("--raw", action="store_true", help="the model's raw outputs (logits) instead of answers")
    parser.add_argument("--report", default=None, metavar="FILE",
                        help="write the findings (train-serve-skew) and a summary as JSON to FILE")
    parser.add_argument("--strict", action="store_true", help="a train-serve-skew finding is an error (exit 1)")
    parser.add_argument("--recipe", default=None, metavar="FILE",
                        help="import this recipe file instead of the one the run names (you vouch for it)")
    parser.add_argument("--trust-recipe", action="store_true",
                        help="import the recipe file the run names even though this machine did not train with it")
    return parser.parse_intermixed_args(argv)  # options may follow the inputs


def _write_report(path: str, run_dir: str, count: int, findings: list[Any]) -> None:
    from overt.predict.predictor import RunError

    report = {"run_dir": run_dir, "inputs": count, "findings": [f.to_dict() for f in findings]}
    try:
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(json.dumps(report, indent=1, allow_nan=False) + "\n")
    except OSError as exc:
        raise RunError(f"cannot write the report {path}: {exc.strerror or exc}",
                       fix="give --report a writable file path") from None


def _lines(results: list[Any]) -> str:
    from overt.run.layout import json_safe

    out = []
    for result in results:
        try:
            out.append(json.dumps(result, allow_nan=False))
        except ValueError:  # a NaN from a recipe's own postprocess: written as strict JSON
            out.append(json.dumps(json_safe(result), allow_nan=False))
    return "".join(line + "\n" for line in out)


def _silence_stdout() -> None:
    """After stdout failed, point it at /dev/null so that the interpreter's last flush at exit is quiet."""
    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), 1)
    except OSError:
        pass


class Output:
    """Where the answers go as they are computed: stdout, or with ``--strict`` a spool (memory, then a
    temporary file) copied to stdout only when no finding stopped the run.  A failed write is
    :class:`Failed`; a closed pipe (``| head``) ends the output quietly."""

    def __init__(self, strict: bool):
        import tempfile

        self.spool = tempfile.SpooledTemporaryFile(max_size=1 << 26, mode="w+", encoding="utf-8") if strict else None
        self.closed = False  # the reader went away: nothing more is written

    def write(self, text: str, flush: bool = True) -> None:
        if self.closed or not text:
            return
        if self.spool is not None:
            self.spool.write(text)
            return
        self._stdout(text, flush)

    def _stdout(self, text: str, flush: bool) -> None:
        try:
            sys.stdout.write(text)
            if flush:
                sys.stdout.flush()
        except BrokenPipeError:  # `overt predict ... | head`: the reader has what it wanted
            _silence_stdout()
            self.closed = True
        except (OSError, ValueError) as exc:  # a full disk, /dev/full, a closed stream
            _silence_stdout()
            reason = getattr(exc, "strerror", None) or str(exc)
            raise Failed(f"cannot write the predictions to stdout: {reason}",
                         fix="write them where there is room (> predictions.jsonl on a disk with space)") from None

    def release(self) -> None:
        """With ``--strict``: copy the spooled answers to stdout."""
        if self.spool is None:
            return
        self.spool.seek(0)
        spool, self.spool = self.spool, None
        with spool:
            for block in iter(lambda: spool.read(1 << 20), ""):
                self._stdout(block, flush=False)
                if self.closed:
                    return
        self._stdout("", flush=True)


class Progress:
    """A one-line progress count on stderr, only when stderr is a terminal (never in a log or a pipe)."""

    def __init__(self, inputs: Any, every_s: float = 0.5):
        import time

        self.inputs, self.every_s = inputs, every_s
        self.on = bool(getattr(sys.stderr, "isatty", lambda: False)())
        self.start = self.last = time.monotonic()
        self.shown = False

    def update(self, final: bool = False) -> None:
        import time

        now = time.monotonic()
        if not self.on or (not final and now - self.last < self.every_s):
            return
        self.last = now
        count = self.inputs.count
        rate = count / max(now - self.start, 1e-9)
        fraction = self.inputs.fraction()
        part = f" ({fraction:.0%} of the input read)" if fraction is not None else ""
        sys.stderr.write(f"\rovert predict: {count:,} inputs answered{part}, {rate:,.0f}/s" + ("\n" if final else ""))
        sys.stderr.flush()
        self.shown = not final


@command("overt predict")
def main(argv: list[str]) -> int:
    from overt.errors import OvertError

    args = parse_args(argv)
    if sys.stdout is None:
        raise OvertError("stdout is closed, so there is nowhere to write the predictions",
                         fix="run it with stdout open (redirect it to a file: > predictions.jsonl)")
    from overt.errors import DataError
    from overt.predict.inputs import Inputs, InputError
    from overt.predict.predictor import Predictor, weights_for

    weights = weights_for(args.run_dir, args.checkpoint)
    predictor = Predictor.from_run(args.run_dir, device=args.device, batch_size=args.batch_size,
                                   recipe=args.recipe, trust_recipe=args.trust_recipe, weights=weights,
                                   top_k=args.top_k, raw=args.raw)
    inputs = Inputs(args.inputs, args.format, expect=predictor.expects())
    output = Output(args.strict)
    progress = Progress(inputs)
    try:
        for answers in predictor.predict_chunks(inputs.chunks(max(args.batch_size, CHUNK))):
            output.write(_lines(answers))
            progress.update()
            if output.closed:
                break
    except DataError as exc:  # an input the model cannot take: name its file and line
        row = getattr(exc, "row", None)
        if row is None:
            raise
        raise InputError(exc.what, where="; ".join(filter(None, [inputs.where(row), exc.where])), why=exc.why,
                         fix=exc.fix) from None
    finally:
        if progress.shown:
            progress.update(final=True)
    if inputs.count == 0:
        raise InputError("there are no inputs: " + ("the input holds no rows" if args.inputs else "stdin is empty"),
                         why="no answer could be given; an empty output would look like a finished prediction",
                         fix="give at least one row (a CSV needs rows below its header)")
    for finding in predictor.findings:
        print(finding.format(), file=sys.stderr)
    if args.report:
        _write_report(args.report, args.run_dir, inputs.count, predictor.findings)
    if args.strict and predictor.findings:
        raise Failed(f"{len(predictor.findings)} train-serve-skew finding(s) with --strict: no predictions written")
    output.release()
    return 0


#: inputs read (and answered) at a time, at least: memory stays bounded however large the input
CHUNK = 4096
