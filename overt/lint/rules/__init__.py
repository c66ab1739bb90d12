"""Every lint rule, one per static catalog entry, registered by slug in :data:`RULES`."""

from overt.lint.rules import data, distributed, gradients, losses, modes, modules, saving, tensors  # noqa: F401,E501
from overt.lint.rules import dropout  # noqa: F401  (issue 24: functional dropout)
from overt.lint.rules import resume  # noqa: F401  (issue 30: a resume that leaves the optimizer behind)
from overt.lint.rules import generators, plateau  # noqa: F401  (issue 33: one-shot parameters, plateau mode)
from overt.lint.rules import listings, refit  # noqa: F401  (issue 33: listings paired unsorted, preprocessing refit)
from overt.lint.rules import augsync  # noqa: F401  (issue 33: input and target augmented with separate draws)
from overt.lint.rules import initload, returns, selfloss  # noqa: F401  (issue 33: sequence models and state)
from overt.lint.rules import precision  # noqa: F401  (issue 33: float16 autocast without a GradScaler)
from overt.lint.rules import metrics  # noqa: F401  (issue 33: evaluation code that computes the wrong number)
from overt.lint.rules import datasets, earlystop, probloss  # noqa: F401  (issue 33 round three)
from overt.lint.rules import entropy, metricargs  # noqa: F401  (issue 33: entropy bonus sign, metric order)
from overt.lint.rules import lrlambda  # noqa: F401  (issue 33: a LambdaLR function that returns the rate)
from overt.lint.rules import freezing  # noqa: F401  (issue 33: a freeze set where no parameter sees it)
from overt.lint.rules import accumwindow  # noqa: F401  (issue 33: an accumulation step that does not wait)
from overt.lint.rules import frozenrows  # noqa: F401  (issue 33: gradient rows zeroed under weight decay)
from overt.lint.rules import emaswap, klsign  # noqa: F401  (issue 33: EMA decay swapped, KL maximised)
from overt.lint.rules import accumulators, normstats, padeos, reductions, windows  # noqa: F401  (issue 33: datapipe)
from overt.lint.rules import bootstrap, casing, lowprec, trainlength, windowsplit  # noqa: F401  (issue 33 round 4)
from overt.lint.rules import boxflip, edges, pooling, ranking, reparam  # noqa: F401  (issue 33 round four, dev4a)
from overt.lint.rules import bestdirection, runningbest, selection  # noqa: F401  (issue 33: model selection)
from overt.lint.rules import argslots  # noqa: F401  (issue 33: an argument in another parameter's slot)
from overt.lint.rules import distpad  # noqa: F401  (issue 33: a count over a padding DistributedSampler)
from overt.lint.rules import axes  # noqa: F401  (issue 33: axes moved by reshape, a bidirectional RNN's last step)
from overt.lint.rules import bnmomentum  # noqa: F401  (issue 33: a Keras BatchNorm momentum)
from overt.lint.rules import outputlink  # noqa: F401  (issue 33: evaluation reads outputs as the loss trained them)
from overt.lint.rules import singleton  # noqa: F401  (issue 33: a softmax or argmax over an axis of size 1)
from overt.lint.rules import repeats  # noqa: F401  (issue 33: one module repeated in a ModuleList/Sequential)
from overt.lint.rules import axiszero, derivgraph  # noqa: F401  (issue 33: axis 0 as None, derivative graphless)
from overt.lint.rules import folds, mcsamples  # noqa: F401  (issue 33: repeated runs start fresh, MC samples differ)
from overt.lint.rules.base import FIXABLE, RULES, Edit, Hit

__all__ = ["RULES", "FIXABLE", "Edit", "Hit"]
