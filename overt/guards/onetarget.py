"""Guard on classification targets that hold a single class for the whole run (slug
``targets-one-class``; issue 33, data pipelines: transforms applied to targets).

An invariant of a classification objective: its targets take more than one value over training.
A model scored against one class only learns to predict that class.  Targets lose their values on
the way from the data set to the loss, silently: ``ToTensor()``/``to_tensor`` applied to a mask of
class ids divides them by 255 (ids 1..K become 0.004..0.04 and ``.long()`` turns every pixel into
class 0; pytorch/vision#2497, pytorch/pytorch#53959, albumentations#148), a ``Normalize`` or a
resize with interpolation run on the mask with the image, float labels in [0, 1) cast with
``.long()``, the label read from a column that is constant.

Seen on checked steps of ``cross_entropy``/``nll_loss`` with class-index targets (one per sample,
or a dense map: per pixel, per position) and scores over at least two classes: the smallest and
the largest target the loss does not ignore, and how many there were, computed on the device and
read with the checked step's other values; class-index targets only for three classes or more (a
two-class loss called once with zeros and once with ones, as a domain classifier or a GAN is, is
constant at each call site on purpose).  Reported once per loss call site at the end of the run
when every checked step's targets were one and the same class, over at least :data:`MIN_STEPS`
checked steps spanning at least :data:`MIN_SPAN` steps and :data:`MIN_PASSES` passes of a
DataLoader (two whole epochs: a loader over a data set sorted by class does not look constant over
two passes), with at least :data:`MIN_TARGETS` targets.  Silent without a DataLoader (the length of
an epoch is not known), for a single-class head, and for a run too short to judge.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from overt.guards.check import Check
from overt.guards.losses import ignore_index_of

if TYPE_CHECKING:
    from overt.guards.session import GuardSession

MIN_STEPS = 4  # checked steps seen
MIN_SPAN = 20  # steps between the first and the last of them
MIN_PASSES = 3  # DataLoader passes started over one data set (two whole epochs done)
MIN_TARGETS = 128  # targets the loss did not ignore
#: class-index targets are judged for three classes or more: a two-class loss fed one constant label per call
#: site is often meant (a domain classifier's source and target batches, real and fake in a GAN)
MIN_CLASSES = 3
BINARY = ("binary_cross_entropy", "binary_cross_entropy_with_logits")


class _Site:
    """What one loss call site's checked targets showed."""

    def __init__(self, name: str, classes: int, step: int):
        self.name = name
        self.classes = classes
        self.first = step
        self.last = step
        self.steps = 0
        self.targets = 0.0
        self.low: float | None = None
        self.high: float | None = None
        self.binary = False  # a binary cross-entropy's dense float targets


