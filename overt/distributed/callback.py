"""The one engine plug-in a multi-process run adds on every rank: whole final weights for rank 0.

Under FSDP2 each rank holds a shard of every parameter; ``model.safetensors`` must hold the
whole model, so every rank takes part in gathering it (a collective, once, at the end) and
rank 0's :class:`~overt.run.writer.RunWriter` writes it.  Under DDP every rank already holds
the whole model and nothing is gathered.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from overt.engine.callbacks import Callback

if TYPE_CHECKING:
    from overt.engine.loop import Trainer


def full_state_dict(model: Any) -> dict[str, Any]:
    """The model's whole state dict on rank 0's CPU (empty on other ranks); a collective under FSDP2."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

    return get_model_state_dict(model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))


class FullWeights(Callback):
    def on_summary(self, trainer: Trainer, summary: dict[str, Any]) -> None:
        if getattr(trainer, "strategy", None) == "fsdp":
            trainer.final_weights = full_state_dict(trainer.model)
