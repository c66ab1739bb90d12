"""How an overt command process that was a torchrun worker ends: everything Python's exit would do
for it, then ``os._exit``, so that no C++ thread of torch.distributed dies inside the interpreter's
finalisation (issue 34, item 15).

The cause, seen in a core file of the aborted rank (gdb, torch 2.13, gloo): a gloo worker thread
(``ProcessGroupGloo::runLoop``) drops the last reference to a finished DDP allreduce.  That work
captured the thread-local state of the backward pass that launched it, which holds a Python object
(the ``contextvars`` context that ``torch.autograd`` stashes for the backward), so its destructor
takes the GIL.  When that thread reaches the GIL after the main thread has begun
``Py_FinalizeEx``, CPython ends the thread with ``pthread_exit``; the unwinding crosses a
``noexcept`` destructor and ``std::terminate`` aborts the process ("terminate called without an
active exception", SIGABRT).  ``destroy_process_group`` cannot prevent it: gloo's ``shutdown`` does
not stop its threads, which live as long as the C++ process group, and the DDP module (the user's
script's, or an engine's that a caller may keep) still holds that group until finalisation.  The
same abort hits a plain torch script that ends with ``barrier(); destroy_process_group()`` (4 of 20
jobs on this 2-core machine under load).

So a worker process that overt owns (``python -m overt ...`` / the ``overt`` script, with
``WORLD_SIZE > 1`` and torch.distributed loaded) leaves as the interpreter would, in its order --
non-daemon threads joined (``threading``'s own shutdown, which also stops thread pools), ``atexit``
handlers run (the script's and overt's), every open file buffer and the standard streams flushed --
and then ends with ``os._exit(code)`` instead of finalising the interpreter and running C++ static
destructors.  A user's own process (``overt.guard``, ``overt.Trainer`` in a script) is never ended
this way.
"""

from __future__ import annotations

import atexit
import contextlib
import gc
import io
import os
import sys
import threading
from typing import NoReturn

from overt.torchrun import Topology


def owns_a_torchrun_worker() -> bool:
    """Whether this process is a torchrun worker of a multi-process job that loaded
    torch.distributed (the processes whose exit :func:`leave` takes over)."""
    try:
        distributed = Topology.of_process().distributed
    except Exception:  # a malformed WORLD_SIZE was reported by the command itself
        return False
    return distributed and "torch.distributed" in sys.modules


def flush_open_files() -> int:
    """Flush the buffers of every open writable file object still alive (what their finalisers
    would have done at the interpreter's exit).  Returns how many were flushed."""
    flushed = 0
    for obj in gc.get_objects():
        # type(), not isinstance(): isinstance reads ``__class__``, which some lazy objects compute
        if not issubclass(type(obj), (io.TextIOWrapper, io.BufferedWriter, io.BufferedRandom)):
            continue
        with contextlib.suppress(Exception):
            if not obj.closed and obj.writable():
                obj.flush()
                flushed += 1
    return flushed


def finish_like_the_interpreter() -> None:
    """Python's exit up to the point where it starts tearing the interpreter down: threads joined
    (and ``threading``'s exit hooks run), ``atexit`` handlers run, buffers flushed."""
    shutdown = getattr(threading, "_shutdown", None)  # what Py_FinalizeEx calls first
    if shutdown is not None:
        shutdown()
    else:  # pragma: no cover - every CPython has it
        for thread in threading.enumerate():
            if thread is not threading.current_thread() and not thread.daemon:
                thread.join()
    atexit._run_exitfuncs()
    flush_open_files()
    for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
        with contextlib.suppress(Exception):
            if stream is not None:
                stream.flush()


def leave(code: int) -> NoReturn:
    """End this process with ``code`` after :func:`finish_like_the_interpreter`, skipping the
    interpreter's finalisation and C++ static destructors."""
    try:
        finish_like_the_interpreter()
    except BaseException as exc:  # an atexit handler's error is printed, as Python's exit does
        with contextlib.suppress(Exception):
            print(f"overt: while exiting: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
    os._exit(code)
