"""A framework project started by the framework's own launcher, with overt's callback:

    python launched.py lightning BUG OUT        # Lightning's strategy="ddp", devices=2 starts rank 1 itself
    torchrun --nproc_per_node 2 launched.py hf BUG OUT

``BUG`` is one of the project's planted bugs or ``none``.  Each process writes
``OUT/result-RANK.json`` (its findings, the step it reached, the world size).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def lightning(bug: str | None, out: Path) -> dict:
    from overt.integrations.lightning import OvertCallback
    from tests.integrations.projects import lightning_digits

    cb = OvertCallback()
    trainer, _ = lightning_digits.fit(bug, callbacks=[cb], root=str(out / "root"), strategy="ddp", devices=2)
    return {"rank": trainer.global_rank, "world": trainer.world_size, "step": trainer.global_step,
            "findings": [f.to_dict() for f in cb.findings]}


def hf(bug: str | None, out: Path) -> dict:
    from overt.integrations.hf import OvertTrainerCallback
    from tests.integrations.projects import hf_digits

    cb = OvertTrainerCallback()
    trainer = hf_digits.build(bug, out_dir=str(out / "root"), callbacks=[cb])
    trainer.train()
    return {"rank": trainer.args.process_index, "world": trainer.args.world_size, "step": trainer.state.global_step,
            "findings": [f.to_dict() for f in cb.findings]}


if __name__ == "__main__":
    import torch

    torch.set_num_threads(1)
    framework, bug, out = sys.argv[1], sys.argv[2], Path(sys.argv[3])
    result = {"lightning": lightning, "hf": hf}[framework](None if bug == "none" else bug, out)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"result-{result['rank']}.json").write_text(json.dumps(result))
