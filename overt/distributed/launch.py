"""``overt train recipe.py nproc=N``: start N workers with torchrun's elastic agent, in this process.

The agent is PyTorch's own (``torch.distributed.run``, what the ``torchrun`` command runs): it
picks a free port for a single-node rendezvous, starts ``python -m overt train ...`` N times
with ``RANK``/``LOCAL_RANK``/``WORLD_SIZE``/``MASTER_ADDR``/``MASTER_PORT`` set, and watches
them.  Running the agent in-process (not as a ``torchrun`` subprocess) lets overt read each
worker's exit code from the agent's result, so ``overt train ... nproc=N`` exits like a
single-process run (:func:`exit_code_of`): 0 when finished, ``128 + N`` only after a clean stop
on signal N that every worker agreed on, 2 on a usage error, 1 when a worker failed or died
(its rank, exit code or signal are printed).

Signals (Linux): SIGTERM/SIGINT sent to this process are forwarded to every worker, which then
stop together and save once (:mod:`overt.distributed.stop`); the job's exit code is read from
the workers' exit codes, as for any other ending.  (torchrun's own handler would stop the
workers and report the signal as the job's status, whatever the workers did.)  Every worker dies
with its agent (:func:`die_with_agent`): SIGKILL of this process (a CI cancel, ``timeout -s
KILL``) leaves no worker running and no run directory locked.
"""

from __future__ import annotations

import os
import signal
import sys
from typing import Any

from overt.errors import ConfigError

LAUNCH_KEYS = ("nproc",)
#: signals the launcher forwards to its workers (the preemption signals every run stops on)
FORWARDED = (signal.SIGTERM, signal.SIGINT)
LAUNCHER_PID = "OVERT_LAUNCHER_PID"


def split_launch_overrides(overrides: list[str]) -> tuple[int | None, list[str]]:
    """``(nproc, the other overrides)`` from ``key=value`` overrides."""
    nproc, rest = None, []
    for item in overrides:
        key, sep, value = item.partition("=")
        if sep and key.strip() == "nproc":
            try:
                nproc = int(value)
            except ValueError:
                raise ConfigError(f"nproc={value!r} is not a number of processes", fix="write e.g. nproc=2") from None
            if nproc < 1:
                raise ConfigError(f"nproc={nproc}: at least one process is needed", fix="write e.g. nproc=2")
        else:
            rest.append(item)
    return nproc, rest


def exit_code_of(failures: dict[int, int], nproc: int | None = None) -> int:
    """One exit status for the job from the failed workers' exit codes (``rank -> code``; a negative
    code is a death by that signal, as ``subprocess`` reports it).

    - ``128 + N``: every worker (all ``nproc`` of them) exited with that same code, which a worker
      gives only after a clean stop on signal N that the ranks agreed on, with its checkpoint saved;
    - 2: a usage error (every failed worker exited 2, beside workers that torchrun's agent then
      ended with SIGTERM/SIGINT);
    - 1: anything else, in particular a worker killed by a signal (SIGKILL from the OOM killer,
      SIGABRT at teardown, SIGTERM before any stop was agreed) beside clean stops.
    """
    codes = list(failures.values())
    if not codes:
        return 0
    everyone = nproc is None or len(codes) == nproc
    if everyone and len(set(codes)) == 1 and 128 < codes[0] < 128 + 65:
        return codes[0]
    if 2 in codes and all(c == 2 or c in (-signal.SIGTERM, -signal.SIGINT) for c in codes):
        return 2
    return 1


def describe_exit(code: int) -> str:
    """``exit code 1`` / ``killed by SIGKILL`` for a worker's exit code."""
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        hint = {"SIGKILL": " (the OOM killer sends it)", "SIGABRT": " (an abort in native code)",
                "SIGSEGV": " (a crash in native code)"}.get(name, "")
        return f"killed by {name}{hint}"
    if 128 < code < 128 + 65:
        try:
            return f"exit code {code} (stopped cleanly on {signal.Signals(code - 128).name})"
        except ValueError:
            pass
    return f"exit code {code}"


def _children() -> list[int]:
    """This process's child processes (Linux: from /proc)."""
    me, out = os.getpid(), []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as fh:
                stat = fh.read()
        except OSError:
            continue
        fields = stat.rsplit(b")", 1)[-1].split()
        if len(fields) > 1 and int(fields[1]) == me:
            out.append(int(entry))
    return out


