"""Evaluation inputs prepared unlike the training inputs (slug ``train-serve-skew``, at
evaluation time during training; issue 33 family 4).

An invariant of a training run: the model is evaluated on inputs prepared like the ones it is
trained on.  Inputs standardised for training but not for evaluation (or scaled, reordered,
another modality's preprocessing, images normalised with other statistics) break it.  On checked
training forwards the per-feature sums of the model's first input (a ``(batch, features)`` float
tensor; for a batch of images, each image's per-channel mean and standard deviation) are accumulated
on the device;
the first evaluation forwards (eval mode) of each model compare their per-feature means with
those statistics: the comparison is a device tensor read with the next checked step's values,
so nothing is synchronised.  Reported: more than half of the features (those not constant in
training) shifted by more than :data:`Z` training standard deviations or spread :data:`SCALE`
times more or less than in training; or the evaluation samples outside the training samples'
range: of up to :data:`KEEP` training rows kept from checked forwards, 99% have their most extreme
feature (in training standard deviations) below some value, and at least :data:`NOVEL` of the
evaluation samples exceed it (from the same distribution: about 1%; a signal read at twice the
sample rate puts every tone where training had none: 98%).

A model whose training inputs are another trained model's outputs (they require gradients: a
classifier head on an encoder that trains, as in domain adaptation) is not compared: the features
an encoder makes of data it did not train on differ from its training features by design, so a
shift there proves no difference in preparation; the model that reads the data is compared.

Evaluations without ``model.eval()`` (``with torch.no_grad(): model(x)`` on a model without Dropout
or BatchNorm, whose mode changes nothing) are looked at too: entering a ``no_grad`` block of the
user's own code arms the model's forward hook for one forward; a block that ran no forward of the
model gives its arming back at its exit, and a site that never evaluates (an EMA update under
``no_grad`` after every step) is no longer armed after a few entries (:mod:`overt.guards.blocksites`),
so such a loop neither spends the looks its evaluation needs nor pays for them on every step.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from overt.guards.check import Check
from overt.guards.oneshot import OneShotHook
from overt.guards.skewrange import RecentRows, range_share, report_outside
from overt.guards.where import user_location

if TYPE_CHECKING:
    from overt.guards.watched import ModelInfo

Z = 3.0  # standard deviations of a feature's training values
SCALE = 2.0  # the spread of a feature's evaluation values, relative to training
MIN_TRAIN = 3  # checked training forwards before evaluation inputs are compared
MIN_EVAL = 16  # samples in the evaluation batch
LOOKS = 3  # evaluation batches compared per model
MAX_FEATURES = 4096
MAX_CHANNELS = 4  # images: per-channel statistics of inputs with at most this many channels (RGB, RGBA, grey)
MIN_PIXELS = 16  # ... and at least this many pixels
KEEP = 512  # training rows kept for the range comparison
NOVEL = 0.8  # share of evaluation samples beyond the training rows' 99th percentile
OUTSIDE = 0.1  # evaluation values outside the central 99% of a feature's training values, in the median feature
MIN_NOVEL = 32  # evaluation samples needed for the range comparison
NO_GRAD_ARMS = 20  # user no_grad blocks that arm a training-mode model without an evaluation following
TRIES = 20  # evaluation forwards offered per model (too small a batch, other inputs) before giving up


def _features(args: tuple) -> torch.Tensor | None:
    """The model's first input as ``(samples, features)``: a ``(batch, features)`` table as it is; a batch of
    images ``(batch, channels, height, width)`` (at most :data:`MAX_CHANNELS` channels, at least
    :data:`MIN_PIXELS` pixels) as each image's per-channel mean and standard deviation, which a normalisation
    (``(x - mean) / std`` per channel) moves and scales like any feature, whatever the augmentation crops."""
    x = next((a for a in args if isinstance(a, torch.Tensor)), None)
    if x is None or not x.is_floating_point():
        return None
    if x.dim() == 4 and x.shape[1] <= MAX_CHANNELS and x.shape[2] * x.shape[3] >= MIN_PIXELS:
        std, mean = torch.std_mean(x.detach().float().flatten(2), dim=2)
        return torch.cat((mean, std), 1)
    if x.dim() != 2 or not 1 < x.shape[1] <= MAX_FEATURES:
        return None
    return x.detach()


def _is_table(args: tuple) -> bool:
    """Whether the model's first input is a ``(batch, features)`` table (not images summarised per channel)."""
    x = next((a for a in args if isinstance(a, torch.Tensor)), None)
    return x is not None and x.dim() == 2


