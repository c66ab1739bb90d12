"""``overt`` command line: one subcommand per face of the product.

Each subcommand lives in its own module and is imported only when used, so
``overt --help`` and ``overt lint`` never import torch.
"""

from __future__ import annotations

import importlib
import sys

# name -> (module, one-line help).  Each module exposes ``main(argv: list[str]) -> int``.
COMMANDS: dict[str, tuple[str, str]] = {
    "train": ("overt.cli.train", "train a recipe (built-in name, recipe.py or config.yaml)"),
    "sweep": ("overt.cli.sweep", "train a small grid of overrides (key=a,b) one by one and compare the runs"),
    "resume": ("overt.cli.resume", "continue a run from its newest valid checkpoint"),
    "run": ("overt.guards.run_cli", "run an unmodified training script under the runtime guards"),
    "lint": ("overt.lint.cli", "find the catalog's failures in source code, statically"),
    "report": ("overt.report.cli", "plots and a markdown report of runs, compared side by side"),
    "doctor": ("overt.doctor.cli", "run readiness probes on a recipe and write the readiness note"),
    "predict": ("overt.predict.cli", "run a finished run's model on new inputs (CSV, .npy, text) -> JSON lines"),
    "export": ("overt.export.cli", "export a finished run's model to ONNX or torch.export (.pt2), parity-checked"),
    "init": ("overt.scaffold.cli", "create a small project: recipe, config, smoke tests, lint settings"),
}


def _usage() -> str:
    width = max(len(n) for n in COMMANDS)
    lines = ["usage: overt COMMAND [ARGS...]", "", "commands:"]
    lines += [f"  {name:<{width}}  {text}" for name, (_, text) in COMMANDS.items()]
    lines += ["", "`overt COMMAND --help` shows a command's options."]
    return "\n".join(lines)


def _skip_the_final_collection() -> None:
    """Moves every object still alive to the collector's permanent generation at exit.

    Interpreter shutdown ends with full garbage collections that walk every object the process
    still holds: on the 2-core VM about 1 s of CPU after ``overt train digits`` had printed its
    last line, about 1 s more with MLflow's client (SQLAlchemy, alembic), for memory the OS frees
    anyway.  The frozen objects are still torn down with their modules; only cycles among them
    are left to the OS, which Python's shutdown never promised to finalize.  Registered when the
    program starts, so it runs after the exit handlers registered during the run (MLflow's,
    W&B's, a temporary folder's cleanup).  Not in a torchrun worker that overt ends itself
    (:func:`overt.cli.leave.leave`): that one skips finalisation anyway, and reads the collector's
    objects after the exit handlers to flush open files, which frozen objects would hide."""
    import atexit
    import gc

    from overt.cli.leave import owns_a_torchrun_worker

    def freeze() -> None:
        if not owns_a_torchrun_worker():
            gc.freeze()

    atexit.register(freeze)


def main(argv: list[str] | None = None) -> int:
    """Run the command in ``argv`` (default: this process's command line) and return its exit code.

    Called for the process's own command line (``python -m overt``, the ``overt`` script) in a
    torchrun worker, it does not return: the process ends with the command's code through
    :func:`overt.cli.leave.leave`, which spares torch.distributed's C++ threads the interpreter's
    finalisation (docs/distributed.md, "Ending a worker").  Other than under ``overt run`` (whose
    user script ends as it would under ``python``), it also lets the process skip the collector's
    walk at exit (:func:`_skip_the_final_collection`)."""
    if argv is not None:
        return _command(list(argv))
    if sys.argv[1:2] != ["run"]:
        _skip_the_final_collection()
    from overt.cli.leave import leave, owns_a_torchrun_worker
    from overt.command import exit_status

    try:
        code = _command(sys.argv[1:])
    except SystemExit as exc:
        if not owns_a_torchrun_worker():
            raise
        leave(exit_status(exc))
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # shown as Python shows an uncaught error, then exit status 1
        if not owns_a_torchrun_worker():
            raise
        sys.excepthook(type(exc), exc, exc.__traceback__)
        leave(1)
    if owns_a_torchrun_worker():
        leave(code)
    return code


def _command(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print(_usage())
        return 0 if argv else 2
    if argv[0] == "--version":
        from overt import __version__

        print(f"overt {__version__}")
        return 0
    name, rest = argv[0], argv[1:]
    if name not in COMMANDS:
        print(f"overt: unknown command {name!r}\n\n{_usage()}", file=sys.stderr)
        return 2
    module = importlib.import_module(COMMANDS[name][0])
    return int(module.main(rest) or 0)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
