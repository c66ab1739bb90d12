"""Guard on replicas drifting apart (slug ``ddp-out-of-sync``).

When ``torch.distributed`` is initialised with more than one rank, every
checked step ends with a cross-rank checksum: one float64 sum per parameter of
the optimizer, gathered from every rank (one small collective, every
``check_every`` steps).  Checked steps are then exactly the warm-up steps and
the multiples of ``check_every`` (no adaptive stretching) so that every rank
joins the same collectives.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import torch

from overt.guards.check import Check
from overt.guards.unwrap import is_sharded
from overt.torchrun import Topology

if TYPE_CHECKING:
    from overt.guards.watched import OptInfo


class DistributedChecks(Check):
    name = "dist"

    def active(self) -> bool:
        return Topology.of_group().world_size > 1

    def after_checked_step(self, oi: OptInfo) -> None:
        if self.active():
            self.check(oi)

    def check(self, oi: OptInfo) -> None:
        """Compare this rank's parameters with every other rank's (a collective: all ranks call it)."""
        dist = torch.distributed
        group = Topology.of_group()
        rank, size = group.rank, group.world_size
        # FSDP shards (FSDP2's DTensors, FSDP1's flat parameters) differ across ranks by design:
        # their consistency is FSDP's own job
        params = [p for p in oi.params if p.requires_grad and not is_sharded(p)]
        if size < 2 or not params:
            return
        backend = dist.get_backend()
        device = params[0].device if backend == "nccl" else torch.device("cpu")
        sums = torch.stack([p.detach().double().sum() for p in params]).to(device)
        gathered = [torch.empty_like(sums) for _ in range(size)]
        dist.all_gather(gathered, sums)
        table = torch.stack(gathered)  # (ranks, params)
        spread = (table - table[0]).abs().amax(dim=0)
        scale = table.abs().amax(dim=0).clamp_min(1e-12)
        bad = (spread / scale > 1e-6).nonzero().flatten().tolist()  # one read, every check_every steps
        if not bad:
            return
        names = [self.s.name_of(params[i]) for i in bad]
        first = bad[0]
        values = ", ".join(f"rank {r}: {table[r, first].item():.6g}" for r in range(size))
        self.s.report(
            "ddp-out-of-sync",
            f"after step {oi.steps} the parameters of the {size} ranks differ: {len(bad)} of {len(params)} "
            f"tensors, e.g. {names[0]} (sum {values}). Each rank is training its own model and the saved "
            "one is arbitrary.",
            fix="wrap the model in DistributedDataParallel on every rank (after moving "
            "it to its device), build the optimizer from the wrapped model's parameters, and make every "
            "rank run the same number of steps.",
            where=f"{oi.name} on rank {rank}", key=oi.name,
        )


def gather_findings(findings: list) -> list | None:
    """Every rank's findings, on rank 0 (``None`` on the other ranks); a collective.

    Each finding names its rank (``details["ranks"]``, and ``where`` unless it already does);
    a finding that several ranks made alike (same slug and message) is reported once, naming
    every rank that made it."""
    from overt.catalog import Severity
    from overt.findings import Finding

    group = Topology.of_group()
    rank, size = group.rank, group.world_size
    if size < 2:
        return list(findings)
    dist = torch.distributed
    mine = [f.to_dict() for f in findings]
    gathered: list = [None] * size if rank == 0 else []
    dist.gather_object(mine, gathered if rank == 0 else None, dst=0)
    if rank != 0:
        return None
    merged: dict[tuple[str, str], tuple[dict, list[int]]] = {}
    for r, items in enumerate(gathered):
        for item in items or []:
            key = (item["slug"], item["message"])
            if key not in merged:
                merged[key] = (item, [])
            merged[key][1].append(r)
    out = []
    for item, ranks in merged.values():
        label = f"rank {ranks[0]}" if len(ranks) == 1 else "ranks " + ", ".join(map(str, ranks))
        where = re.sub(r"\s*on rank \d+", "", item.get("where") or "")
        where = f"{where} on {label}" if where else label
        details = dict(item.get("details") or {}, ranks=ranks)
        severity = Severity(item["severity"]) if item.get("severity") else None
        out.append(Finding(item["slug"], item["message"], where=where, severity=severity,
                           step=item.get("step"), details=details, why=item.get("why") or "",
                           fix=item.get("fix") or ""))
    return out