def _spatial(args: tuple) -> tuple[int, ...] | None:
    """The height and width of a batch of images (the model's first input), else None: images are compared only
    with training images of their size (padding, another resolution or a crop of another size moves each
    image's statistics without any difference in preparation)."""
    x = next((a for a in args if isinstance(a, torch.Tensor)), None)
    return tuple(x.shape[2:]) if x is not None and x.dim() == 4 else None


def _described(args: tuple, features: int) -> str:
    """What the compared features are, for the message."""
    x = next((a for a in args if isinstance(a, torch.Tensor)), None)
    if x is not None and x.dim() == 4:
        return f"{features} per-image channel statistics (the mean and spread of each of {features // 2} channels)"
    return f"{features} input features"


class SkewChecks(Check):
    name = "skew"

    def __init__(self, session: Any):
        super().__init__(session)
        self.stats: dict[int, list[Any]] = {}  # id(ModelInfo) -> [forwards, n, sum, sum of squares]
        self.rows: dict[int, list[torch.Tensor]] = {}  # id(ModelInfo) -> training rows kept (copies)
        self.kept: dict[int, int] = {}  # id(ModelInfo) -> how many rows ``rows`` holds
        self.recent: dict[int, RecentRows] = {}  # id(ModelInfo) -> the latest training rows of a table (copies)
        self.looks: dict[int, int] = {}
        self.tries: dict[int, int] = {}  # id(ModelInfo) -> evaluation forwards offered to the comparison
        self.arms: dict[int, int] = {}  # id(ModelInfo) -> no_grad blocks that armed it in vain
        self.block_armed: dict[int, list[int]] = {}  # id(user no_grad block) -> the models its entry armed
        self.downstream: set[int] = set()  # models whose training inputs are another trained model's outputs
        self.sizes: dict[int, tuple[int, ...] | None] = {}  # id(ModelInfo) -> training images' size (() if mixed)
        self.hook = OneShotHook()
        self.wants_no_grad = False  # some training-mode model has statistics and looks left

    def on_checked_forward(self, info: ModelInfo, args: tuple, light: bool) -> None:
        if id(info) in self.downstream:
            return
        raw = next((a for a in args if isinstance(a, torch.Tensor)), None)
        if raw is not None and raw.requires_grad:
            # its inputs are made by another model that trains (a head on a trained encoder): features of
            # data no model trained on differ from the training features by design (overfitting, a
            # domain to adapt to), so a shift there proves no preparation difference; the model
            # that reads the data is the one compared
            self.downstream.add(id(info))
            self.stats.pop(id(info), None)
            self.rows.pop(id(info), None)
            self.kept.pop(id(info), None)
            self.recent.pop(id(info), None)
            return
        x = _features(args)
        if x is None:
            return
        st = self.stats.get(id(info))
        x = x.float()
        if st is None or st[2].shape != x.shape[1:] or st[2].device != x.device:
            st = self.stats[id(info)] = [0, 0, torch.zeros_like(x[0]), torch.zeros_like(x[0])]
            self.sizes[id(info)] = _spatial(args)
        elif self.sizes.get(id(info)) != _spatial(args):
            self.sizes[id(info)] = ()  # training images of several sizes: none is compared
        st[0] += 1
        st[1] += x.shape[0]
        st[2] += x.sum(0)
        st[3] += (x * x).sum(0)
        if _is_table(args):
            self.recent.setdefault(id(info), RecentRows(KEEP)).add(x)
        kept = self.kept.get(id(info), 0)
        if kept < KEEP:
            row = x[:KEEP - kept].clone()
            self.rows.setdefault(id(info), []).append(row)
            self.kept[id(info)] = kept + row.shape[0]
        if st[0] >= MIN_TRAIN and not info.dropbn:
            self.wants_no_grad = True

    def no_grad_entered(self, block: object = None) -> bool:
        """A ``no_grad``/``inference_mode`` block of the user's code begins: arm the forward of the
        training-mode models without Dropout/BatchNorm that may be evaluated in it.  True when some model
        was armed for ``block``: its exit (:meth:`no_grad_exited`) gives the arming back if no forward of
        the model came (an EMA update under ``no_grad`` spends none)."""
        wanted = False
        armed = []
        for info in self.s.models.values():
            key = id(info)
            st = self.stats.get(key)
            if not info.module.training or info.dropbn or st is None or st[0] < MIN_TRAIN:
                continue
            if self.looks.get(key, 0) >= LOOKS or self.arms.get(key, 0) >= NO_GRAD_ARMS \
                    or self.s.reporter.has("train-serve-skew", info.name):
                continue
            wanted = True
            self.arms[key] = self.arms.get(key, 0) + 1
            armed.append(key)
            if info.fwd_left < 1:
                info.fwd_left = 1
            if info.pre_handle is None:
                info.pre_handle = info.module.register_forward_pre_hook(self.s._fwd_pre, with_kwargs=True)
        self.wants_no_grad = wanted
        if armed and block is not None:
            self.block_armed[id(block)] = armed
            return True
        return False

    def no_grad_exited(self, block: object) -> bool | None:
        """The user's block that :meth:`no_grad_entered` armed has exited: whether a forward of an armed
        model came in it (None if the block armed nothing).  An arming no forward used is given back."""
        keys = self.block_armed.pop(id(block), None)
        if keys is None:
            return None
        saw = False
        for key in keys:
            if self.arms.get(key, 0) == 0:
                saw = True  # on_no_grad_forward: an evaluation forward came
            else:
                self.arms[key] -= 1
        return saw

    def eval_looks_left(self, info: ModelInfo) -> bool:
        st = self.stats.get(id(info))
        return st is not None and st[0] >= MIN_TRAIN and self.looks.get(id(info), 0) < LOOKS \
            and self.tries.get(id(info), 0) < TRIES and not self.s.reporter.has("train-serve-skew", info.name)

    def on_no_grad_forward(self, info: ModelInfo) -> None:
        self.arms[id(info)] = 0  # an evaluation came: the arming was not in vain
        self._arm(info, no_grad=True)

    def on_eval_forward(self, info: ModelInfo, args: tuple) -> None:
        self._arm(info)

    def _arm(self, info: ModelInfo, no_grad: bool = False) -> None:
        self.hook.clear_stale()
        st = self.stats.get(id(info))
        if self.hook.pending or (info.module.training and not no_grad) or st is None or st[0] < MIN_TRAIN:
            return
        if self.looks.get(id(info), 0) >= LOOKS or self.s.reporter.has("train-serve-skew", info.name):
            return
        self.hook.place(info.module, self._after(info))

    def _after(self, info: ModelInfo):
        def hook(module: Any, args: tuple, output: Any) -> None:
            if not self.hook.fired():
                return
            try:
                self._compare(info, args, user_location(2))
            except Exception as exc:  # a guard never breaks the user's forward
                self.s.check_failed(self, exc)

        return hook

    def _compare(self, info: ModelInfo, args: tuple, site: str | None = None) -> None:
        self.tries[id(info)] = self.tries.get(id(info), 0) + 1
        x = _features(args)
        st = self.stats.get(id(info))
        if x is None or st is None or x.shape[0] < MIN_EVAL or st[2].shape != x.shape[1:] or st[2].device != x.device:
            return
        if self.sizes.get(id(info)) != _spatial(args):
            return  # images of another size than the training images (or tables after images)
        self.looks[id(info)] = self.looks.get(id(info), 0) + 1
        n = st[1]
        mean = st[2] / n
        std = (st[3] / n - mean * mean).clamp_min(0).sqrt()
        judged = std > 0.1 * std.mean() + 1e-12  # features (nearly) constant in training are not judged
        u = (x.float() - mean) / std.clamp_min(1e-12)  # evaluation values in training standard deviations
        z = u.mean(0).abs()  # the shift of the mean
        m2 = (u * u).mean(0)  # ~1 when prepared alike; << 1 or >> 1 when scaled differently
        off = ((z > Z) | (m2 > SCALE * SCALE) | (m2 < 1 / (SCALE * SCALE))) & judged
        shifted = off.float().sum() / judged.float().sum().clamp_min(1)
        med = torch.where(judged, m2, torch.full_like(m2, float("nan"))).nanmedian().sqrt()
        novel = torch.zeros((), device=x.device)
        outside = torch.zeros((), device=x.device)
        rows = self.rows.get(id(info))
        if rows and x.shape[0] >= MIN_NOVEL:
            # masks by torch.where, not boolean indexing: nothing here waits for the device
            train = torch.cat(rows)
            extreme = torch.where(judged, ((train - mean) / std.clamp_min(1e-12)).abs(), 0.0).amax(1)
            bound = torch.quantile(extreme, 0.99)
            novel = (torch.where(judged, u.abs(), 0.0).amax(1) > bound).float().mean()
            recent = self.recent.get(id(info))
            if _is_table(args) and recent is not None and recent.shape_fits(train):
                # the first training rows and the latest: compared only where training itself stays in one range
                outside = range_share(train, torch.cat(recent.rows), x.float(), judged)
        features, step = _described(args, x.shape[1]), self.s.step
        where = f"{info.name} forward, evaluation" + (f" at {site}" if site else "")
        self.s.defer(torch.stack((shifted, med, novel, outside)), self._judge(info, features, step, x.shape[0], where))

    def _judge(self, info: ModelInfo, features: str, step: int, samples: int, where: str):
        s = self.s

        def callback(vals: list[float]) -> None:
            shifted, med, novel, outside = vals
            if not shifted > 0.5:
                if novel >= NOVEL:
                    self._report_range(info, novel, samples, step, where)
                elif outside >= OUTSIDE:
                    report_outside(s, info, outside, features, samples, step, where)
                return
            s.report(
                "train-serve-skew",
                f"the evaluation inputs of {info.name} are not prepared like its training inputs: in "
                f"{shifted:.0%} of the {features} the evaluation batch's mean lies more than "
                f"{Z:g} training standard deviations from the training mean or its spread is off by more than "
                f"{SCALE:g}x (median root-mean-square of the evaluation values in training standard deviations: "
                f"{med:.2g}, 1 when prepared alike). "
                "Preprocessing (standardisation, scaling, feature order) applied to one and not the other makes "
                "every validation metric measure the wrong inputs.",
                fix="apply the same preprocessing to training and evaluation inputs (fit the normaliser on the "
                "training data, then transform both).",
                where=where, key=f"eval:{info.name}", step=step,
            )

        return callback

    def _report_range(self, info: ModelInfo, novel: float, samples: int, step: int, where: str) -> None:
        self.s.report(
            "train-serve-skew",
            f"the evaluation inputs of {info.name} lie outside the range of its training inputs: {novel:.0%} of "
            f"{samples} evaluation samples have a feature more extreme (in training standard deviations) than 99% "
            "of the training samples have any -- about 1% when both come from the same distribution. Inputs "
            "prepared another way (another sample rate or unit, a missing or different resampling, scaling or "
            "normalisation) put the evaluation data where the model was never trained, so every validation metric "
            "measures the wrong inputs.",
            fix="prepare evaluation inputs exactly as the training inputs (same sample rate, units and "
            "preprocessing: resample, convert, normalise with the training statistics) before the model sees them.",
            where=where, key=f"eval:{info.name}", step=step,
        )

    def remove_hooks(self) -> None:
        self.hook.remove()