class OneTargetChecks(Check):
    name = "onetarget"

    def __init__(self, session: GuardSession):
        super().__init__(session)
        self.sites: dict[str, _Site] = {}
        self.varied: set[str] = set()  # sites whose targets took two values: never judged again

    def on_checked_loss(self, name: str, inp: Any, target: Any, args: tuple, kwargs: dict) -> None:
        if name in BINARY:
            self._binary(name, inp, target)
            return
        if name not in ("cross_entropy", "nll_loss") or not isinstance(target, torch.Tensor) \
                or target.is_floating_point() or target.dtype == torch.bool or not target.numel():
            return
        if not isinstance(inp, torch.Tensor) or inp.dim() < 2 or inp.shape[1] < MIN_CLASSES \
                or inp.device.type == "meta":
            return
        found = self._site(name, int(inp.shape[1]))
        if found is None:
            return
        loc, site = found
        t = target.detach()
        kept = t != ignore_index_of(args, kwargs)
        big = torch.iinfo(t.dtype).max
        low = t.masked_fill(~kept, big).amin()
        high = t.masked_fill(~kept, -big).amax()
        self.s.defer(torch.stack((low, high, kept.sum())).float(), self._seen(loc, site, self.s.step))

    def _binary(self, name: str, inp: Any, target: Any) -> None:
        """Dense binary targets (a mask per pixel): the largest target, for masks whose ones became 1/255."""
        if not isinstance(target, torch.Tensor) or not target.is_floating_point() or target.dim() < 3 \
                or not isinstance(inp, torch.Tensor) or inp.device.type == "meta":
            return
        found = self._site(name, 2, binary=True)
        if found is None:
            return
        loc, site = found
        t = target.detach()
        self.s.defer(torch.stack((t.amin(), t.amax(), torch.tensor(float(t.numel()), device=t.device))).float(),
                     self._seen(loc, site, self.s.step))

    def _site(self, name: str, classes: int, binary: bool = False) -> tuple[str, _Site] | None:
        """The loss call site (the user's line) and what its checked targets showed so far; None for a site
        whose targets already took two values."""
        loc = self.s.losses.site() or f"F.{name}"
        if loc in self.varied:
            return None
        site = self.sites.get(loc)
        if site is None:
            site = self.sites[loc] = _Site(name, classes, self.s.step)
            site.binary = binary
        return loc, site

    def _seen(self, loc: str, site: _Site, step: int):
        def callback(vals: list[float]) -> None:
            low, high, n = vals
            if not n:
                return
            site.low = low if site.low is None else min(site.low, low)
            site.high = high if site.high is None else max(site.high, high)
            if site.binary:
                one_class = site.low >= 0 and 0 < site.high < 0.5  # ones rescaled below the threshold
            else:
                one_class = site.low == site.high
            if not one_class:
                self.varied.add(loc)
                self.sites.pop(loc, None)
                return
            site.steps += 1
            site.targets += n
            site.last = max(site.last, step)

        return callback

    def end_of_run(self) -> None:
        s = self.s
        if max(s.loader_passes.values(), default=0) < MIN_PASSES:
            return
        for loc, site in self.sites.items():
            if loc in self.varied or site.low is None or site.steps < MIN_STEPS:
                continue
            if site.last - site.first < MIN_SPAN or site.targets < MIN_TARGETS:
                continue
            if site.binary:
                self._report_binary(loc, site)
                continue
            cls = int(site.low)
            s.report(
                "targets-one-class",
                f"every target that F.{site.name} at {loc} received on {site.steps} checked steps (steps {site.first}-"
                f"{site.last}, {int(site.targets)} targets, two or more passes over the data) is class {cls}, while "
                f"the model scores {site.classes} classes: the model is trained to predict class {cls} everywhere. "
                "The targets lost their values between the data set and the loss: ToTensor()/to_tensor (or "
                "Normalize) applied to a mask of class ids divides them by 255, so .long() makes every id 0; float "
                "labels in [0, 1) cast with .long(); a label read from a constant column; a sampler that draws from "
                "a few samples only.",
                fix="convert masks and class labels without rescaling (torch.as_tensor(np.array(mask), "
                    "dtype=torch.long), or PILToTensor()), apply ToTensor/Normalize/colour transforms to the image "
                    "only, and look at torch.unique() of a batch's targets.",
                where=f"targets of F.{site.name} at {loc}", key=loc)

    def _report_binary(self, loc: str, site: _Site) -> None:
        self.s.report(
            "targets-one-class",
            f"every target that F.{site.name} at {loc} received on {site.steps} checked steps (steps {site.first}-"
            f"{site.last}, {int(site.targets)} targets, two or more passes over the data) lies in [0, "
            f"{site.high:.3g}]: no target is a positive (1), yet some are not 0, so the masks' ones were rescaled "
            "(ToTensor()/to_tensor divides a uint8 mask by 255: 1 becomes 0.0039). The model is trained to "
            "predict the negative class everywhere.",
            fix="convert masks without rescaling (torch.as_tensor(np.array(mask), dtype=torch.float32), or "
                "PILToTensor()), or scale 0/255 masks by 255 only when their ones are 255.",
            where=f"targets of F.{site.name} at {loc}", key=loc)
