"""What fewer checked steps in the engine would change in findings (issue 33: the guards' overhead).

    python benchmarks/engine_schedules.py

Two programs, each run under the engine's default guard schedule (``GuardCallback()``: the first 3 steps,
then every 50th) and under two cheaper ones (``check_every=100``; ``warmup_steps=2``), printing each
run's finding slugs:

- a 713-step run (31 epochs of the digits training split) whose loss does not move (SGD, lr 1e-7):
  ``loss-not-decreasing`` needs a span of ten check intervals, so a longer interval stops seeing it;
- a model whose second head is first used at the third forward (a branch switched on by a counter): the
  warm-up judges ``no-gradient`` on what its steps saw, so a shorter warm-up reports the late head.

Both cheaper schedules pass ``pytest tests/guards tests/engine`` and the wild corpus's engine face; this
shows the findings they change all the same (docs/performance.md, "Third pass").
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402
from torch import nn  # noqa: E402

import overt  # noqa: E402
from overt.guards.engine import GuardCallback  # noqa: E402
from overt.recipes.digits import load_digits_split  # noqa: E402


class LateHead(nn.Module):
    """Two heads; the second is added to the output from the third forward on."""

    def __init__(self) -> None:
        super().__init__()
        self.a, self.b, self.calls = nn.Linear(64, 10), nn.Linear(64, 10), 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        return self.a(x) + self.b(x) if self.calls > 2 else self.a(x)


def findings(model: nn.Module, optimizer: torch.optim.Optimizer, data, epochs: int, **schedule) -> list[str]:
    callback = GuardCallback(**schedule)
    trainer = overt.Trainer(model, optimizer, nn.CrossEntropyLoss(), data, epochs=epochs, batch_size=64,
                            device="cpu", progress="off", guards=False, callbacks=[callback])
    summary = trainer.fit()
    return sorted({f["slug"] for f in summary.get("findings", [])} or
                  {f.slug for f in callback.session.reporter.findings})


def main() -> None:
    torch.set_num_threads(1)
    data, _ = load_digits_split(0.2, 0)
    for schedule in ({}, {"check_every": 100}, {"warmup_steps": 2}):
        torch.manual_seed(0)
        mlp = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10))
        flat = findings(mlp, torch.optim.SGD(mlp.parameters(), lr=1e-7), data, 31, **schedule)
        torch.manual_seed(0)
        late = LateHead()
        head = findings(late, torch.optim.AdamW(late.parameters(), lr=1e-3), data, 2, **schedule)
        name = ", ".join(f"{k}={v}" for k, v in schedule.items()) or "defaults (check_every=50, warmup_steps=3)"
        print(f"GuardCallback({name}): flat loss, 713 steps: {flat or 'no finding'}; "
              f"head used from step 2: {head or 'no finding'}")


if __name__ == "__main__":
    main()
