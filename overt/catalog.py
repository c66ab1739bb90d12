"""The catalog of silent training failures, in code.

Every finding overt reports -- from a runtime guard or from ``overt lint`` --
carries one of these entries: a fixed *slug* (what users read, grep for and
silence) and a stable *code* (``OVTnnn``).  The slugs and their meanings come
from ``shared/catalog.md``; a slug never changes meaning once released.

Code ranges: 1xx gradients and the optimizer step, 2xx train/eval/no_grad
modes, 3xx losses and labels, 4xx modules and tensors, 5xx data pipeline,
6xx saving/loading/scaling, 7xx training dynamics, 8xx evaluation metrics.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


class Severity(str, Enum):
    """How bad a finding is. ``error`` findings stop a guarded run when the
    weights are about to be corrupted; ``--strict`` promotes warnings."""

    INFO = "info"
    WARNING = "warning"
    ERROR = "error"


@dataclass(frozen=True)
class Entry:
    """One catalog entry."""

    slug: str
    code: str
    title: str
    why: str
    severity: Severity
    static: bool
    runtime: bool

    @property
    def doc(self) -> str:
        """Where the entry is documented, relative to the repository root."""
        return f"docs/catalog.md#{self.slug}"


_E = Severity.ERROR
_W = Severity.WARNING
_I = Severity.INFO

ENTRIES: tuple[Entry, ...] = (
    # -- gradients and the optimizer step ------------------------------------
    Entry("stale-gradients", "OVT101", "gradients are never reset between optimizer steps",
          "each step then applies the sum of every earlier gradient, so updates grow and the model is garbage",
          _E, True, True),
    Entry("zero-grad-misplaced", "OVT102", "gradients reset between backward() and step(), or step() before backward()",
          "the optimizer steps on zero or missing gradients, so nothing is learned",
          _E, True, True),
    Entry("accumulation-unscaled", "OVT103", "accumulated loss not divided by the window size",
          "the effective learning rate is multiplied by the number of micro-batches",
          _W, True, False),
    Entry("clip-before-unscale", "OVT104", "gradients clipped while still multiplied by the GradScaler's scale",
          "the clip threshold is compared with scaled gradients, so clipping is a no-op or wipes out the update",
          _E, True, True),
    Entry("params-not-optimized", "OVT105", "trainable parameters that no optimizer holds",
          "those parameters receive gradients but never change",
          _E, False, True),
    Entry("no-gradient", "OVT106", "trainable parameters that never receive a gradient",
          "a detached path, an unused layer or a mistaken freeze means part of the model never learns",
          _W, False, True),
    Entry("params-not-updating", "OVT107", "the optimizer steps but the weights do not move",
          "training burns compute without learning anything",
          _E, False, True),
    Entry("retain-graph-in-loop", "OVT108", "backward(retain_graph=True) inside the training loop",
          "every step keeps its autograd graph alive, so memory grows until the run dies",
          _W, True, True),
    Entry("scheduler-cadence", "OVT109", "learning-rate scheduler stepped at the wrong cadence",
          "the learning rate follows a schedule far faster or slower than configured, or a per-step schedule "
          "(OneCycleLR, CyclicLR) is never stepped and the run keeps the rate its constructor set",
          _W, True, True),
    Entry("schedule-past-horizon", "OVT147",
          "a learning-rate schedule stepped past its horizon: its floor comes before the run ends",
          "a schedule given fewer steps than the run takes (T_max shortened by a warm-up that never runs, "
          "num_training_steps counted in optimizer steps while it steps every micro-batch) reaches its floor "
          "part-way: a cosine then climbs back and the run ends at a high rate instead of annealed, a decay to "
          "zero holds the rate at zero and the rest of the run trains nothing",
          _W, False, True),
    Entry("ema-decay-swapped", "OVT124",
          "a moving average of the model that moves almost all the way to it at each update",
          "an EMA update ema = d * ema + (1 - d) * model written with d and 1 - d swapped (or tau and 1 - tau in a "
          "soft target update) makes the average the trained model of one step ago: no smoothing for evaluation, no "
          "slowly moving target for a mean teacher, a momentum encoder or an RL target network",
          _W, True, True),
    Entry("plateau-mode-mismatch", "OVT114", "ReduceLROnPlateau whose mode contradicts the quantity it is stepped with",
          "mode='min' stepped with an accuracy (or 'max' with a loss) takes every improvement for a plateau: the "
          "learning rate is cut while the model improves and kept while it gets worse",
          _W, True, False),
    Entry("scheduler-optimizer-idle", "OVT120", "a learning-rate scheduler whose optimizer no longer steps",
          "the optimizer was re-created (after unfreezing, a reload, model surgery) and the scheduler still drives "
          "the old one: the optimizer that trains keeps its initial learning rate, warm-up and decay never happen",
          _W, False, True),
    Entry("optimizer-not-on-model", "OVT115",
          "an optimizer that holds none of the parameters of the model being trained",
          "after the model was rebuilt, reloaded or altered the optimizer still steps the old tensors: the model "
          "gets gradients and never changes",
          _E, False, True),
    Entry("step-bypasses-scaler", "OVT116", "optimizer.step() called directly on GradScaler-scaled gradients",
          "the gradients are still multiplied by the loss scale (65536 at first), so the update is thousands of "
          "times too large, inf/NaN steps are not skipped, and a scaler.step() afterwards steps twice",
          _E, False, True),
    Entry("clip-without-gradients", "OVT117", "gradient clipping given nothing to clip",
          "an exhausted generator (model.parameters() already consumed) or parameters without gradients (the "
          "clip placed before backward) make clip_grad_norm_ a silent no-op: the run trains unclipped",
          _W, True, True),
    Entry("autocast-stale-weights", "OVT137",
          "a torch.autocast region left open across optimizer steps: its forwards read cached copies of old weights",
          "autocast casts each weight to low precision once per region and serves the cached copy until the region "
          "exits, so forwards after a step inside the same region compute with the weights from before it: the "
          "parameters change, the outputs do not, and the loss stays flat with no error",
          _E, False, True),
    Entry("fp16-without-scaler", "OVT118", "a backward through float16 autocast without a GradScaler",
          "float16 gradients below about 6e-8 flush to zero (and lose precision below 6e-5): the small gradients "
          "vanish in the backward pass and the weights they should move never move, with no error, no NaN and no "
          "warning; bfloat16 autocast needs no scaler",
          _E, True, True),
    Entry("optimizer-eps-underflow", "OVT119", "an optimizer epsilon that is zero in the parameters' precision",
          "Adam-style updates divide by sqrt(v) + eps computed in the parameters' dtype: eps=1e-8 is 0 in float16 "
          "(whose smallest value is 6e-8), so wherever a gradient is zero or its square underflows the step divides "
          "by 0 and the weights turn NaN or inf at the first step",
          _E, False, True),
    Entry("clip-after-step", "OVT121", "gradients clipped after optimizer.step() instead of before it",
          "the step has already applied the unclipped gradients and the clipping rescales gradients that the next "
          "reset throws away: the run trains as if there were no clipping, outliers and spikes included",
          _W, True, True),
    Entry("lr-lambda-returns-rate", "OVT122", "a LambdaLR function that returns the learning rate instead of a factor",
          "LambdaLR multiplies the optimizer's rate by the function's value, so a function that already includes "
          "the rate applies it twice: training runs at lr x lr (1e-2 becomes 1e-4) and barely moves",
          _W, True, True),
    Entry("frozen-params-moved", "OVT126", "parameters meant to stay frozen that the optimizer step still moves",
          "a zero gradient does not stop weight decay or momentum: rows whose gradient is zeroed after backward, or "
          "parameters set to requires_grad=False that keep a gradient tensor, are still decayed (AdamW) or pushed "
          "by moments of earlier steps, so the 'frozen' weights drift towards zero over training while the run "
          "looks normal",
          _W, True, True),
    Entry("freeze-not-applied", "OVT127", "requires_grad set as an attribute of a module instead of on its parameters",
          "module.requires_grad = False only adds a Python attribute that PyTorch never reads: the module's parameters "
          "keep requires_grad=True, receive gradients and are trained, so the layer meant to stay frozen is "
          "fine-tuned with the rest (and = True meant to unfreeze leaves it frozen)",
          _W, True, True),
    Entry("lr-overwritten-by-scheduler", "OVT128",
          "a learning rate set by hand that the scheduler's next step replaces",
          "LambdaLR (every Hugging Face warm-up schedule), OneCycleLR and CyclicLR compute the rate from their own "
          "base rates: a rate written into param_groups after the scheduler was built (a new rate on resume, a "
          "manual decay) holds for one scheduler step, then the run silently goes back to the old schedule",
          _W, False, True),
    Entry("accumulation-window-broken", "OVT129",
          "gradient accumulation whose optimizer step does not wait for the window",
          "a window test written `if i % k:` is true on every micro-batch but the one that fills the window, and a "
          "loss divided by the accumulation count with a step after every backward accumulates nothing: each update "
          "uses about one micro-batch, with a learning rate k times smaller than configured",
          _W, True, False),
    Entry("grad-sync-window-misaligned", "OVT138",
          "gradient accumulation across ranks that synchronises the gradients on another micro-batch than the "
          "one the optimizer step follows",
          "the all-reduce then sums a partial window (the first micro-batch, say) and the micro-batches after it "
          "stay rank-local: every rank steps on mostly its own gradients and the replicas drift apart, with no "
          "error",
          _W, True, False),
    Entry("custom-backward-not-linear", "OVT139", "a custom autograd.Function whose backward is not linear in the "
          "incoming gradient",
          "every backward is a vector-Jacobian product: a term of a hand-written backward built from the inputs, the "
          "weights or a constant instead of the incoming gradient hands the optimizer a gradient the loss never asked "
          "for, so the parameters behind it drift and the loss stops steering them, with no error",
          _E, False, True),
    Entry("lr-schedule-skips-groups", "OVT130",
          "a learning-rate schedule written by hand that updates only some parameter groups",
          "param_groups[0]['lr'] = lr, or the assignment left after the loop over param_groups, moves one group's "
          "rate while the others (the no-decay group, a second model) keep the constructor's rate: they train "
          "with no warm-up and no decay, while the logged rate looks right",
          _W, False, True),
    Entry("group-lr-not-applied", "OVT135",
          "parameters that train at another learning rate than the one their parameter group was given",
          "a group whose filter matched no parameter (name.startswith('backbone') on names that read "
          "'model.backbone...') leaves the parameters meant for it in another group, and a schedule that writes "
          "one rate into every group (a warm-up peak taken from group 0, g['lr'] = lr by hand, OneCycleLR with one "
          "max_lr) erases the distinct rates the groups were built with: a pretrained backbone is fine-tuned at "
          "the new head's rate and forgets what it knew, or the head crawls at the backbone's, while the loss "
          "falls",
          _W, False, True),
    Entry("optimizer-state-discarded", "OVT136",
          "an optimizer built anew over the same parameters again and again during the run, its state thrown away",
          "an Adam built inside the epoch loop or a train_epoch() helper starts every epoch from empty moments and "
          "step 0: each epoch opens with the bias-corrected first steps (about lr per weight, in the sign of the "
          "gradient), momentum never builds up and training never settles, while the loss still falls a little",
          _W, False, True),
    Entry("steps-counted-from-samples", "OVT133", "a number of optimizer steps counted from the number of samples",
          "an epoch of a DataLoader is len(dataset) / batch_size steps: counted with len(dataset) it is batch_size "
          "times too long, so epochs = max_steps / steps_per_epoch stops the run after a fraction of the steps asked "
          "for, or a warm-up and decay are laid out over far more steps than the run takes, while training looks "
          "normal",
          _W, True, False),
    Entry("optimizer-never-steps", "OVT134", "a run with a training loop whose optimizer never takes a step",
          "a training loader that yields no batch, or a step under a condition that never holds (an accumulation "
          "window longer than the loop), leaves the model at its initial weights: the run ends normally and "
          "everything evaluated or saved is the untrained model",
          _E, False, True),
    Entry("non-finite", "OVT110", "NaN or inf in the loss, the gradients or the inputs",
          "one non-finite value poisons every weight it touches and training continues on garbage",
          _E, False, True),
    Entry("weights-frozen", "OVT111", "every weight matrix is frozen: only biases or normalisation parameters train",
          "the model can barely learn: a freezing loop or filter caught the layers meant to train",
          _W, False, True),
    Entry("training-step-no-loss", "OVT112",
          "a Lightning training_step that returns no loss under automatic optimisation",
          "Lightning then skips backward() and the optimizer step for the batch (it warns once, 'training_step "
          "returned None'), so the model does not train while the run looks normal",
          _E, True, False),
    Entry("backward-bypasses-framework", "OVT113",
          "loss.backward() where the framework's backward is required (manual_backward, accelerator.backward, "
          "fabric.backward)",
          "the framework's loss scaling is skipped: under fp16 mixed precision the optimizer step divides unscaled "
          "gradients by the loss scale (updates thousands of times too small), under Accelerate's gradient "
          "accumulation the loss is not divided by the window, and DeepSpeed/FSDP strategies miss their hooks",
          _E, True, False),
    # -- modes ------------------------------------------------------------------
    Entry("train-mode-in-eval", "OVT201", "evaluation with the model still in training mode",
          "dropout stays active and BatchNorm uses and updates batch statistics, so metrics are noisy and wrong",
          _E, True, True),
    Entry("eval-mode-in-train", "OVT202", "training with the model left in eval mode",
          "dropout is off and BatchNorm statistics are frozen for the whole epoch",
          _E, True, True),
    Entry("graph-in-eval", "OVT203", "evaluation without torch.no_grad()/inference_mode()",
          "autograd graphs are built and kept for nothing: more memory and slower evaluation",
          _W, True, True),
    Entry("dropout-always-on", "OVT205", "functional dropout that ignores model.eval()",
          "F.dropout(x, p) without training=self.training (or with training=True) keeps dropping units "
          "in validation and inference, so every metric and prediction is noisy",
          _E, True, True),
    Entry("batch-dependent-eval", "OVT206", "in eval mode, a sample's output depends on the other samples of its batch",
          "something mixes the batch (softmax or normalisation over dimension 0, a view that folds batch and "
          "time, BatchNorm using the batch's statistics, a packed sequence without its block mask), so predictions "
          "and every evaluation metric change with the batch they are computed in (also probed in no_grad "
          "evaluations without eval() of models whose layers behave the same in both modes)",
          _E, False, True),
    Entry("eval-state-carried", "OVT207",
          "evaluation batches fed the state the previous batch ended with, while training starts each batch fresh",
          "a recurrent state carried from one evaluation batch into the next makes each batch's predictions "
          "depend on the batches before it and on their order: the model is evaluated in a condition it was never "
          "trained in, and every metric moves with the evaluation order and batch size",
          _W, False, True),
    Entry("dropout-drops-most", "OVT208",
          "a dropout that drops most of its inputs in training (p above 0.7, or a keep probability as p)",
          "p is the probability of zeroing a unit, not of keeping it: a keep probability passed as p (0.8, 0.9, 1) "
          "drops most or all activations, so the layers before it barely learn (p=1 zeroes everything and "
          "nothing before it gets a gradient)",
          _W, True, True),
    Entry("eval-model-stale", "OVT209", "an evaluated copy of the model that training never updates",
          "a copy made once (copy.deepcopy before training, an EMA whose update is never called, the wrong "
          "variable, a target network whose sync never runs) keeps the initial weights: every validation metric, "
          "early stopping and model selection, or every target bootstrapped from it while training, measures a "
          "model that never trained while the run looks normal",
          _W, False, True),
    Entry("eval-copy-near-initial", "OVT210", "an evaluated average of the model that is still its initialisation",
          "an EMA, SWA or other average evaluated at the end of the run has moved less than a tenth of the way the "
          "trained model moved (a warm-up term never used, a decay whose horizon is longer than the run): the "
          "reported model is mostly the random initialisation while the trained one is good",
          _W, False, True),
    Entry("average-diverges-from-model", "OVT214", "an average of the model whose weights grow beyond any the model had",
          "an EMA, SWA or soft-updated target is a weighted mean of weights the model had, so its norm never exceeds "
          "theirs; an update that pushes the copy away instead (a sign flipped in s -= (1 - d) * (s - p), a decay "
          "above 1, a missing 1 - d) grows it without bound, and the evaluated, bootstrapped or saved copy is "
          "garbage while training looks normal; the same for a model set to an aggregate of copies trained from it "
          "(federated averaging) whose coefficients sum to more than one",
          _W, False, True),
    Entry("running-mean-weights-newest", "OVT215", "a running mean updated with the count's weight on the newest "
          "value instead of on the mean",
          "an incremental mean folds the next value in as (mean * k + new) / (k + 1): the stored mean stands for "
          "the k values already averaged; written (new * k + mean) / (k + 1), the past keeps a weight 1 / (k + 1) "
          "that falls as the run goes on, and the SWA or Polyak average, running loss or statistic is nearly the "
          "last value while nothing fails",
          _W, True, False),
    Entry("running-stats-never-computed", "OVT211",
          "a trained BatchNorm evaluated with the running statistics it was built with",
          "an averaged or copied model whose parameters alone were averaged or loaded (SWA or an EMA over "
          "parameters(), a checkpoint of the parameters only) keeps BatchNorm's initial mean 0 and variance 1: "
          "evaluation normalises inputs that are far from them, every later layer sees activations unlike any it "
          "was trained on, and the evaluated model is broken while nothing fails",
          _E, False, True),
    Entry("batchnorm-momentum-inverted", "OVT212",
          "a BatchNorm trained with momentum above 0.5 (a Keras/TensorFlow momentum passed to PyTorch)",
          "PyTorch's momentum is the weight of the newest batch, Keras's the weight of the old average: 0.9 or "
          "0.99 makes the running statistics mostly the last training batch's, so evaluation normalises with "
          "one batch's statistics and its metrics move with whichever batch came last",
          _W, True, True),
    Entry("mc-samples-identical", "OVT213",
          "Monte Carlo dropout samples drawn with the model in eval mode and no dropout switched back on",
          "in eval mode every dropout layer is off, so the T stochastic passes are T copies of one deterministic "
          "pass: their variance is zero for every input, the mean is a single prediction, and any uncertainty "
          "built from them (variance, entropy of the mean, mutual information) ranks errors no better than chance",
          _E, True, True),
    Entry("optimizer-off-definition", "OVT227",
          "a hand-written optimizer whose update is not the algorithm its name and hyperparameters define",
          "an optimizer named after Adam, RAdam, SGD or another algorithm that writes a bias correction into its "
          "stored moments or updates them with the wrong coefficient, or whose decoupled weight decay is folded "
          "into the gradient the moments and the sign see, or a LAMB (a trust-ratio optimizer) whose decay is "
          "added to the gradient instead of to the step its trust ratio scales, or whose denominator has a floor "
          "far above its eps "
          "(eps added under the square root and after it): every update of the run follows another rule than the "
          "one the hyperparameters were chosen for, with no error",
          _E, False, True),
    Entry("eval-pass-changes-training", "OVT229",
          "an evaluation forward that changes a setting training reads afterwards",
          "evaluating the model leaves training alone; a forward that assigns a module's own setting in eval mode "
          "(a dropout rate set to 0, a norm's momentum or epsilon, a switch) keeps it after model.train(), and a "
          "running average copied into the model for an evaluation and never put back makes training resume from "
          "the average, so every epoch after the first evaluation trains another model than configured, with no "
          "error",
          _E, False, True),
    Entry("pruning-removes-one-sign", "OVT228",
          "a pruning or quantisation that sets every weight of one sign to zero",
          "pruning criteria (magnitude, movement, saliency, chance) do not depend on a weight's sign; a score taken "
          "on the signed weight (no abs()) or an unsigned quantisation of signed weights removes every large "
          "negative weight and keeps the small positive ones, and the pruned network loses its most important "
          "weights with no error; a fake quantiser whose unsigned grid has its zero point left at 0 does the same "
          "to the weight the forward computes, every step",
          _E, False, True),
    Entry("eval-not-train-expectation", "OVT216",
          "a random regulariser whose eval-mode output is not the expectation of its training-mode output",
          "stochastic depth whose keep probability is never applied in evaluation, a hand-written dropout without "
          "1/(1-p) or with another factor in its place (the drop fraction), a dropout scaled twice: every layer after it sees activations of another scale in evaluation "
          "than it was trained on, on average, so the evaluated network is not the one trained and its metrics "
          "and predictions are off while nothing fails",
          _E, False, True),
    Entry("forward-called-directly", "OVT204", "model.forward(x) called instead of model(x)",
          "forward hooks (guards, profilers, quantisation) are silently skipped",
          _W, True, False),
    # -- losses, labels and outputs ------------------------------------------
    Entry("softmax-before-cross-entropy", "OVT301", "probabilities fed to a loss that expects logits",
          "softmax is applied twice, gradients shrink and convergence is slow or stalls",
          _E, True, True),
    Entry("wrong-loss-for-task", "OVT302", "a loss that does not fit the targets",
          "e.g. MSE on class indices or a broadcasting target shape trains toward the wrong objective",
          _E, True, True),
    Entry("softmax-over-batch", "OVT304", "a softmax layer that normalises over the batch dimension",
          "Softmax(dim=0), right for one unbatched sample, normalises each class over the samples of a batch: "
          "outputs depend on the rest of the batch and are not per-sample probabilities",
          _E, False, True),
    Entry("ignore-index-is-class", "OVT305", "a classification loss whose ignore_index is one of the classes",
          "the samples of that class are left out of the loss: the class is never learned and never predicted, "
          "while training looks normal",
          _W, False, True),
    Entry("decoder-blank-not-loss-blank", "OVT353", "a decoder that removes another class than the CTC loss's blank",
          "the CTC loss teaches the model to put its blank class wherever there is no symbol; a decoder built with "
          "another blank (a default blank_index=0 while the label list puts the blank last) drops a real symbol "
          "everywhere it is predicted and prints the blank between the others, so every transcript and error rate "
          "is wrong while the loss falls",
          _E, False, True),
    Entry("class-weights-inverted", "OVT321", "class weights that favour the frequent classes",
          "re-weighting is meant to make the rare classes count more; weights listed in the wrong order (or "
          "a pos_weight inverted) weigh the common class up, and the model learns to ignore the rare ones while "
          "the loss looks fine",
          _W, False, True),
    Entry("class-weight-zero", "OVT357", "a balancing class weight of zero for a class the training labels hold",
          "a weighting formula that gives the most frequent class a weight of zero (log(max_count / count), "
          "1 - frequency / max_frequency) removes that class from the loss: the model is never taught to predict "
          "it and misclassifies all of its examples while the loss looks fine",
          _W, False, True),
    Entry("sequence-targets-misaligned", "OVT322", "sequence targets that are not the next token of the inputs",
          "labels shifted twice (by the caller and again by the model's loss) train the prediction at position "
          "t on token t+2; targets equal to the inputs let the model see the token it is scored against and copy "
          "it. Either way the model never learns next-token prediction while the loss looks normal",
          _E, False, True),
    Entry("labels-unrelated-to-inputs", "OVT323", "labels that do not follow their inputs",
          "inputs paired with the wrong labels (two file listings in different orders, one array shuffled on its "
          "own) leave the model nothing to learn but the label frequencies: the loss stays at their entropy while "
          "training looks normal",
          _W, True, True),
    Entry("labels-all-ignored", "OVT324", "training examples whose every target is the loss's ignore_index",
          "an example whose labels were all masked (a completion cut off by right truncation, a prompt-only "
          "sample, labels built before the sequence was shortened) adds nothing to the loss: it trains nothing, "
          "while the loss, averaged over the other examples, looks normal",
          _W, False, True),
    Entry("loss-compares-itself", "OVT325", "a loss term whose two arguments are the same quantity",
          "a distillation or consistency loss between a tensor and itself (the teacher's logits on both sides, "
          "log_softmax(t) against softmax(t)) is constant: it gives the model no gradient, so the term trains "
          "nothing while the total loss looks normal",
          _E, True, True),
    Entry("loss-term-constant", "OVT390", "a term of a summed loss that is constant in the parameters it reaches",
          "a term whose value cannot change with the weights (a load-balancing loss whose broadcast product always "
          "sums to the number of experts, a penalty on a quantity normalised before the penalty sees it, a "
          "policy-gradient loss whose advantages are zero on every sample, a loss weight added to the sum where it "
          "should multiply its term) has no gradient: it trains nothing, and what it was added for never happens "
          "while the loss looks normal",
          _W, True, True),
    Entry("returns-from-past-rewards", "OVT326", "discounted returns accumulated forward in time",
          "G = r[t] + gamma * G iterated from the first step to the last gives each step the discounted sum of "
          "the rewards before it, not after it: actions are credited for what already happened, and the policy "
          "learns from the wrong signal while training looks normal",
          _E, True, False),
    Entry("generator-agrees-with-critic", "OVT347", "a generator trained in the critic's direction",
          "the generator's loss pushes the critic's scores of generated samples the way the critic's own loss "
          "does (the critic's sign in backward, the fake label): the generator is trained to look fake, the "
          "players cooperate, and the samples never approach the data while both losses still move",
          _E, False, True),
    Entry("bootstrap-action-wrong-state", "OVT344", "a bootstrap target that scores at the next state an action "
          "chosen at the current one",
          "r + gamma * Q_target(s', a') needs a' chosen at s': an action computed from s asks the critic what doing "
          "at the next state what was right at this one is worth, so wherever the right action changes between "
          "states the target is wrong, and the critic and the policy learn from it while the loss looks normal",
          _E, True, False),
    Entry("probability-target-not-distribution", "OVT361", "a soft cross-entropy or divergence whose "
          "probability target is not a distribution",
          "a target of class probabilities (a teacher's softmax, smoothed or mixed labels, a categorical (C51) "
          "projection of a return distribution) is non-negative and each of its rows sums to one; one whose rows "
          "lose mass or create it (a projection that drops the atoms landing exactly on the support, or moves both "
          "neighbours of one) is fitted as if it were a distribution, so the model learns a distorted target, or "
          "none when no mass is left, while the loss looks like any other",
          _E, False, True),
    Entry("mask-on-reduced-loss", "OVT561", "a per-sample mask or weight multiplied into a loss already reduced "
          "over the samples",
          "a per-sample mask or weight multiplies per-sample values: a sum without dim or a loss left at its "
          "default reduction='mean' is one number for the whole batch, and multiplying it by one entry per sample "
          "gives every sample the batch's total, so the mask keeps the padding and the masked samples, the weights "
          "only rescale the loss, and a summed term grows with the batch against the terms masked per sample, "
          "while the loss falls",
          _E, False, True),
    Entry("bootstrap-ignores-done", "OVT366", "a bootstrapped target that ignores the episode-end flags the "
          "program has",
          "r + gamma * V(s') must not bootstrap past the end of an episode: flags unpacked beside the rewards and "
          "never read leave every terminal step credited with the value of whatever state comes next (the next "
          "episode's start, after an auto-reset), so values and the policy learn returns that do not exist while "
          "the loss looks normal",
          _E, True, False),
    Entry("schedule-clamped-at-once", "OVT367", "a schedule over the step counter pinned to its bound from the "
          "second step",
          "a clamped schedule (max(eps_end, ...), min(1.0, ...)) written over a horizon of many steps that leaves its "
          "bound after one step never schedules anything: an operator-precedence slip (start - step + 1 / horizon) "
          "makes the agent greedy on an untrained network from the start, or ends a warm-up before it began, with no "
          "error",
          _E, True, False),
    Entry("history-holds-one-buffer", "OVT368", "a history that keeps, step after step, the one buffer an object "
          "overwrites in place",
          "a method that returns its own buffer while its class overwrites it in place hands out the same array at "
          "every call: a replay memory or rollout that appends what it returned holds one array many times, every "
          "entry equal to the latest step, and each stored action and reward is paired with another step's "
          "observation, with no error",
          _E, True, False),
    Entry("nstep-bootstrap-single-discount", "OVT369", "an n-step target bootstrapped with a single discount",
          "a target that sums n discounted rewards must discount the value it bootstraps from by gamma ** n: "
          "discounted once, every n steps of the future count as one, distant rewards are overvalued and the "
          "greedy policy prefers detours whose true value is lower, with no error",
          _E, True, False),
    Entry("derivative-without-graph", "OVT345", "a derivative taken without create_graph=True used as a loss term",
          "torch.autograd.grad (and autograd.functional's jacobian, hessian, vjp) returns results with no graph "
          "unless create_graph=True: a loss term built from one (a physics-informed residual, a gradient penalty, "
          "an input-gradient or Jacobian regulariser) is a constant that adds a number to the loss and nothing to "
          "its gradient, so it trains nothing while the loss still falls from its other terms",
          _E, True, False),
    Entry("loss-terms-misscaled", "OVT346", "terms of a summed loss weighted against each other by how they "
          "were reduced, not by the objective",
          "a term averaged over the batch next to one summed over it (a VAE's reconstruction averaged, its KL "
          "summed), or a distillation term at temperature T without its factor T*T: one term's share of the "
          "gradient on the parameters they share is off by the batch size or by T*T (or, a minibatch's likelihood "
          "next to the whole data set's KL unscaled, by N / B), so the other term drives "
          "training while every loss falls",
          _E, True, True),
    Entry("regression-target-is-input", "OVT348", "a regression whose target is the model's own input, learned as "
          "a copy",
          "a model asked to output one of the tensors it is given learns the identity in a few steps: the loss "
          "falls to almost nothing while the model learns none of what it was meant to predict (a noise predictor "
          "regressed on the noisy input instead of the noise, a denoiser on its noisy input instead of the clean "
          "signal)",
          _E, False, True),
    Entry("selection-picks-masked", "OVT349", "a max or min in a loss that selects, in every row, the entries "
          "its mask excluded",
          "a mining step (the hardest negative of a triplet loss, a nearest neighbour) masks each anchor's own pair "
          "with a constant so that the selection skips it; a mask turned around on the way (-inf in similarity "
          "space made +inf by 1 - sim, +inf filled for a min and then a max) is selected for every anchor: the "
          "mined term is a constant with no gradient, so it trains nothing while the run looks normal",
          _E, False, True),
    Entry("prediction-never-read", "OVT350", "a model's prediction computed, kept under a name and never read",
          "a prediction is computed to be used: one that nothing reads means the line that should use it reads "
          "something else (a student distilled on the data's labels while the teacher's labels are left unused, "
          "a loss given the teacher's logits where the student's output was meant, early stopping on the "
          "training loss while the validation loss is dropped), so the model trains or is judged on another "
          "quantity than the code computed for it",
          _W, True, False),
    Entry("loss-over-padding", "OVT327", "a sequence loss that counts the padding as targets",
          "padded positions whose target is the pad id (no ignore_index for it, labels padded with the pad id) "
          "teach the model to predict padding after padding: an easy, meaningless target that dilutes the loss "
          "and the gradient of the real tokens, while the loss looks better than the model is",
          _W, False, True),
    Entry("loss-arguments-swapped", "OVT328", "a cross-entropy (or another loss linear in its target) given the data "
          "as its input and the model's output as its target",
          "cross-entropy is linear in its target: with the arguments swapped the loss falls without bound as the "
          "model's outputs grow to +-inf, the run looks like it trains, and the model learns nothing of the data",
          _E, False, True),
    Entry("loss-rises-toward-target", "OVT370", "a loss of binary labels that falls as predictions move away from "
          "their labels",
          "a correct loss falls as each prediction moves toward its label's side, so its gradient moves the two "
          "labels' outputs apart; a hand-written term that rewards the wrong side (a focal factor inverted, a sign "
          "lost) pushes wrong-side samples further off and both labels the same way: the model learns to score "
          "every sample alike while the loss falls",
          _E, False, True),
    Entry("loss-config-overwritten", "OVT376", "a loss module's per-class configuration overwritten with one "
          "batch's per-sample values",
          "class weights, alpha or margins describe the classes; a forward that assigns a batch's gathered values "
          "back to the attribute makes every later call look its weights up in that batch's values by class "
          "index: the weighting it was configured with is lost, with no error",
          _E, False, True),
    Entry("probability-loss-on-logits", "OVT329", "raw logits given to a loss written for probabilities",
          "a Dice, IoU or Tversky term computes overlaps from scores in [0, 1]: on logits of either sign its sums "
          "cancel or change sign, the term explodes or flips, and its gradient swamps the rest of the loss",
          _E, True, False),
    Entry("entropy-bonus-sign", "OVT330", "an entropy bonus added to a loss that is minimised",
          "a policy-gradient loss rewards exploration by subtracting beta * entropy; added with a plus sign, the "
          "optimizer lowers the policy's entropy, so it turns deterministic on what it preferred early and stops "
          "exploring while the loss still falls",
          _E, True, False),
    Entry("stop-gradient-missing", "OVT331",
          "a loss trained through a target that must carry no gradient: a positive pair without negatives, a "
          "critic's bootstrapped target",
          "SimSiam- and BYOL-style losses pull a prediction towards a target that must carry no gradient (a "
          "stop-gradient, or a momentum network no optimizer holds): trained through both sides, mapping every "
          "input to the same vector minimises the loss, so the representation collapses while the loss falls; a "
          "critic regressed onto r + gamma V(s') or GAE returns differentiated through the later values minimises "
          "the Bellman residual instead and settles on biased values",
          _E, False, True),
    Entry("kl-divergence-maximised", "OVT332", "a KL divergence term that enters a minimised loss with a minus sign",
          "a VAE minimises reconstruction + KL(q(z|x) || p(z)); the KL written out is -0.5 * sum(1 + logvar - mu**2 - "
          "exp(logvar)), and with the sign lost the optimizer raises the divergence instead: the latent variances "
          "blow up or collapse and the means run away while the reconstruction loss alone falls",
          _E, True, False),
    Entry("soft-targets-misaligned", "OVT333",
          "distillation soft targets that belong to other samples than the batch's",
          "teacher outputs computed once and replayed in another order (precomputed over a shuffled loader and "
          "looked up by batch index) pair each sample with another sample's soft targets: they agree with the labels "
          "at chance level and the student is distilled towards noise while the loss looks normal",
          _W, False, True),
    Entry("logits-bounded", "OVT374", "a classification loss on logits bounded by construction",
          "cross-entropy reaches its minimum only as the right logit's lead grows without bound; logits made as "
          "cosine similarities (dot products of normalised vectors, InfoNCE without its temperature, a cosine "
          "classifier without its scale) or by a tanh stay in [-1, 1], so the loss has a floor far above zero, the "
          "soft-max stays nearly flat and the model learns slowly while the loss looks like it trains",
          _W, False, True),
    Entry("squashed-twice", "OVT141", "a tanh or sigmoid applied to the output of the same function",
          "a squashing function maps an unbounded input into its range; applied again to its own output (a "
          "squashed Gaussian policy whose network already returns tanh(mean), a sigmoid of probabilities) its input "
          "is confined to (-1, 1), so the outer output or its mode stays in (-0.762, 0.762) ((0.5, 0.731) for a "
          "sigmoid): the ends of the range are out of reach and the model settles short of them while nothing fails",
          _W, False, True),
    Entry("log-det-sign-flipped", "OVT375", "a flow's log-determinant returned with the wrong sign",
          "a function that returns its output with a log-determinant must return log |det| of its own Jacobian: "
          "its negative makes the change of variables reward the flow for shrinking the volume it should spread "
          "over (a reverse-KL flow collapses onto a point, a maximum-likelihood one expands without bound) while "
          "the loss falls",
          _W, False, True),
    Entry("targets-one-class", "OVT335", "classification targets that are one class for the whole run",
          "the targets lost their values between the data set and the loss (ToTensor or Normalize on a mask of "
          "class ids divides them by 255 and .long() makes them 0; float labels in [0, 1) cast with .long()): the "
          "model is trained to predict that one class everywhere while the loss falls",
          _W, False, True),
    Entry("eos-masked-as-padding", "OVT336", "labels masked by the pad id when the pad id is the EOS id",
          "with pad = EOS (tokenizer.pad_token = tokenizer.eos_token), masking labels equal to the pad id (or "
          "DataCollatorForLanguageModeling, which does) masks every real EOS too: the model is never trained to "
          "emit EOS and does not stop when it generates",
          _W, True, False),
    Entry("variance-as-std", "OVT341", "exp(logvar), the variance, used as a standard deviation",
          "a Gaussian encoder's logvar is the log of the variance: noise multiplied by exp(logvar) instead of "
          "exp(0.5 * logvar) samples with the standard deviation squared, from another distribution than the one "
          "the KL term prices, so the bound trained and every likelihood reported from it are wrong",
          _E, True, False),
    Entry("label-out-of-range", "OVT303", "a class index outside [0, num_classes)",
          "on CUDA this surfaces as a cryptic device-side assert far from the cause",
          _E, False, True),
    # -- modules and tensors ---------------------------------------------------
    Entry("unregistered-submodule", "OVT401", "layers kept in a plain list/dict/tuple attribute",
          "their parameters are invisible to the optimizer, .to(), state_dict() and checkpoints",
          _E, True, True),
    Entry("missing-super-init", "OVT402", "nn.Module subclass without super().__init__() first",
          "PyTorch fails with a message that does not say why",
          _E, True, True),
    Entry("to-without-assign", "OVT403", "tensor.to(device) as a bare statement",
          "tensors are not moved in place (modules are), so the tensor stays where it was",
          _E, True, False),
    Entry("device-mismatch", "OVT404", "model and data on different devices",
          "PyTorch's error names neither the tensor nor the parameter involved",
          _E, True, True),
    Entry("dtype-mismatch", "OVT405", "input dtype does not match the model's parameters",
          "float64 or integer features either crash deep in a layer or silently compute in the wrong precision",
          _E, False, True),
    Entry("inputs-require-grad", "OVT406", "requires_grad=True set on input data",
          "autograd tracks the data too: slower steps and more memory for gradients nobody reads",
          _W, True, False),
    Entry("data-attribute", "OVT407", "tensor.data used to read or write tensors",
          "it bypasses autograd's version checks and can silently corrupt gradients",
          _W, True, False),
    Entry("graph-leak", "OVT408", "a graph-carrying tensor kept across steps",
          "every kept loss keeps its whole autograd graph alive, so memory grows until OOM",
          _E, True, True),
    Entry("unregistered-tensor", "OVT409", "a plain tensor attribute on a module where a buffer belongs",
          "it is not moved by .to(), not saved in state_dict() and not restored from checkpoints",
          _W, True, True),
    Entry("numpy-shared-memory", "OVT410", "a numpy array written in place after torch.from_numpy shared it",
          "the tensor shares the array's memory, so it changes too: data that looks random or corrupted",
          _W, True, False),
    Entry("input-columns-unread", "OVT447", "input columns the model never reads while it reads others more than once",
          "a slice offset that is not advanced (or advanced by the wrong width) makes every part of the input read "
          "the first part's columns: the other features reach no output, whatever the labels owe to them is never "
          "learnt, and training runs normally on what is left",
          _E, False, True),
    Entry("feature-columns-collapsed", "OVT455", "input feature columns that hold one value per row",
          "a reduction taken over every axis, or over the wrong one, and broadcast back to a feature's shape "
          "(np.sum(taps) for np.sum(taps, axis=0)) gives every column of the feature the same number: what told "
          "the coefficients, channels or positions apart is lost before the model sees it, and training runs "
          "normally on what is left",
          _E, False, True),
    Entry("inputs-duplicated", "OVT448", "two inputs of a model that hold the same ids in two argument slots",
          "a collate or unpacking that fills one field with another's values (token types filled with the input "
          "ids, user ids where item ids belong) gives the model one input twice: what the second slot should carry "
          "never reaches it, and the parameters meant for it learn from a copy of the first",
          _E, False, True),
    Entry("normaliser-not-scale-invariant", "OVT449",
          "a normalisation layer written by hand whose output changes with the scale of its input",
          "a layer norm dividing by (variance + eps) ** 2 or by the variance, a square root taken twice, statistics "
          "taken over the batch instead of each sample: the layer does not normalise, small activations are "
          "amplified and large ones crushed, and the layers after it train on activations whose scale follows "
          "the data's while nothing fails",
          _E, False, True),
    # -- data pipeline -----------------------------------------------------------
    Entry("frozen-model-in-train-mode", "OVT413",
          "a model kept fixed (a teacher, a frozen encoder) run in training mode",
          "requires_grad_(False) and no_grad do not switch Dropout and BatchNorm off: a pretrained teacher or frozen "
          "feature extractor left in train() gives random soft targets or features and overwrites its BatchNorm "
          "running statistics with the new data's, so the fixed model changes under the run",
          _W, False, True),
    Entry("causal-mask-missing", "OVT411", "a next-token model (or any model trained to predict later steps of its "
          "input) whose outputs see the steps they are scored against",
          "without a causal mask (or with a bidirectional layer, a convolution padded on both sides, a centred "
          "window) the prediction at position t reads token or value t+1, its own target: the training loss falls "
          "to almost nothing while the model cannot predict a step it has not seen, and generation or forecasting "
          "from a prefix fails",
          _E, False, True),
    Entry("attention-mask-inverted", "OVT412", "an attention mask that attends to the padding and ignores the tokens",
          "mask conventions differ (a boolean attn_mask of scaled_dot_product_attention is True where attention is "
          "allowed, key_padding_mask of nn.MultiheadAttention is True where it is not): a padding mask passed with "
          "the other convention sends all attention to the padding, so the output no longer depends on the input's "
          "words and the model learns little or nothing",
          _E, False, True),
    Entry("padding-idx-real-index", "OVT419", "an embedding whose padding_idx is a real entry that the loss depends on",
          "padding_idx pins its row at zero and drops its gradient: right for a padding token, but when the index "
          "is a real entity, relation, user or item (ids that start at 0), every example about it is scored with "
          "an embedding that never learns, while the rest of the table trains and the loss looks normal",
          _W, False, True),
    Entry("padding-fills-with-token", "OVT362", "sequences padded with a real token's id, not the embedding's "
          "padding_idx",
          "an embedding told that padding is padding_idx p is fed sequences whose padding is another id, one that "
          "also stands for a real token (the padding id looked up as a word and turned into the unknown word's id, "
          "a pad value of 0 that is a word): every padded position reads as that token, so the model cannot tell "
          "padding from it and everything pooled over a sequence carries it, while training runs normally",
          _W, False, True),
    Entry("vocabulary-ids-shared", "OVT363", "a vocabulary that gives two tokens the same id",
          "a token-to-id map must be one-to-one: two special tokens set to one string and each numbered by the "
          "vocabulary's size, or two entries given one constant, put two tokens under one id, so the model is "
          "trained on them merged and decoding turns one into the other, while training runs normally",
          _W, False, True),
    Entry("response-mask-skips-first-token", "OVT365", "a loss mask over next-token predictions that starts one "
          "position after the delimiter, so the first token of every trained span is never predicted in training",
          "the prediction made at the delimiter (the end of the prompt) is the one that produces the span's first "
          "token; a mask sliced from the input's span mask without the one-position shift of the targets drops it, "
          "and the model starts every answer with a token it never learned, while the loss falls",
          _W, False, True),
    Entry("generation-reads-untrained-position", "OVT371", "token-by-token generation that reads predictions at "
          "positions whose prediction the training loss never weighed",
          "a loss mask that marks other tokens than the ones the model is asked to produce (observations instead "
          "of actions, the prompt instead of the answer) or one not shifted like the targets leaves the generated "
          "positions untrained: the loss falls, and what the model generates there was never learned",
          _W, False, True),
    Entry("eval-positions-shifted", "OVT364", "position ids at evaluation that read rows of the position table "
          "training never read",
          "a learned position table means one row per position: an evaluation that numbers positions by another "
          "convention (0-based ids for a table that counts from padding_idx + 1, as RoBERTa's) hands every token a "
          "position vector the model never trained, an initial random row or the zero padding row, so the "
          "evaluated model is not the trained one, while nothing fails",
          _W, False, True),
    Entry("last-token-left-padding", "OVT417", "last-token pooling at mask.sum(1) - 1 on left-padded batches",
          "the sum of the attention mask minus one is the last real token only with right padding: with left "
          "padding it points into the padding or the middle of every sequence shorter than the batch's longest, so "
          "the classifier reads the wrong token and its output depends on the rest of the batch",
          _E, True, False),
    Entry("argument-in-wrong-slot", "OVT420", "an argument passed positionally into another parameter's slot",
          "a value named for one parameter of a known signature (torch.optim.SGD(params, lr, weight_decay), "
          "evaluate(model, criterion, loader), a loss given (labels, outputs)) fills another: Python raises nothing "
          "when the types agree, so weight decay becomes momentum, a kernel size becomes the stride, or the "
          "labels become the prediction, and the run trains on with both parameters wrong",
          _E, True, False),
    Entry("edges-one-direction", "OVT418", "an undirected graph given to message passing with each edge listed once",
          "message passing follows edge_index from source to target: edges of a symmetric relation kept in one "
          "orientation (u < v, the upper triangle) let each node hear only the neighbours on one side of the order, "
          "so half of the graph's messages are never sent and the model learns from half a graph",
          _W, True, False),
    Entry("reshape-moves-axis", "OVT421", "reshape or view used to move an axis (a permutation done with reshape)",
          "reshape and view refill the new shape in the old memory order: they split and merge neighbouring axes "
          "but never move one, so channels-last images reshaped to channels-first or attention heads merged "
          "before the head axis is moved behind the sequence axis get the right shape and scrambled contents: "
          "every channel or token is made of pieces of the others, and the model trains on with no error",
          _E, True, True),
    Entry("integer-mask-index", "OVT422", "a 0/1 integer tensor used as an index where a boolean mask was meant",
          "indexing with an integer tensor picks positions, indexing with a boolean tensor keeps the positions "
          "marked True: a 0/1 event or keep mask stored as int64 selects element 0 or 1 once per entry, so the "
          "loss or the metric sees the first two samples over and over instead of the ones marked, with no error",
          _E, False, True),
    Entry("bidirectional-last-step", "OVT423", "a bidirectional RNN's output read at its last time step",
          "the backward direction of a bidirectional RNN runs from the end of the sequence: at the last time "
          "step its half of the output has seen one token, so a classifier fed out[:, -1] gets the forward "
          "direction's summary and a backward half that carries almost nothing, and learns from one direction",
          _W, True, True),
    Entry("singleton-axis", "OVT424", "a softmax, argmax or normalisation over an axis of size 1",
          "a softmax over one element is always 1 (log_softmax 0), an argmax over one element always 0, a "
          "normalisation over one element keeps only its sign: scores of shape (N, 1) softmaxed over the last "
          "axis make attention a plain sum, and a one-output regression or binary head read by argmax predicts 0 "
          "for every sample, while training and evaluation run without an error",
          _E, True, True),
    Entry("modules-repeated-in-container", "OVT425", "one module object repeated in an nn.ModuleList or "
          "nn.Sequential",
          "a list multiplied by a count ([Block(d)] * n) repeats the reference, not the constructor: every entry is "
          "the same module with the same weights, and the optimizer trains one layer where n were meant",
          _W, True, True),
    Entry("axis-zero-as-none", "OVT426", "an optional axis tested for truth, so axis 0 is taken for None",
          "a parameter that is an axis or None (dim=None) tested with `if dim:`, `not axis` or `dim or -1` treats "
          "0, the first axis, as no axis: a call with axis=0 takes the branch meant for None, so a per-axis "
          "normalisation or reduction becomes a global one, or the one over the first axis is skipped, with no error",
          _W, True, False),
    Entry("transform-over-batch-axis", "OVT427", "a flip, rotation or roll with default axes applied to a batch, "
          "taking in the batch axis",
          "torch.fliplr reverses axis 1, torch.rot90 without dims rotates axes 0 and 1, torch.roll without dims rolls "
          "the flattened tensor: the axes of one image or matrix, so on a batch an augmentation or test-time "
          "augmentation flips rows or channels instead of the width, or mixes samples, and the model sees inputs it "
          "was never meant to see, with no error",
          _E, False, True),
    Entry("grid-coordinates-swapped", "OVT428", "a grid_sample grid whose identity lists its coordinates as (y, x)",
          "grid_sample reads each point's source width first, (x, y): an identity grid stacked in array order "
          "(meshgrid(ys, xs, indexing='ij') as (y, x)) samples every pixel from its transposed position, so with no "
          "displacement the image is already flipped about its diagonal and a spatial transformer or registration "
          "network must undo a reflection no small displacement can, with no error",
          _E, False, True),
    Entry("grid-in-pixel-units", "OVT457", "a grid_sample grid in pixel units instead of [-1, 1]",
          "grid_sample reads coordinates normalised to [-1, 1] (the image's two ends): a grid of pixel indices "
          "puts almost every point past +1, where zero padding is read instead of the image, so the sampled "
          "features are mostly zeros and the model learns from padding, with no error",
          _E, False, True),
    Entry("grid-normalised-by-size", "OVT458", "an align_corners=True grid normalised by the image size instead of "
          "the size minus one",
          "with align_corners=True the first and last pixel centres are -1 and +1, so a pixel index x normalises "
          "to x / (W - 1) * 2 - 1; dividing by W puts every point between pixel centres and short of the last "
          "pixel, so the sampled region shrinks towards the first corner and features are read from the wrong "
          "places, with no error",
          _E, False, True),
    Entry("label-map-interpolated", "OVT475", "a class-index target made by resampling a label map with linear "
          "interpolation and rounding it",
          "a bilinear or bicubic resampling averages class ids as if they were intensities: where class 0 meets "
          "class 2 the averages pass through 1, so after rounding every border carries a ring of a class no source "
          "pixel has there, and the model is trained to predict classes the image does not show; label maps are "
          "resampled with nearest-neighbour sampling",
          _E, False, True),
    Entry("data-mutated-by-reading", "OVT429", "reading a sample writes into the data set's stored data (an "
          "in-place normalisation or augmentation of a view)",
          "a sample taken as a view of the stored tensor or array (self.x[i], a TensorDataset row) and then "
          "normalised or augmented in place (sub_, /=, copy_) edits the data set itself: every epoch normalises or "
          "augments the already edited data again, so training drifts further from what evaluation sees each pass "
          "and the model stops learning, with no error",
          _E, False, True),
    Entry("dataloader-starvation", "OVT501", "the training step waits on the data loader (not counting the time "
          "it waits for a CPU that other processes hold: on a busy machine that is an info line)",
          "the accelerator sits idle while batches are prepared",
          _W, False, True),
    Entry("batchnorm-tiny-batch", "OVT502", "a tiny training batch reaches BatchNorm in train mode",
          "batch statistics from one or a few samples are noise, or raise an error",
          _W, False, True),
    Entry("unshuffled-training", "OVT503", "training DataLoader without shuffle, or a training sampler whose epochs "
          "follow a per-sample quantity",
          "ordered data gives correlated batches and a model biased to the last classes (or lengths, or scores) "
          "seen: every epoch goes from one end of the data to the other",
          _W, True, True),
    Entry("shuffled-evaluation", "OVT504", "evaluation DataLoader with shuffle=True",
          "order-dependent evaluation becomes irreproducible for no benefit",
          _I, True, False),
    Entry("unsharded-sampler", "OVT505", "training DataLoader not split across ranks under DDP",
          "every rank trains on every sample: each epoch repeats the same work world_size times; also ranks' "
          "samplers whose slices of one epoch overlap (each rank shuffling with its own seed): some samples are "
          "drawn twice and others never",
          _W, False, True),
    Entry("unset-epoch", "OVT506", "DistributedSampler whose set_epoch() is never called",
          "every epoch repeats the first epoch's shuffled order (and the same split across ranks)",
          _W, True, True),
    Entry("too-many-workers", "OVT507", "more DataLoader workers than CPUs available to the process",
          "workers compete for the same cores and each holds its own copy of the dataset: slower, more memory",
          _W, False, True),
    Entry("batchnorm-in-accumulation", "OVT508", "BatchNorm trained with gradient accumulation",
          "its statistics come from each micro-batch, not from the window the optimizer steps on",
          _W, False, True),
    Entry("effective-batch-size", "OVT509", "the effective batch size changed while the learning rate did not",
          "a learning rate tuned for one batch size is too small or too large for another",
          _I, False, True),
    Entry("preprocessing-refit-on-eval", "OVT521", "a vocabulary, tokenizer, encoder or scaler fitted again on the "
          "evaluation data",
          "the evaluation inputs are then encoded differently from the training inputs (another index for the same "
          "word or class, another scale), so the model is evaluated on inputs that mean something else and every "
          "metric is wrong",
          _E, True, False),
    Entry("listings-paired-unsorted", "OVT522", "two directory listings paired by position, one of them unsorted",
          "os.listdir, glob and iterdir return files in the file system's order, so inputs paired with labels (or "
          "images with masks) by position get another sample's label: the model trains on shuffled labels and "
          "nothing fails",
          _E, True, False),
    Entry("pairing-order-mismatch", "OVT530",
          "two sequences paired by position that come in different orders",
          "names and values, rows and their partners, a table and a vocabulary paired by position must come from "
          "one ordering: a sorted copy zipped with values computed in creation order, decimal string keys sorted as "
          "text ('0', '1', '10', ..., '2') and read as a per-class tensor, repeat_interleave paired with blocks "
          "concatenated one after the other, a returned tuple unpacked in the other order, a pretrained table "
          "indexed by the new vocabulary's own positions: each value goes to another name, class or pair and "
          "nothing fails",
          _E, True, False),
    Entry("dataset-length-wrong", "OVT523", "a Dataset whose __len__ counts its fields, not its samples",
          "__len__ returns the length of the list that holds the arrays ([images, labels]: 2), so every epoch "
          "of a DataLoader yields the first few samples and the rest of the data set is never seen",
          _E, True, False),
    Entry("sampler-weights-short", "OVT524", "a WeightedRandomSampler with fewer weights than the data set has "
          "samples",
          "it draws only the indices below len(weights) (one weight per class given where one per sample was "
          "meant): the samples past them are never seen and each epoch repeats the first few",
          _E, False, True),
    Entry("shuffle-order-repeats", "OVT540", "a shuffled training loader that draws the same order in two epochs",
          "a seed reset inside the training loop (torch.manual_seed in an evaluation function or a callback, a "
          "generator made again with a constant seed for every epoch) rewinds the shuffle: every epoch feeds the "
          "same sequence of batches and the model fits that one stream",
          _W, False, True),
    Entry("eval-drops-samples", "OVT525", "an evaluation DataLoader with drop_last=True and a partial last batch",
          "the last len(dataset) % batch_size samples are never scored: the metric covers a subset that depends "
          "on the batch size (drop_last copied from the training loader)",
          _W, True, True),
    Entry("loader-pass-empty", "OVT535", "a pass over a DataLoader that yields no batch",
          "drop_last=True with fewer samples than the batch size, an empty file listing, a filter that removed every "
          "sample or a split fraction that rounds to 0 make every epoch a loop that never runs: nothing is trained or "
          "evaluated and no error says so",
          _E, False, True),
    Entry("eval-samples-repeated", "OVT536", "an evaluation pass that scores some samples more than once",
          "a sampler that draws with replacement (a WeightedRandomSampler or RandomSampler(replacement=True) copied "
          "from training) hands some samples out twice and others never, a neighbour-sampled batch is scored on "
          "its sampled neighbours as well as its seed nodes, or every forward of the pass is fed the same batch "
          "drawn afresh (next(iter(loader)) inside the loop, a slice that ignores the loop index): the metric "
          "weighs them unevenly and is not the metric over the evaluation set",
          _W, True, True),
    Entry("eval-samples-missed", "OVT537",
          "an evaluation pass that leaves samples out by the way it batches them or splits them across ranks",
          "a batch sampler that drops remainders, or a DistributedSampler with drop_last over several ranks, keeps "
          "some samples of the evaluation set out of every pass: the metric covers a subset chosen by the batching "
          "or the world size",
          _W, False, True),
    Entry("target-in-inputs", "OVT526", "a target that is one of the model's own input values",
          "a forecasting window that includes the value it forecasts, or a label column left among the features, "
          "hands the model the answer: it learns to copy it and every score measures the copy, not the task",
          _E, False, True),
    Entry("eval-classes-renumbered", "OVT539", "evaluation predictions that match their labels only under another "
          "numbering of the classes",
          "the model predicts the classes it learned under their training indices; labels numbered by another "
          "class-to-index map (a class list built per split, an encoder fitted again, 1-based labels), or inputs "
          "transformed so that one class looks like another (colour channels reversed), score most correct "
          "predictions as wrong while nothing fails",
          _E, False, True),
    Entry("eval-loop-stops-early", "OVT528", "an evaluation loop that breaks after a fixed number of batches",
          "only the first batches are scored (a debugging limit left in): the reported metric covers a subset of the "
          "evaluation data, chosen by its order",
          _W, True, True),
    Entry("window-target-misaligned", "OVT527", "a sliding window whose target is inside it, one step past "
          "its horizon, or whose inputs were derived from the steps after it",
          "a target index at or before the window's last index hands the model the answer; a window that ends one "
          "step early for its horizon leaves out the latest observation and trains a forecaster for another "
          "horizon; a derivative or centred filter taken over the whole series before the cut gives the last "
          "inputs a piece of the future they are to predict",
          _W, True, False),
    Entry("tokenizer-casing-mismatch", "OVT534", "a tokenizer told to case text against its checkpoint's vocabulary",
          "an uncased checkpoint's vocabulary is lower-case: loaded with do_lower_case=False, every capitalised word "
          "becomes [UNK] or unfamiliar pieces and the model reads a fraction of the text (a cased checkpoint told to "
          "lower-case sees its names and sentence starts as other words), while training and evaluation run "
          "normally with worse scores",
          _W, True, False),
    Entry("windows-split-at-random", "OVT533", "overlapping sliding windows of a series split into training and "
          "test sets at random",
          "windows one step apart share all but one value: split at random, each test window has training windows "
          "on both sides and its target among their inputs, so the test error measures interpolation of data the "
          "model has seen, not prediction of a later period, and reads far better than the model forecasts",
          _E, True, False),
    Entry("split-over-copies", "OVT541", "a random split over rows that repeat their units (both directions of an "
          "edge, a sample and its flipped copy, several rows per patient)",
          "most units land on both sides of the split: each test row has its reverse, mirror or sibling among the "
          "training rows, so the test score measures recognition of units the model has seen and reads far better "
          "than the model does on new ones",
          _E, True, False),
    Entry("disjoint-sets-overlap", "OVT542", "a set drawn or ranked without excluding a set it must be disjoint "
          "from (query and support drawn apart from one pool; top-N candidates that include the user's training "
          "items; a train/validation split drawn afresh by each process or resume; ranking candidates that keep "
          "the known validation positives, the query itself or its own-camera re-id matches)",
          "the scored set then holds what the model was given: a query that is also a support example is matched "
          "to itself and inflates few-shot accuracy; items the user trained on fill the top of every "
          "recommendation list and push out the held-out items the metric looks for; a split redrawn by another "
          "rank or a resumed run validates on samples trained on; a known positive left among the corruptions "
          "ranks above the test positive, and a query ranked against itself is its own first match",
          _E, True, False),
    Entry("box-flip-corners-unswapped", "OVT531", "a box flipped without swapping its corners",
          "mirroring reverses the order of the x (or y) coordinates: [W - x1, y1, W - x2, y2] gives every flipped "
          "box x1 > x2, an impossible box of negative width, so the box loss, IoU and anchor matching train on "
          "garbage for half of the augmented samples",
          _E, True, False),
    Entry("subset-positions-as-ids", "OVT545", "positions within a subset read as indices of the whole set",
          "a ranking of scores computed over a subset (the unlabelled pool, the candidates a filter kept) gives "
          "positions in that subset; reading the whole set's arrays (its labels, its documents) at those positions "
          "instead of at the items they stand for returns other items' values: an active-learning oracle labels "
          "the queried samples with other samples' labels, a re-ranker returns other documents, while nothing "
          "fails",
          _E, True, False),
    Entry("coordinates-scaled-by-other-axis", "OVT546", "an x coordinate scaled or bounded by the image's height, "
          "or a y coordinate by its width",
          "points, boxes and flow vectors list x first while an image's shape lists its height first: normalised, "
          "resized or rescaled with the other axis's size (or bounded by it, a shape unpacked as width, height), "
          "every coordinate of a non-square image is stretched by the aspect ratio or clipped, boxes leave the "
          "image and flow vectors point elsewhere, while nothing fails",
          _E, True, False),
    Entry("box-format-mismatch", "OVT544", "boxes in another format given to a function that reads corners",
          "a box IoU, GIoU loss or NMS written for corners (x1, y1, x2, y2) given centre (cx, cy, w, h) or "
          "corner-size (x, y, w, h) boxes reads x2 = w before x1 = cx for most boxes: it compares other rectangles, "
          "so the box loss trains the regressor toward the wrong boxes (or the metric scores them), while nothing "
          "fails",
          _E, False, True),
    Entry("eval-inputs-augmented", "OVT512", "evaluation inputs that change from one pass to the next",
          "a random augmentation reaches the evaluation data (e.g. a transform set on the dataset random_split's "
          "subsets share): validation metrics are noisy and measured on inputs the model is not used on",
          _W, False, True),
    Entry("split-attribute-shared", "OVT140", "an attribute set through one split's .dataset, which every split "
          "of the data set shares",
          "random_split and Subset keep the data set itself, not a copy: `val_set.dataset.transform = None` switches "
          "the training split's augmentation off too, and training runs on other data than the one configured, "
          "with no error",
          _W, True, False),
    Entry("eval-order-mismatch", "OVT519",
          "outputs collected from a shuffled DataLoader compared with the labels in the data set's order",
          "the loader yields the samples in a new random order, so the i-th collected prediction belongs to another "
          "sample than the i-th label: the metric scores predictions against other samples' labels (near chance "
          "for a good model)",
          _W, True, False),
    Entry("eval-edges-in-input-graph", "OVT543", "evaluation pairs that are edges of the graph the model is given",
          "a test (or validation) edge left in the message-passing graph (edge_index, the adjacency matrix) is "
          "aggregated over by the encoder: the link-prediction score measures recognition of edges the model was "
          "shown, not prediction of held-out ones",
          _E, False, True),
    Entry("linear-layers-collapse", "OVT450", "two Linear layers applied one after the other with nothing between "
          "them", "two affine maps composed are one affine map: the middle layer adds parameters and no capacity, "
          "and whatever the network was meant to compute nonlinearly there is out of its reach",
          _W, False, True),
    Entry("result-discarded", "OVT451", "a new value computed from a function's tensor and thrown away",
          "an expression statement such as `x + pe` or `F.relu(x)` changes nothing in place: the function goes on "
          "with the old value, and the step the line was written for never happens",
          _W, True, False),
    Entry("residual-skip-missing", "OVT452", "a block named residual whose output does not carry its input",
          "with its branch's weights off a residual block returns its input; one that returns the branch alone "
          "(or adds the branch to itself) has lost its skip connection, and one whose branch overwrites the input "
          "in place (an in-place ReLU opening it) adds the overwritten input: a stack of such blocks trains like a "
          "plain deep network, or loses what the layer before it computed",
          _W, False, True),
    Entry("sample-not-reparameterised", "OVT454", "a draw by sample() fed to a trained layer, from a distribution "
          "whose parameters are trained", "sample() draws under no_grad: the loss's gradient stops at the draw and "
          "never reaches the layers that computed the distribution (a VAE's encoder learns only from the KL term "
          "and the posterior collapses); rsample() carries it",
          _E, False, True),
    Entry("log-scale-non-negative", "OVT549", "a Gaussian sample's log-variance passed through a non-negative "
          "function, so its standard deviation never falls below 1",
          "a log-variance (or log standard deviation) through softplus, relu, exp, sigmoid or abs before exp() can "
          "only be non-negative: every reparameterised draw is at least as wide as a unit prior, the latent code is "
          "drowned in that noise and the KL term cannot reach its optimum, while training runs normally",
          _W, False, True),
    Entry("sample-spread-unpriced", "OVT550", "a reparameterised Gaussian sample whose learned spread no term of the "
          "loss prices (a VAE without its KL term)",
          "without a KL divergence to the prior, a log-density or an entropy reading the sample's scale, its only "
          "gradient is the harm the noise does to the other terms: the spread is driven toward zero, the sample "
          "becomes deterministic and the codes drift from the prior (a VAE becomes an autoencoder whose prior "
          "samples decode to nothing), with no error",
          _W, False, True),
    Entry("loss-saturates-when-wrong", "OVT556", "a pairwise loss linear in a sigmoid of the margin between two "
          "scores (the log of a log-sigmoid loss left out)",
          "-sigmoid(chosen - rejected) in place of -logsigmoid(chosen - rejected) has the same optimum but a gradient "
          "sigmoid'(margin) that vanishes on the pairs the model ranks confidently wrong: a reward model's or a "
          "recommender's worst-ranked pairs are never corrected, while the loss falls normally",
          _W, False, True),
    Entry("adapter-not-identity-at-init", "OVT438", "an adapter whose added branch is not zero before training",
          "a LoRA or adapter branch added to a frozen pretrained module must start at zero (one factor, LoRA's B "
          "or the up-projection, initialised to zero): drawn at random it perturbs every adapted layer at step 0, "
          "so the adapted model does not start as the pretrained one and fine-tuning spends itself undoing the "
          "perturbation; a wrapper that scales the frozen output along with its branch (multiplier * scale on "
          "the sum) does not start as the pretrained model either, and switching it off removes the base model",
          _W, False, True),
    Entry("backward-discarded", "OVT460", "gradients a backward wrote, reset before any optimizer step used "
          "them",
          "every backward's gradients on an optimizer's parameters must reach a step: a zero_grad() that erases "
          "gradients the program's own training backward accumulated since the last step, with no step in between, "
          "throws those batches' training signal away (gradient accumulation that steps only when its window "
          "fills leaves the last micro-batches of every epoch to the next epoch's zero_grad), with no error",
          _W, False, True),
    Entry("warmup-outlasts-run", "OVT461", "a learning-rate warm-up that lasts the whole run",
          "a schedule's warm-up is a part of the run: a LambdaLR whose rate rises at every step the run uses it "
          "(warm-up and total step counts swapped, a warm-up counted in samples or steps while the scheduler steps "
          "per batch or per epoch) never holds or decays from its peak, and training ends at the largest rate it "
          "ever had instead of annealed, with no error",
          _W, False, True),
    Entry("merged-model-differs", "OVT453", "a merged or folded model that does not compute what the trained "
          "model computed",
          "merging what was trained into the weights (a LoRA or adapter merge, merge_and_unload, a scale folded "
          "into the layer before it) must leave the function unchanged: a merge applied twice, or without the "
          "alpha / r scale the forward applied, evaluates and exports another model than the one that was "
          "trained, and its metrics say nothing about the training",
          _E, False, True),
    Entry("transform-statistics-shared", "OVT476", "fitted transforms that hold one statistics object through a "
          "default argument",
          "a default argument is evaluated once, so every scaler or normaliser built without it shares one statistics "
          "object: fitting the second overwrites the first's statistics, and the first then transforms and inverts "
          "its data with another data set's mean, range or scale, so its inputs and forecasts are in the wrong units "
          "with no error",
          _E, False, True),
    Entry("inverse-transform-not-inverse", "OVT439", "a transform whose named inverse does not undo it",
          "normalize/denormalize, transform/inverse_transform, encode_x/decode_x and the like must compose to the "
          "identity on the data fed to them: an inverse that multiplies by a scale the forward never divided by "
          "(or adds a mean it never subtracted, or a target encoding floor-divided where its decoder multiplies) "
          "puts every output back into other units than the data's, so forecasts and predictions are off by the "
          "statistics while training runs normally",
          _E, False, True),
    Entry("checkpoint-recompute-differs", "OVT445", "an activation checkpoint whose recomputation differs from "
          "its forward",
          "checkpointing rebuilds a block's activations in the backward pass by running it again: when that second "
          "run draws fresh randomness (dropout under preserve_rng_state=False, Python or numpy randomness checkpoint "
          "never saves), the gradients are taken for another network sample than the one that produced the loss, "
          "and training degrades with no error",
          _E, False, True),
    Entry("lengths-do-not-fit-output", "OVT446", "a module's returned lengths that fit no axis of its output",
          "a module that shrinks a padded batch and returns new lengths must give the items that fill its input the "
          "output's full length: lengths subsampled twice, by another stride or off by one make the CTC loss, the "
          "masks or the pooling read only part of every item (or past it), with no error",
          _E, False, True),
    Entry("divided-by-reciprocal", "OVT835", "a tensor divided by a factor defined as a reciprocal",
          "a scale written as a reciprocal (head_dim ** -0.5, 1 / tau, var.rsqrt()) is a factor to multiply by: "
          "dividing by it multiplies by the quantity it inverts, so attention logits come out head_dim times too "
          "large (the softmax saturates) or a normalised value is multiplied by the deviation, with no error",
          _E, True, False),
    Entry("trig-of-degrees", "OVT856", "a sine or cosine taken of a grid laid out in degrees",
          "sin/cos/tan take radians: a grid of latitudes, longitudes or rotation angles that reaches 90, 180 or "
          "360 handed to them unconverted is read as that many radians, so the features wrap around every 6.28 "
          "degrees and neighbouring points get unrelated values; a model fed them cannot tell positions apart, "
          "with no error",
          _E, True, False),
    Entry("graph-edges-cross-batch", "OVT548", "edges of a batched graph that join nodes of two different graphs",
          "graphs batched as one disconnected graph must keep every edge inside its own graph (batch[src] == "
          "batch[dst]): an edge_index shifted by anything but the cumulative node count of the graphs before it "
          "makes message passing mix the graphs of a batch, so each prediction depends on its batch mates in "
          "training and evaluation while every index stays in range",
          _E, False, True),
    Entry("val-overlaps-train", "OVT510", "validation samples that are also training samples",
          "validation then measures memorisation: its metrics, early stopping and model selection are meaningless",
          _E, False, True),
    Entry("worker-rng-copied", "OVT511", "a data set's own random generator copied into DataLoader workers",
          "every worker (and, without persistent workers, every epoch) replays the same random augmentations",
          _W, False, True),
    # -- saving, loading, scaling ------------------------------------------------
    Entry("unsafe-load", "OVT601", "torch.load without weights_only=True",
          "loading a checkpoint can run arbitrary code hidden in the pickle",
          _E, True, True),
    Entry("whole-model-save", "OVT602", "torch.save(model) instead of its state_dict()",
          "the pickle stores the class path and breaks on refactor or rename",
          _W, True, False),
    Entry("dataparallel", "OVT603", "nn.DataParallel instead of DistributedDataParallel",
          "single-process DataParallel is slower and unbalanced; PyTorch recommends DDP",
          _W, True, False),
    Entry("ddp-out-of-sync", "OVT604", "replicas' weights diverge across ranks",
          "each rank trains its own model and the saved one is arbitrary",
          _E, False, True),
    Entry("load-state-dict-no-effect", "OVT606", "load_state_dict(strict=False) that loads little or nothing",
          "keys that do not fit the model (a 'module.' prefix, another architecture) are skipped in silence, so "
          "the model keeps its random or stale weights and is trained or evaluated as if it were restored; with "
          "assign=True a tied weight that the state dict names once is replaced under that name only, and the "
          "other attribute that shared it keeps its random values",
          _E, False, True),
    Entry("snapshot-aliases-weights", "OVT607", "a state_dict() kept as a snapshot that is still the live weights",
          "state_dict() returns the model's own tensors, so a 'best' snapshot follows every later step: the "
          "weights restored or saved as the best are the last ones",
          _E, False, True),
    Entry("every-rank-saves", "OVT605", "checkpoint written by every rank, not only rank 0",
          "all processes write the same file at once: wasted I/O and a file torn by concurrent writers",
          _W, True, False),
    Entry("init-loop-misses-nested-layers", "OVT456", "an initialisation loop over children() that tests for layers "
          "nested deeper",
          "children() yields a module's immediate submodules only: an init loop that picks layers by type over it "
          "never reaches the layers built inside a ModuleList, a Sequential or a block, which keep PyTorch's default "
          "initialisation while the code reads as if every one were initialised",
          _E, True, False),
    Entry("init-after-load", "OVT609", "weights initialised again after load_state_dict, before training",
          "an init call (reset_parameters(), apply(init_fn), nn.init.*) run after the checkpoint was loaded "
          "overwrites the loaded weights with fresh random ones: the resumed or fine-tuned run starts from scratch "
          "while it looks like it resumed",
          _E, True, True),
    Entry("partial-resume", "OVT608", "a resume that restores the weights and the epoch but not the optimizer",
          "the optimizer restarts without its momentum and the schedule from its start, so the resumed run silently "
          "computes something other than an uninterrupted one",
          _W, True, False),
    Entry("train-serve-skew", "OVT610", "inputs at prediction time unlike the inputs the model was trained on",
          "the model answers confidently on inputs prepared differently (another scale, column order, blank rows), "
          "so the answers are wrong and nothing says so",
          _W, True, True),
    Entry("model-carried-across-folds", "OVT612",
          "a model trained in every fold of a cross-validation (or every repetition of an experiment) without "
          "being built again",
          "each fold starts from the weights fitted on the earlier folds, whose training data held its validation "
          "samples, so the later folds score data the model already learned and the cross-validated score is "
          "optimistic; repetitions that continue one model are one longer run, not independent runs",
          _E, True, False),
    # -- training dynamics ---------------------------------------------------------
    Entry("exploding-gradients", "OVT701", "gradient norm far above its running range",
          "updates blow up and training diverges a few steps later",
          _W, False, True),
    Entry("vanishing-gradients", "OVT702", "gradient norm collapsing to ~0 in early layers",
          "early layers stop learning while the loss still moves a little",
          _W, False, True),
    Entry("dead-activations", "OVT703", "most ReLU units output zero for every sample",
          "dead units never recover and the network's capacity silently shrinks",
          _W, False, True),
    Entry("loss-not-decreasing", "OVT704", "loss flat or rising over a window where it should fall",
          "the run is spending compute without making progress",
          _W, False, True),
    Entry("val-loss-diverging", "OVT705", "validation loss rising for several epochs while training loss falls",
          "the model is overfitting: every further epoch makes the model worse on unseen data",
          _W, False, True),
    Entry("val-metric-collapse", "OVT706", "a validation metric collapsed far below its best",
          "training destabilised (learning rate, bad batch, numerical trouble) and the current weights are worse",
          _W, False, True),
    Entry("patience-never-reset", "OVT707", "an early-stopping patience counter that an improvement never resets",
          "the counter adds up every evaluation without improvement since the start instead of the consecutive "
          "ones, so a run that is still improving is stopped early, after a few noisy evaluations in all",
          _W, True, False),
    Entry("selection-on-train-data", "OVT708", "the best model, the early stop or the plateau schedule decided on "
          "the training data while held-out data is at hand",
          "the training loss keeps falling while the model over-fits, so the 'best' checkpoint is the most "
          "over-fitted one, early stopping comes late or never, and a plateau scheduler cuts the learning rate when "
          "training stalls rather than when the model stops generalising",
          _W, True, False),
    Entry("selection-on-test-data", "OVT709", "the best model or the early stop chosen on the test set while a "
          "validation set exists",
          "the test set takes part in choosing the model, so the test score reported for it is optimistic: it is "
          "the best of many tries on the very data that should judge the choice",
          _W, True, False),
    Entry("best-value-not-tracked", "OVT710", "a running best that the improvement test cannot track: started "
          "on the wrong side, never updated, updated before the test, or read by no test at all",
          "started at +inf for a score (or -inf/0 for a loss) no evaluation ever beats it, and updated before the "
          "test it is never strictly beaten: no best model is kept and early stopping fires after patience "
          "evaluations; never updated, every evaluation beats it, and set at every evaluation with no comparison "
          "reading it, every checkpoint is saved as the best: the model kept is the last one, not the best",
          _W, True, False),
    Entry("stop-on-window-worst", "OVT828", "an early stop that compares the latest evaluation with the worst "
          "of the evaluations before it",
          "patience means stopping only when the last evaluations hold no new best; a rule that stops when the "
          "latest loss is above the highest of the window (below the lowest score) fires on one noisy evaluation "
          "however much the window improved on the best before it, so a run that is still improving ends early "
          "and the model kept is from an early epoch",
          _W, True, False),
    # -- evaluation metrics ---------------------------------------------------------
    Entry("prediction-shape-mismatch", "OVT801", "predictions compared with labels of another shape",
          "argmax() without dim over a batch is one flat index into the whole batch, and a (N, 1) prediction "
          "compared with (N,) labels broadcasts to an N x N table: the comparison scores every sample against "
          "something other than its own prediction, and the metric is wrong while nothing fails",
          _E, True, True),
    Entry("best-model-not-restored", "OVT815", "a copy of the best model kept during training and never used",
          "the best weights are copied whenever the validation improves, but the model evaluated, saved or "
          "returned afterwards is the last one: the selection is done and thrown away, and the reported score is "
          "the over-trained model's",
          _W, True, False),
    Entry("diverged-fit-kept", "OVT827", "a parameter fitted by LBFGS read where its last step left it after "
          "the fit's loss ended far above where it started",
          "a value a program fits and goes on with (a calibration temperature, a scale) must be no worse on its "
          "objective than the value the fit started from; LBFGS without a line search can overshoot, and reading "
          "the parameters of its last step instead of the best loss it saw uses a fit worse than none (a "
          "temperature turned negative reverses every ranking)",
          _W, False, True),
    Entry("choice-over-flat-curve", "OVT826", "a value chosen by argmax or argmin over a curve of scores that "
          "are all equal",
          "a threshold, temperature, hyperparameter or epoch chosen by the best score on a grid relies on the scores "
          "telling the points apart; over a flat curve (an F1 of zero everywhere on a validation set without "
          "positives) argmax returns the first point whatever the grid is, and the program goes on with an end of "
          "its grid as if it were the best value",
          _W, False, True),
    Entry("kept-view-overwritten", "OVT825", "a tensor's element kept under a name as a view (an integer or "
          "slice index), then written in place before the name is read",
          "indexing a tensor with integers or slices returns a view of its storage, not a copy: a value kept as "
          "`kept = t[i]` and read after `t[i]` is written holds the new value, so a finished hypothesis' score "
          "recorded before its beam is retired, the old value of a swap or a previous estimate is silently the "
          "overwritten one",
          _W, True, False),
    Entry("state-snapshot-not-restored", "OVT817",
          "a copy of the model's or the optimizer's state taken before training steps and never read",
          "a state is copied to be put back: a learning-rate range test or a trial run whose copy is never loaded "
          "leaves its changes in the weights and the optimizer's moments, and the real training starts from where "
          "the trial left them (a diverged model, in a range test)",
          _W, True, False),
    Entry("best-kept-in-wrong-direction", "OVT816", "a best model kept when its metric gets worse: a loss "
          "kept when it rises, an accuracy when it falls, a checkpoint callback's mode against its monitor",
          "the model kept as the best is the worst one seen and early stopping runs out of patience while the "
          "model improves: the run delivers its worst checkpoint",
          _W, True, False),
    Entry("metric-wrong-denominator", "OVT802", "a metric divided by the wrong count: samples by batches, or "
          "per-batch means by samples",
          "correct predictions summed over the samples and divided by len(loader) give hits per batch (up to the "
          "batch size, 'accuracy 13.8'), and per-batch means divided by len(dataset) are the batch size too small: "
          "the number reported is not the metric and moves with the batch size",
          _W, True, False),
    Entry("metric-wrong-class-score", "OVT803", "a binary ranking metric given the negative class's score",
          "roc_auc_score, average precision and ROC/PR curves take label 1 as the positive class; fed column 0 of "
          "a two-class probability matrix (or a score negated once too often) they rank the samples backwards and "
          "report one minus the model's score",
          _E, True, True),
    Entry("predictions-not-denormalised", "OVT804", "predictions in normalised units scored against raw targets",
          "a model trained on standardised targets predicts in standard deviations around zero: scored against "
          "the targets in their own units without the inverse transform (or put back in raw units and scored "
          "against targets still normalised, or transformed back twice), every error metric measures the "
          "normalisation, not the model",
          _E, True, True),
    Entry("metric-not-reset", "OVT805", "a torchmetrics metric computed once per pass and never reset",
          "a metric object keeps the state of every update until reset(): computed each epoch without a reset, it "
          "reports the metric over all epochs so far, not the last one's, so curves lag and early stopping or model "
          "selection read stale numbers",
          _W, True, False),
    Entry("metric-imperfect-on-truth", "OVT818", "a metric function that does not give a perfect prediction its "
          "best score",
          "a metric that scores the ground truth itself below its best value (a class absent from both sides scored "
          "as a miss, a wrong denominator, a decoding step that leaves a token, an answer span that turns a "
          "prediction of exactly a word's tokens into other text, an answer extractor that cannot read a minus "
          "sign) misjudges every model it scores, "
          "and the reported number is not the metric while nothing fails",
          _E, False, True),
    Entry("metric-rewards-disjoint-prediction", "OVT823", "a metric function that scores a prediction sharing "
          "nothing with its target well",
          "an overlap metric (accuracy, IoU, Dice, F1, precision, recall, BLEU) of a prediction with no element in "
          "common with its target is 0: one that scores it well (items matched by a similarity every pair passes, "
          "a smoothing term that dominates) counts hits that are not there, cannot tell models apart, and the "
          "reported number reads better than the model while nothing fails",
          _E, False, True),
    Entry("targets-off-recursion", "OVT836", "returns, advantages or value targets that do not follow their "
          "recursion on the rewards, values and flags they were computed from",
          "a function named after returns, advantages or value targets (GAE, discounted returns, TD targets) must "
          "give, on its own call's rewards, values and episode-end flags, what the recursion A_t = r_t + gamma c_t "
          "V_t+1 - V_t + gamma lambda c_t A_t+1 gives under some accepted convention; one that gives something else "
          "(a carry seeded with the bootstrap, a terminating state's value zeroed, flags ignored), or a TD target "
          "written inline that adds the next value undiscounted instead of moving with it by gamma (1 - done), "
          "trains the critic towards other values and weights the policy by another signal while the losses fall "
          "as usual",
          _E, False, True),
    Entry("recurrent-state-not-carried", "OVT837", "a recurrent module stepped through a sequence that is given the "
          "same state at every step and whose returned state is dropped",
          "a loop that calls an RNN, GRU or LSTM (or its cell) one time step at a time must start each step from the "
          "state the previous step returned; given the very same state tensor at every step while the returned "
          "state is dropped, the loop has no memory: each step sees only its own input and the initial state, and "
          "the model trains and predicts as a worse one-step model with no error",
          _E, False, True),
    Entry("metric-off-definition", "OVT824", "a metric (or decoding) function, or a metric written inline, named "
          "after a well-known definition that computes something else",
          "a function named IoU (of boxes or masks), GIoU, Dice, NMS, WER, CER, NDCG, CTC decoding, recall@k, "
          "precision@k, hit@k, MRR, PSNR, Spearman's rho, Kendall's tau, BLEU, "
          "MAE, MSE or RMSE whose value on its own call's inputs matches none of the definition's accepted "
          "conventions (a pixel + 1 on normalised boxes, edits counted in characters for a word error rate, a "
          "position discount off by one, a final frame decoded unchecked, recall divided by k, a PSNR peak below "
          "the images' range, an error computed in uint8 that wraps, a BLEU brevity penalty on the shortest "
          "reference instead of the closest), a top-k or nucleus filter that keeps "
          "another set than the largest scores its cut-off asks for, a mask IoU or Dice whose value on the call's "
          "binary masks is no convention of it (the Dice coefficient reported as IoU), an NMS that keeps another set "
          "than greedy suppression of the same boxes, scores and threshold, a k-NN classifier that scores test items of "
          "a class no training label carries, a quantile loss that is not max(q e, (q - 1) e) of the signed error "
          "(the absolute error taken first), a C-index that is Harrell's C under no tie convention (an event tied "
          "with a censored time credited half whatever the predictions), an expected calibration error that is no count-weighted "
          "bin average of its call's predictions (the bins' gaps averaged unweighted), a Spearman or Kendall "
          "correlation that is no tie convention of its call's series (Pearson's correlation of the raw values, "
          "ties ranked in listing order), a metric whose value moves with the predictions where the target is the "
          "label the training loss ignored (the ignored class's pixels kept in the other classes' unions), "
          "a ranking metric whose value moves when each row's candidates are "
          "renamed (a top-k taken as a set and scored in index order), confusion counts that give a false positive "
          "to a prediction of the label they themselves count as negative (false positives counted over every "
          "mismatch), a batched decoding whose rows go on past the end token they end at when decoded alone, or a value written inline under such a name "
          "whose formula the code shows is another (a precision divided by tp + fn, an F1 without its parentheses, "
          "an NDCG whose ideal is the retrieved list re-sorted, a top-k list of ids padded with item 0 and scored "
          "whole, a recall computed by the precision's function, an MRR taken as the reciprocal of the mean rank, "
          "an error rate, accuracy or ECE taken as the unweighted mean of per-utterance, per-batch or per-bin values, "
          "a precision@k whose relevant set holds the rows the code itself reads as negative, true positives or "
          "negatives read from the wrong cell of scikit-learn's binary confusion matrix [[TN, FP], [FN, TP]]) "
          "reports another quantity under the metric's name, usually one that reads better, while nothing fails",
          _E, True, True),
    Entry("metric-arguments-swapped", "OVT806", "a scikit-learn metric given (predictions, labels)",
          "precision, recall, F-scores, balanced accuracy, the confusion matrix and the classification report take "
          "(y_true, y_pred): swapped, precision is reported as recall and recall as precision, supports count "
          "predictions and the confusion matrix is transposed, while the symmetric F1 hides it",
          _E, True, False),
    Entry("metric-shared-across-stages", "OVT808", "one metric object updated by both training and evaluation",
          "a metric keeps one running state: updated in training_step and in validation_step, the validation "
          "value also counts the training batches not yet reset (and the reverse), so both curves are wrong",
          _W, True, False),
    Entry("metric-reduced-twice", "OVT809", "a value summed over the ranks twice",
          "an all-reduce with SUM applied to a value that already holds the sum over the ranks (a metric that "
          "syncs itself, reduced again at epoch end): every rank holds world_size times the sum, and the metric "
          "reported is world_size times too large",
          _E, True, False),
    Entry("accumulator-not-reset", "OVT807", "a per-pass sum or count set to zero once, before the loop over passes",
          "running_loss += ..., correct += ... or losses.append(...) never set back inside the epoch loop (or "
          "between the training and the validation loop): each pass's reported number also counts every earlier "
          "pass, so the curve lags the model and early stopping and model selection read stale values",
          _W, True, False),
    Entry("scores-squashed-in-low-precision", "OVT814", "a sigmoid or softmax computed in bfloat16/float16 and then "
          "ranked or cast back up",
          "just below 1 half precision keeps only a few values (bfloat16: 0.004 apart), so distinct confident "
          "scores round to the same number: rankings, top-k, AUC and thresholds fall back on arbitrary "
          "tie-breaking, and casting the result up afterwards recovers nothing",
          _W, True, False),
    Entry("ranking-metric-on-labels", "OVT811", "a ranking metric (ROC AUC, average precision) given hard labels, "
          "or ranking its items by a field on which they tie",
          "roc_auc_score and average precision measure how the scores order the samples over every threshold: "
          "given thresholded predictions (0 or 1, argmax) only one threshold is left, so the 'AUC' is a balanced "
          "accuracy at 0.5 and no longer measures the ranking it is reported as; a hand-written one that ranks "
          "its items by a label field or another key on which they tie scores the order they are listed in, "
          "which moves when they are listed in another order; torchmetrics' binary AUROC squashes scores outside "
          "[0, 1] with a sigmoid, and large scores saturate into one tie",
          _E, True, True),
    Entry("logits-thresholded-as-probabilities", "OVT819", "outputs trained as logits compared with 0.5 without "
          "a sigmoid",
          "BCEWithLogitsLoss and cross_entropy train the model's outputs as logits; 0.5 (a comparison, or "
          "round()) is the threshold of a probability: a sigmoid's logit of 0.5 is a probability of 0.62, and one "
          "class's logit means nothing without the others', so the decisions are wrong and recall, F1 and accuracy "
          "with them while nothing fails",
          _E, True, True),
    Entry("scores-activation-mismatch", "OVT820", "evaluation scores made with another activation than the "
          "training loss's, then thresholded",
          "a multi-label model trained with independent sigmoids (BCEWithLogitsLoss) scored through a softmax over "
          "its labels makes the labels compete (a sample with k true labels scores at most about 1/k on each); a "
          "model trained with cross_entropy scored through a sigmoid per class reads each logit alone, though only "
          "differences between logits mean anything: thresholded, either gives wrong decisions while nothing fails",
          _E, False, True),
    Entry("eval-loss-scores-ignored", "OVT821", "an evaluation loss that scores the positions the training loss "
          "ignored",
          "the training loss ignored an index (padding, unlabelled positions); an evaluation loss of the same kind "
          "without that ignore_index also scores those positions, so the validation loss or perplexity reported "
          "is not the model's on the real tokens and moves with the amount of padding",
          _E, False, True),
    Entry("metric-summed-in-low-precision", "OVT822", "an evaluation sum or count kept in bfloat16/float16",
          "half precision keeps 8 (bfloat16) or 11 (float16) significant bits: past 256 (bfloat16) or 2048 "
          "(float16) a sum can no longer grow by 1 and small terms round away, so a count of correct predictions "
          "stops counting while its denominator grows, and the accuracy or mean loss reported is wrong",
          _E, True, True),
)

BY_SLUG: dict[str, Entry] = {e.slug: e for e in ENTRIES}
BY_CODE: dict[str, Entry] = {e.code: e for e in ENTRIES}


def lookup(key: str) -> Entry:
    """Return the entry for a slug or a code; raise ``KeyError`` naming the valid choices."""
    entry = BY_SLUG.get(key) or BY_CODE.get(key.upper())
    if entry is None:
        import difflib

        close = difflib.get_close_matches(key, list(BY_SLUG), n=3)
        hint = f" Did you mean {', '.join(close)}?" if close else ""
        raise KeyError(f"unknown catalog slug or code {key!r}.{hint} See docs/catalog.md for the list.")
    return entry


def markdown() -> str:
    """The catalog as the Markdown page ``docs/catalog.md`` (kept in sync by a test)."""
    lines = [
        "# The catalog of silent failures",
        "",
        "Every finding overt reports carries a code and a slug from this table.",
        "Slugs never change meaning. Silence one per line (`# overt: ignore[slug]`),",
        "per run (`ignore=[slug]` / `--ignore slug`) or per project (`[tool.overt] ignore`).",
        "Static entries are found by `overt lint` ([rules](lint.md)); runtime entries by the",
        "guards ([guards](guards.md)). This page is generated from `overt/catalog.py`",
        "(`python -c \"import overt.catalog as c; print(c.markdown(), end='')\" > docs/catalog.md`).",
        "",
        "| code | slug | severity | what goes wrong | why it matters | lint | guard |",
        "|---|---|---|---|---|---|---|",
    ]
    for e in ENTRIES:
        lint = f"[rule](lint.md#{e.slug})" if e.static else "—"
        guard = f"[guard](guards.md#{e.slug})" if e.runtime else "—"
        lines.append(f'| {e.code} | <a id="{e.slug}"></a>`{e.slug}` | {e.severity.value} | {e.title} | {e.why} '
                     f"| {lint} | {guard} |")
    return "\n".join(lines) + "\n"
