"""Batching variable-length sequences: pad them to the batch's longest and return the lengths.

``pad_collate`` turns samples ``(sequence, target)`` -- ``sequence`` a tensor of shape
``(length, *features)`` -- into ``((padded, lengths), targets)``: ``padded`` of shape
``(batch, longest, *features)`` (``batch_first``), ``lengths`` an int64 CPU tensor, ready for
``nn.utils.rnn.pack_padded_sequence(padded, lengths, batch_first=True, enforce_sorted=False)``,
so the padding never reaches the recurrent layer.  Give it to the engine as
``collate_fn=overt.pad_collate`` (or ``PadCollate(padding_value=...)``)::

    def forward(self, inputs):
        padded, lengths = inputs
        packed = pack_padded_sequence(self.embed(padded), lengths, batch_first=True, enforce_sorted=False)
        _, (h, _) = self.lstm(packed)
        return self.head(h[-1])
"""

from __future__ import annotations

from typing import Any, Sequence

import torch
from torch.nn.utils.rnn import pad_sequence
from torch.utils.data import default_collate


class PadCollate:
    """A ``collate_fn`` for ``(sequence, target)`` samples of different lengths (see the module).

    ``padding_value`` fills the positions past each sequence's end (use the padding token's id
    for token sequences).  Targets are collated as PyTorch's ``default_collate`` does; a target
    that is itself a sequence of its own length (sequence labelling) is padded too, with
    ``target_padding_value`` (e.g. -100, ``CrossEntropyLoss``'s ``ignore_index``)."""

    def __init__(self, padding_value: float = 0.0, target_padding_value: float = -100):
        self.padding_value = padding_value
        self.target_padding_value = target_padding_value

    def __call__(self, samples: Sequence[Any]) -> tuple[tuple[torch.Tensor, torch.Tensor], Any]:
        if not samples or not all(isinstance(s, (tuple, list)) and len(s) == 2 for s in samples):
            from overt.errors import OvertError

            raise OvertError("pad_collate needs samples that are (sequence, target) pairs",
                             where=f"a batch of {len(samples)} samples, the first a {type(samples[0]).__name__}"
                             if samples else "an empty batch",
                             fix="make the dataset return (sequence_tensor, target)")
        sequences = [torch.as_tensor(s[0]) for s in samples]
        lengths = torch.tensor([len(s) for s in sequences], dtype=torch.int64)
        padded = pad_sequence(sequences, batch_first=True, padding_value=self.padding_value)
        targets = [s[1] for s in samples]
        if all(isinstance(t, torch.Tensor) and t.dim() >= 1 for t in targets) and len({len(t) for t in targets}) > 1:
            collated: Any = pad_sequence(targets, batch_first=True, padding_value=self.target_padding_value)
        else:
            collated = default_collate(targets)
        return (padded, lengths), collated


#: ``PadCollate()`` with the default padding values
pad_collate = PadCollate()
