"""Guard on two inputs of a model that hold the same values (slug ``inputs-duplicated``; issue 33, branch
embrows14: every input reaches parameters of its own).

The premise: two arguments a model's ``forward`` takes in two slots carry two things -- ids and their token
types, users and items, a categorical field and another, a source and its segment labels -- and the model gives
each its own parameters.  The same values passed in both slots break it: a collate function that fills the token
types with the input ids (``token_type_ids.append(seqs[0])`` for ``seqs[1]``:
devjwsong/gpt2-dialogue-generation-pytorch#11), a two-tower model given the user ids twice, a batch unpacked
into the wrong names.  Whatever the second slot should carry never reaches the model, and nothing fails.

What is proven, once per model, on its first checked training forward with two or more integer tensor
arguments (ids, categories: not floating point, not boolean) of one shape with at least :data:`MIN_ROWS` rows
and :data:`MIN_ELEMENTS` elements: for each such pair (up to :data:`MAX_PAIRS`), whether they are equal on every
element, and the range of their values (queued as one device tensor, read with the next checked step's
values).  Reported when a pair is equal everywhere and its values span at least 3 ids (two masks of 0 and 1,
or two all-zero fields, can be equal by design).

Silent on pairs where a slot's parameter name says the model is given its own target or a decoder input
(``labels``, ``targets``, ``tgt``, ``y``, a decoder's ``dec_*``): a language model that shifts the labels it
is given inside (labels equal to the input ids), a copy task or an autoencoder whose decoder reads the source.
Keyword arguments are not seen (the forward pre-hook is given the positional ones).  Floating-point inputs are
not compared (a siamese pair of one image, two augmentations that happen to be the identity).
"""

from __future__ import annotations

import inspect
from typing import TYPE_CHECKING, Any

import torch

from overt.guards.check import Check
from overt.guards.where import user_location

if TYPE_CHECKING:
    from overt.guards.watched import ModelInfo

MIN_ROWS = 8  # rows of each argument
MIN_ELEMENTS = 32  # elements of each argument
MIN_RANGE = 2  # max - min of the shared values (three ids or more): a 0/1 mask pair is not judged
MAX_PAIRS = 4  # pairs compared per model
_OWN_TARGET = ("label", "target", "tgt", "dec", "answer")  # a slot for what the model predicts or decodes


def _names(module: Any, n: int) -> list[str]:
    """The names of the first ``n`` positional parameters of ``module.forward`` (``arg1``... where unknown)."""
    try:
        params = [p for p in inspect.signature(module.forward).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        params = []
    names = [p.name for p in params[:n]]
    return names + [f"argument {k + 1}" for k in range(len(names), n)]


def _own_target(name: str) -> bool:
    low = name.lower()
    return low == "y" or any(word in low for word in _OWN_TARGET)


def _ids(a: Any) -> bool:
    return (isinstance(a, torch.Tensor) and not a.is_floating_point() and not a.is_complex()
            and a.dtype != torch.bool and a.dim() >= 1 and a.shape[0] >= MIN_ROWS and a.numel() >= MIN_ELEMENTS
            and a.device.type != "meta")


class SameInputChecks(Check):
    name = "sameinputs"

    def __init__(self, session: Any):
        super().__init__(session)
        self.done: set[int] = set()  # id(ModelInfo) judged

    def on_checked_forward(self, info: ModelInfo, args: tuple, light: bool) -> None:
        if id(info) in self.done or len(args) < 2:
            return
        slots = [(k, a) for k, a in enumerate(args) if _ids(a)]
        if len(slots) < 2:
            return
        self.done.add(id(info))
        names = _names(info.module, len(args))
        pairs = [(i, j) for n, (i, a) in enumerate(slots) for j, b in slots[n + 1:]
                 if a.shape == b.shape and not _own_target(names[i]) and not _own_target(names[j])][:MAX_PAIRS]
        if not pairs:
            return
        where = user_location(2)
        values = []
        for i, j in pairs:
            a, b = args[i], args[j]
            values.append(torch.stack([a.eq(b).all().float(), (a.amax() - a.amin()).float()]))
        shapes = [tuple(args[i].shape) for i, _ in pairs]
        self.s.defer(torch.cat(values), lambda v: self._judge(info, v, pairs, names, shapes, where))

    def _judge(self, info: ModelInfo, values: list[float], pairs: list, names: list[str], shapes: list,
               where: str | None) -> None:
        for k, (i, j) in enumerate(pairs):
            equal, span = values[2 * k], values[2 * k + 1]
            if not equal or span < MIN_RANGE:
                continue
            first, second = names[i], names[j]
            elements = 1
            for d in shapes[k]:
                elements *= d
            self.s.report(
                "inputs-duplicated",
                f"the arguments `{first}` and `{second}` of {info.name}'s forward hold the same values on every "
                f"one of the {elements} elements of a training batch (shape {shapes[k]}, values over a range of "
                f"{int(span) + 1} ids): two inputs the model reads in two slots are one input given twice, so whatever "
                f"`{second}` should carry (token types, another field of the batch) never reaches the model, and "
                "the parameters meant for it learn from a copy of the other input.",
                fix=f"build `{second}` from its own field where the batch is assembled (a collate function that "
                f"appends seqs[0] where seqs[1] belongs, a tuple unpacked into the wrong names), so that each "
                "argument carries what its slot is for.",
                where=where or "", key=info.name,
            )
            return
