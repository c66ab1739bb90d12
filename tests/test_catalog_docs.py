"""The catalog in code, its page, and the docs of every lint rule and guard stay in sync."""

from __future__ import annotations

import re

import pytest

from overt import catalog
from tests.conftest import REPO


def test_catalog_page_is_generated_from_the_code():
    assert (REPO / "docs" / "catalog.md").read_text() == catalog.markdown()


#: entries overt added after the shared catalog (never renamed, never reused)
ADDED = {"trig-of-degrees", "squashed-twice", "mask-on-reduced-loss", "generation-reads-untrained-position", "response-mask-skips-first-token", "unsharded-sampler", "unset-epoch", "every-rank-saves", "numpy-shared-memory",
         "unregistered-tensor", "too-many-workers", "batchnorm-in-accumulation", "effective-batch-size",
         "val-loss-diverging", "val-metric-collapse",
         # issue 24, real-world silent bugs (tests/wild)
         "weights-frozen", "dropout-always-on", "val-overlaps-train", "worker-rng-copied",
         # issue 23, using what was trained
         "train-serve-skew",
         # issue 22, framework conventions (Lightning, Accelerate, Fabric)
         "training-step-no-loss", "backward-bypasses-framework",
         # issue 30, a resume that leaves the optimizer's state behind
         "partial-resume",
         # issue 33, invariants of correct training
         "batch-dependent-eval", "load-state-dict-no-effect", "snapshot-aliases-weights",
         "plateau-mode-mismatch", "optimizer-not-on-model",
         "step-bypasses-scaler", "softmax-over-batch",
         "eval-inputs-augmented", "clip-without-gradients",
         "ignore-index-is-class",
         # issue 33, data and labels consistent with training (branch invdata)
         "class-weights-inverted", "sequence-targets-misaligned", "labels-unrelated-to-inputs",
         "preprocessing-refit-on-eval", "listings-paired-unsorted",
         # issue 33, model state, gradient bookkeeping, evaluation state
         "eval-state-carried", "dropout-drops-most", "eval-order-mismatch",
         "scheduler-optimizer-idle", "eval-model-stale",
         # issue 33, sequence models, masks, targets and state (branch seqmodel)
         "causal-mask-missing", "attention-mask-inverted", "labels-all-ignored", "loss-compares-itself", "loss-term-constant",
         "returns-from-past-rewards", "init-after-load", "loss-over-padding",
         # issue 33, numeric invariants (branch numerics)
         "fp16-without-scaler", "optimizer-eps-underflow",
         # issue 33, evaluation code that computes the wrong number (branch metrics)
         "prediction-shape-mismatch", "metric-wrong-denominator", "metric-wrong-class-score",
         "predictions-not-denormalised", "metric-not-reset",
         # issue 33, round three's development half (branch dev3fix)
         "clip-after-step", "loss-arguments-swapped", "dataset-length-wrong",
         "patience-never-reset", "sampler-weights-short", "probability-loss-on-logits",
         # issue 33, late rules (branch late2)
         "entropy-bonus-sign", "metric-arguments-swapped",
         # issue 33, round three test half follow-up (branch late1)
         "lr-lambda-returns-rate",
         # issue 33, optimizers, parameters and their state (branch optparams)
         "frozen-params-moved", "freeze-not-applied", "lr-overwritten-by-scheduler",
         "accumulation-window-broken", "lr-schedule-skips-groups",
         # issue 33, representation learning and fine-tuning (branch repr)
         "stop-gradient-missing", "frozen-model-in-train-mode", "ema-decay-swapped",
         "kl-divergence-maximised", "soft-targets-misaligned",
         # issue 33, data pipelines and evaluation code (branch datapipe)
         "accumulator-not-reset", "targets-one-class", "eos-masked-as-padding",
         "eval-drops-samples", "target-in-inputs", "window-target-misaligned",
         "metric-shared-across-stages", "eval-loop-stops-early", "eval-classes-renumbered", "metric-imperfect-on-truth",
         "metric-reduced-twice", "windows-split-at-random",
         # issue 33, round four's development half (branch dev4b)
         "steps-counted-from-samples", "bootstrap-action-wrong-state", "windows-split-at-random",
         "scores-squashed-in-low-precision", "padding-idx-real-index",
         "tokenizer-casing-mismatch",
         # issue 33, round four's development half (branch dev4a)
         "ranking-metric-on-labels", "variance-as-std", "box-flip-corners-unswapped", "last-token-left-padding",
         "edges-one-direction",
         # issue 33, model selection reads held-out data (branch selection)
         "selection-on-train-data", "selection-on-test-data", "best-value-not-tracked",
         "best-model-not-restored", "best-kept-in-wrong-direction",
         # issue 33, an argument in another parameter's slot (branch argname)
         "argument-in-wrong-slot",
         # issue 33, coverage of the data by training and evaluation (branch emptyrun)
         "loader-pass-empty", "optimizer-never-steps", "eval-samples-repeated", "eval-samples-missed",
         # issue 33, axes that keep their meaning (branch axes)
         "reshape-moves-axis", "integer-mask-index", "bidirectional-last-step",
         # issue 33, BatchNorm running statistics that do not describe the data (branch stats)
         "running-stats-never-computed", "batchnorm-momentum-inverted",
         # issue 33, evaluation reads the outputs as the training loss taught them (branch scores)
         "logits-thresholded-as-probabilities", "scores-activation-mismatch", "eval-loss-scores-ignored",
         "metric-summed-in-low-precision",
         # issue 33, an evaluated average that absorbed none of the training (session 42)
         "eval-copy-near-initial",
         # issue 33, adversarial players pulling the same way (session 42)
         "generator-agrees-with-critic",
         # issue 33, a normalisation or selection over an axis of size 1 (branch singleton)
         "singleton-axis",
         # issue 33, orders and modules that must not repeat (branch repeats)
         "shuffle-order-repeats", "modules-repeated-in-container",
         # issue 33, axis 0 taken for None, a derivative loss term without a graph (branch lintaxis)
         "axis-zero-as-none", "derivative-without-graph",
         # issue 33, repeated runs start fresh and Monte Carlo samples differ (branch lintloops)
         "model-carried-across-folds", "mc-samples-identical",
         # issue 33, a flip, rotation or roll whose default axes take in the batch (branch causal)
         "transform-over-batch-axis", "grid-coordinates-swapped", "data-mutated-by-reading",
         # issue 33, sets a correct program keeps disjoint (branch leakage)
         "split-over-copies", "disjoint-sets-overlap",
         # issue 33, hand-written metrics that read better than the metric they are named for (branch metrics8)
         "metric-rewards-disjoint-prediction", "metric-off-definition",
         # issue 33, terms of a summed loss weighted by how they were reduced (branch lossmix)
         "loss-terms-misscaled", "regression-target-is-input",
         # issue 33, what is scored in evaluation given to the model as input (branch evalsets)
         "eval-edges-in-input-graph",
         # issue 33, parameters trained at another group's learning rate (branch cluster)
         "group-lr-not-applied",
         # issue 33, conventions two places of one program share (branch conventions)
         "decoder-blank-not-loss-blank",
         # issue 33, state that lives beside the model follows it through the run (branch optreset)
         "optimizer-state-discarded",
         # issue 33, the order of training events: a forward reads autocast's copy of a weight a step changed
         # (branch lifecycle)
         "autocast-stale-weights", "state-snapshot-not-restored",
         "grad-sync-window-misaligned",
         # issue 33, a copy of the model the program reads follows it (branch shadows)
         "average-diverges-from-model",
         # issue 33, losses and targets consistent with what they claim (branch losses11)
         "selection-picks-masked", "prediction-never-read", "running-mean-weights-newest",
         # issue 33, evaluation that computes another number than it says (branch metrics11)
         "box-format-mismatch", "subset-positions-as-ids",
         "coordinates-scaled-by-other-axis",
         # issue 33, model code that breaks its own structure (branch modelcode)
         "graph-edges-cross-batch", "adapter-not-identity-at-init", "inverse-transform-not-inverse",
         # issue 33, a model folded from the trained one computes what it computed (branch export17)
         "merged-model-differs",
         # issue 33, two sequences paired by position come from one ordering (branch orders)
         "pairing-order-mismatch",
         # issue 33, targets built from memory never filled or filled wrongly (branch rltargets)
         "bootstrap-ignores-done", "schedule-clamped-at-once", "history-holds-one-buffer",
         "nstep-bootstrap-single-discount",
         # issue 33, returns and advantages recomputed by their recursion (session 49, branch rltargets14)
         "targets-off-recursion",
         # issue 33, a recurrent module stepped through a sequence carries its state (session 50, branch recur15)
         "recurrent-state-not-carried",
         # issue 33, model code whose numbers break the structure it names (branch modelnum)
         "checkpoint-recompute-differs", "divided-by-reciprocal", "lengths-do-not-fit-output",
         # issue 33, a loss falls as the prediction moves toward its target (branch lossmono)
         "loss-rises-toward-target",
         # issue 33, the gradient the optimizer receives is the gradient of the loss (branch gradinv)
         "custom-backward-not-linear",
         # issue 33, evaluation computes the expectation of what training computed (branch evalscale)
         "eval-not-train-expectation",
         # issue 33, schedules and class weights consistent with the run and the data (branch sched12)
         "schedule-past-horizon", "class-weight-zero",
         # issue 33, hand-written optimizers and parameter updates do what their hyperparameters say (branch optim12)
         "optimizer-off-definition", "pruning-removes-one-sign",
         # issue 33, every input reaches parameters of its own (branch embrows14)
         "input-columns-unread", "inputs-duplicated",
         # issue 33, a normaliser normalises (branch normalise15)
         "normaliser-not-scale-invariant",
         # issue 33, a loss that can reach its minimum on the outputs it is given (branch lossreach14)
         "logits-bounded", "log-det-sign-flipped",
         # session 49 (evalsep14): an evaluation forward that changes what training reads afterwards
         "eval-pass-changes-training",
         # session 50 (datalabels15): a loss module's per-class configuration rebound to one batch's values
         "loss-config-overwritten",
         # session 52 (modules17): a model's structure computes what its code names
         "linear-layers-collapse", "result-discarded", "residual-skip-missing", "sample-not-reparameterised",
         # session 53 (data18)
         "label-map-interpolated", "transform-statistics-shared",
         # session 53 (optim18): every backward's gradients reach a step
         "backward-discarded", "warmup-outlasts-run",
         # session 54 (latent19): a Gaussian sample's log-scale ranges over all reals
         "log-scale-non-negative", "sample-spread-unpriced",
         # session 54 (evalcal19): a chosen value is the best one, a kept value is the one kept
         "kept-view-overwritten", "choice-over-flat-curve", "diverged-fit-kept",
         # session 54 (features19): features keep the information their inputs had
         "feature-columns-collapsed", "init-loop-misses-nested-layers",
         # session 54 (targets19): a probability target is a distribution
         "probability-target-not-distribution",
         # issue 33, session 55 (tokens20)
         "padding-fills-with-token", "vocabulary-ids-shared",
         "eval-positions-shifted",
         # session 55 (stop20): an early stop acts on the history it was given
         "stop-on-window-worst",
         # session 55 (optdata20): the splits of one data set share its attributes
         "split-attribute-shared",
         # session 55 (grid20): grid_sample reads the image it is given
         "grid-in-pixel-units", "grid-normalised-by-size",
         # session 56 (rank21): a ranking loss pushes hardest on the pairs it gets most wrong
         "loss-saturates-when-wrong"}


def test_slugs_and_codes_are_unique_and_match_the_shared_catalog():
    assert len(catalog.BY_SLUG) == len(catalog.ENTRIES) == len(catalog.BY_CODE)
    shared = REPO.parent / "shared" / "catalog.md"
    if not shared.exists():
        pytest.skip("../shared/catalog.md is not present")
    text = shared.read_text()
    slugs = set(re.findall(r"`([a-z0-9-]+)`", text))
    for entry in catalog.ENTRIES:
        assert entry.slug in slugs or entry.slug in ADDED, f"{entry.slug} is not in shared/catalog.md"


@pytest.mark.parametrize("page,flag", [("lint.md", "static"), ("guards.md", "runtime")])
def test_every_rule_and_guard_has_a_docs_section(page, flag):
    path = REPO / "docs" / page
    text = path.read_text()
    missing = [e.slug for e in catalog.ENTRIES if getattr(e, flag) and e.slug not in text]
    assert not missing, f"{page} documents no section for: {missing}"