class _Forwarder:
    """SIGTERM/SIGINT to the launcher -> the same signal to every worker's process group (each
    worker is a session leader: torchrun starts it with ``start_new_session``)."""

    def __init__(self) -> None:
        self.received: list[signal.Signals] = []
        self._previous: dict[signal.Signals, Any] = {}

    def install(self) -> None:
        for sig in FORWARDED:
            self._previous[sig] = signal.signal(sig, self._handle)

    def uninstall(self) -> None:
        for sig, previous in self._previous.items():
            signal.signal(sig, previous if previous is not None else signal.SIG_DFL)
        self._previous.clear()

    def _handle(self, signum: int, frame: Any) -> None:
        self.received.append(signal.Signals(signum))
        workers = _children()
        if not workers:  # nothing started yet (rendezvous): end the launcher as the signal would
            self.uninstall()
            os.kill(os.getpid(), signum)
            return
        for pid in workers:
            try:
                os.killpg(pid, signum)
            except (ProcessLookupError, PermissionError):
                try:
                    os.kill(pid, signum)
                except ProcessLookupError:
                    pass


_PEER_GONE = ("Connection reset by peer", "Connection closed by peer", "Broken pipe", "Socket Timeout")


def peer_gone(error: BaseException) -> bool:
    """Whether ``error`` is a collective failing because another rank's process is gone (killed,
    crashed): the consequence, not the cause -- the launcher names the rank that died."""
    from overt.torchrun import Topology

    if not Topology.of_process().distributed:
        return False
    names = {t.__name__ for t in type(error).__mro__}
    return bool(names & {"DistNetworkError"}) or (
        isinstance(error, RuntimeError) and any(text in str(error) for text in _PEER_GONE))


def die_with_agent() -> None:
    """In a worker started by torchrun's agent (Linux): ask the kernel to SIGKILL this process when
    its parent (the agent) dies, however it dies.  Without it a SIGKILLed agent leaves its workers
    running (torchrun starts each in its own session), holding the run directory's lock and
    training on, or waiting forever on the agent's dead rendezvous store.  A parent that died
    before this call (the worker was already an orphan) ends the worker at once."""
    if not sys.platform.startswith("linux") or "TORCHELASTIC_RUN_ID" not in os.environ:
        return
    import ctypes

    pr_set_pdeathsig = 1
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(pr_set_pdeathsig, int(signal.SIGKILL), 0, 0, 0) != 0:
            return
    except (OSError, AttributeError):  # no prctl: keep running as before
        return
    expected = os.environ.get(LAUNCHER_PID)
    parent = os.getppid()
    if parent == 1 or (expected and expected.isdigit() and parent != int(expected)):
        os.kill(os.getpid(), signal.SIGKILL)


def launch(nproc: int, overt_argv: list[str]) -> int:
    """Run ``python -m overt *overt_argv`` on ``nproc`` local workers under torchrun's agent."""
    from torch.distributed import run as torchrun
    from torch.distributed.elastic.multiprocessing.api import SignalException
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError

    args = torchrun.parse_args(["--nproc_per_node", str(nproc), "-m", "overt", *overt_argv])
    forward = os.path.isdir("/proc") and sys.platform.startswith("linux")
    saved_env = {k: os.environ.get(k) for k in (LAUNCHER_PID, "TORCHELASTIC_SIGNALS_TO_HANDLE")}
    os.environ[LAUNCHER_PID] = str(os.getpid())
    forwarder = _Forwarder()
    if forward:  # the agent handles the others (SIGHUP, SIGQUIT) as torchrun does
        os.environ["TORCHELASTIC_SIGNALS_TO_HANDLE"] = "SIGHUP,SIGQUIT"
        forwarder.install()
    try:
        torchrun.run(args)
    except ChildFailedError as exc:
        failures = {rank: f.exitcode for rank, f in exc.failures.items()}
        code = exit_code_of(failures, nproc)
        if code == 1:
            lines = [f"  rank {rank}: {describe_exit(c)}" for rank, c in sorted(failures.items())]
            print("overt: a worker failed (its error is above):\n" + "\n".join(lines), file=sys.stderr, flush=True)
        return code
    except SignalException as exc:  # the agent was signalled (SIGHUP/SIGQUIT; all signals off Linux)
        return 128 + int(getattr(exc, "sigval", signal.SIGTERM))
    finally:
        forwarder.uninstall()
        for key, value in saved_env.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    return 0
