"""``torchrun -m overt run script.py``: the guards on every rank, the findings reported once by rank 0.

The script owns its process group: it usually calls ``destroy_process_group()`` before it
ends, after which nothing can be gathered.  So while the script runs, the other ranks print
nothing and ``destroy_process_group`` is wrapped: right before the group goes away every rank
hands its findings to rank 0 (one ``gather_object``).  A script that never destroys its
group is gathered from when it returns.  When the group is gone without either (a crash on
some rank), each rank prints its own findings, naming itself.
"""

from __future__ import annotations

import io
from typing import Any

from overt.torchrun import Topology


class RankReports:
    """Quiet non-zero ranks during the run; gather every rank's findings on rank 0 at the end."""

    def __init__(self, session: Any):
        self.session = session
        self.env = Topology.of_process()
        self.gathered: list | None = None
        self.done = False
        self._original: Any = None
        self._buffer: io.StringIO | None = None

    def install(self) -> None:
        if not self.env.distributed:
            return
        if self.env.rank != 0:
            self._buffer = io.StringIO()
            self.session.options.stream = self._buffer
        import torch.distributed as dist

        self._original = dist.destroy_process_group

        def destroy_process_group(*args: Any, **kwargs: Any) -> Any:
            group = args[0] if args else kwargs.get("group")
            if group is None:  # the default group: the last moment its ranks can talk
                self.gather()
            return self._original(*args, **kwargs)

        dist.destroy_process_group = destroy_process_group

    def gather(self) -> None:
        """Every rank's findings so far on rank 0 (a collective), once."""
        import torch.distributed as dist

        from overt.guards.distributed import gather_findings

        if self.done or not (dist.is_available() and dist.is_initialized()):
            return
        self.done = True
        self.session.reads.flush(can_stop=False)
        self.gathered = gather_findings(list(self.session.reporter.findings))

    def release_group(self) -> None:
        """After the script returned with its default process group alive (and its findings were
        gathered): wait for every rank, then destroy the group, as a script that ends well does.
        This does not stop gloo's worker threads (they live as long as the script's DDP module
        holds the group); the abort they caused at the interpreter's exit is avoided by how the
        worker ends (:mod:`overt.cli.leave`)."""
        import torch.distributed as dist

        if not (self.done and dist.is_available() and dist.is_initialized()):
            return
        dist.barrier()
        (self._original or dist.destroy_process_group)()

    def uninstall(self) -> None:
        if self._original is not None:
            import torch.distributed as dist

            dist.destroy_process_group = self._original
            self._original = None

    def final(self, findings: list, out: Any) -> list:
        """The findings this process reports at the end (rank 0: everyone's; others: none, unless
        nothing could be gathered)."""
        if not self.env.distributed:
            return findings
        if self.done:
            if self.env.rank != 0:
                return []
            from overt.guards.report import PREFIX

            gathered = self.gathered or []
            for finding in gathered:  # the other ranks' findings: printed here, once
                if finding.details.get("ranks") != [0]:
                    print(PREFIX + finding.format(), file=out, flush=True)
            known = {(g.slug, g.message) for g in gathered}
            return gathered + [f for f in findings if (f.slug, f.message) not in known]  # + rank 0's later ones
        if self._buffer is not None:  # nothing gathered: this rank speaks for itself
            text = self._buffer.getvalue()
            if text:
                print(f"[rank {self.env.rank}] " + text.rstrip().replace("\n", f"\n[rank {self.env.rank}] "),
                      file=out, flush=True)
        return findings
