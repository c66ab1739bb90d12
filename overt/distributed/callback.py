"""The whole final weights of a sharded model.

Under FSDP2 each rank holds a shard of every parameter; ``model.safetensors`` must hold the
whole model, so every rank takes part in gathering it (a collective, once, when training ends:
:meth:`overt.distributed.parallel.FSDP.finish`) and rank 0's :class:`~overt.run.writer.RunWriter`
writes what :meth:`~overt.engine.parallel.Parallel.final_weights` returns.  Under DDP every rank
already holds the whole model and nothing is gathered.
"""

from __future__ import annotations

from typing import Any


def full_state_dict(model: Any) -> dict[str, Any]:
    """The model's whole state dict on rank 0's CPU (empty on other ranks); a collective under FSDP2."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

    return get_model_state_dict(model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))
