"""The wild corpus in the default suite: each case's buggy script is caught by the face named
in ``EXPECTED`` and its correct twin gives no finding (timing findings aside, see
``harness.TIMING``).  ``python -m tests.wild.runner`` runs every face on every case.

The cases added for issue 33 are split into development and test halves (``tests/wild/split.json``):
round one (w27-w54: ``dev``/``test``), round two (w55-w78: ``dev2``/``test2``, drawn after the
round-one measurement) and round three (w79-w102: ``dev3``/``test3``, drawn after round two's test
half was measured).  Only development-half twins are checked here for silence (lint in the
default suite, ``overt run`` marked slow): the test halves are held out, each measured once by the
lead (``python -m tests.wild.runner --faces run,lint --half test3`` for round three); for them the
suite checks only the cases' structure and, marked slow, that each bug still changes its metric.
No test asserts that a round-three bug is detected. Round two's test half was measured once (docs/wild.md) and is
development since: ``EXPECTED`` lists the cases of it that later checks were built on.

Round four (w103-w126: ``dev4``/``test4``, drawn after round three's test half was measured): its test
half is held out whole until the lead measures it, and no test here runs an overt face on it; of its
development half, only the cases that checks were built on (``EXPECTED``) are run here (their
development twins join ``DEV_NEW`` after the lead's measurement); the suite checks every case's
structure and, marked slow, that each bug still changes its metric.

Round five (w127-w150: ``dev5``/``test5``, drawn after round four's test half was measured): both halves
were held out until the lead measured them once, on the merged tree of session 40 (0 of 11 and 0 of 12
by cause, docs/wild.md); development since: the development half's twins join ``DEV_NEW``
(``test_dev_twin_quiet``); the two test-half twins with true findings unrelated to their bug are pinned
in ``TWIN_FINDINGS``.

Round six (w151-w174 but w160, w164, w167, w169, w172: ``dev6``/``test6``, drawn after round five was
measured): both halves were held out until the lead measured them once, on the merged tree of session 41
(test6 1 of 9 and dev6 0 of 10 by cause, docs/wild.md); development since: the development half's twins
join ``DEV_NEW``; the three test-half twins that had findings (w157, w166, w168) were fixed at their cause
after the measurement, each with a unit test.

Round seven (w175-w194 but w191: ``dev7``/``test7``, drawn after round six was measured): both halves were
held out until the lead measured them once, on the merged tree of session 42 (test7 1 of 10 and dev7 0 of 9
by cause, docs/wild.md); development since: the development half's twins join ``DEV_NEW``; of the four
twins with findings, three were false and fixed at their cause after the measurement (w180, w183, w185),
and w190's lint ``device-mismatch`` (a tensor built in ``forward()`` without a device) is true and
unrelated to its bug: pinned in ``TWIN_FINDINGS``.

Round eight (w195-w214 but w204: ``dev8``/``test8``, drawn after round seven was measured): both halves were
held out until the lead measured them once, on the merged tree of session 43 (test8 0 of 10 and dev8 1 of 9 by
cause, no twin with a finding, docs/wild.md); development since: the development half's twins join
``DEV_NEW``.

Round nine (w215-w234: ``dev9``/``test9``, drawn after round eight was measured): both halves were held out
until the lead measured them once, on the merged tree of session 44 (test9 0 of 10 and dev9 1 of 10 by cause;
one test-half twin with a lint finding, w233's ``train-mode-in-eval``, docs/wild.md); development since: the
development half's twins join ``DEV_NEW``.

Round ten (w235-w254 but w238, w244, w249, w252, w253: ``dev10``/``test10``, drawn after round nine was
measured): both halves were held out until the lead measured them once, on the merged tree of session 45
(test10 0 of 8 and dev10 0 of 7 by cause; two test-half twins with lint findings, w248's ``scheduler-cadence``
and w254's ``train-mode-in-eval``, both judged false and fixed at their cause after the measurement,
docs/wild.md); development since: the development half's twins join ``DEV_NEW``.

Round eleven (w255-w274 but w267, w268, w269, w273: ``dev11``/``test11``, drawn after round ten was measured):
both halves were held out until the lead measured them once, on the merged tree of session 46 (test11 1 of 9 and
dev11 1 of 7 by cause; two test-half twins with lint findings, w272's and w274's ``device-mismatch``, judged
true and unrelated to their case's bug: a tensor made in forward() without a device, docs/wild.md); development
since: the development half's twins join ``DEV_NEW``.

Round twelve (w275-w294 but w281, w282, w286, w293: ``dev12``/``test12``, drawn after round eleven was measured):
both halves were held out until the lead measured them once, on the merged tree of session 47 (test12 0 of 9 and
dev12 0 of 7 by cause; one test-half twin with a lint finding, w291's ``device-mismatch``, judged true and
unrelated to its case's bug: a tensor made in forward() without a device, docs/wild.md); development since: the
development half's twins join ``DEV_NEW``.

Round thirteen (w295-w314 but w297, w302, w305, w307, w309, w310: ``dev13``/``test13``, drawn after round twelve
was measured): both halves were held out until the lead measured them once, on the merged tree of session 48
(test13 1 of 10 and dev13 0 of 4 by cause; one test-half twin with a lint finding, w299's ``unsafe-load``, judged
true and unrelated to its case's bug: the feature cache is read with torch.load without weights_only, docs/wild.md);
development since: the development half's twins join ``DEV_NEW``.

Round fourteen (w315-w333 but w331: ``dev14``/``test14``, drawn after round thirteen was measured): both halves
were held out until the lead measured them once, on the merged tree of session 49 (test14 1 of 10 and dev14 1 of 8
by cause; one test-half twin with a lint finding, w327's ``unregistered-tensor``, judged true and unrelated to its
case's bug: the focal loss keeps its class weights as a plain tensor attribute, docs/wild.md); development since:
the development half's twins join ``DEV_NEW``.

Round fifteen (w335-w354: ``dev15``/``test15``, drawn after round fourteen was measured; cases were written for
seven test-half reports only, w337 w339 w340 w346 w347 w351 w352): held out until the lead measured the test half
once, on the merged tree of session 50 (test15 0 of 7 by cause, one symptom only; no twin with a finding,
docs/wild.md); development since: the development half's twins join ``DEV_NEW``. Twelve more cases were written
in session 51, after that measurement, as development cases (w335 w336 w338 w341 w342 w344 w348 w349 w350 of
``dev15``, whose twins are in ``DEV_NEW``; w343 w353 w354 of ``test15``); N319 (w345) has none.

Round sixteen (w355-w374: ``dev16``/``test16``, drawn after round fifteen was measured; 13 cases, 8 test and 5
development): held out until the lead measured both halves once, on the merged tree of session 51 (test16 0 of 8 by
cause, two symptom only; dev16 1 of 5; no twin with a finding, docs/wild.md); development since: the development
half's twins join ``DEV_NEW``.

Round seventeen (w375-w394: ``dev17``/``test17``, drawn after round sixteen was measured; 14 cases, 6 test and 8
development): held out until the lead measured both halves once, on the merged tree of session 52 (test17 1 of 6 by
cause, two symptom only; dev17 0 of 8, two symptom only; two twins with a finding judged true and unrelated to their
case's bug: w383's lint ``device-mismatch``, a tensor made in forward() without a device, and w388's run
``dead-activations``, 92-96% of the hidden units dead over every training sample at a learning rate of 0.5 with
momentum, docs/wild.md); development since: the development half's twins join ``DEV_NEW``.

Round eighteen (w395-w414: ``dev18``/``test18``, drawn after round seventeen was measured; 19 cases, 10 test and 9
development, N383 without a case): held out until the lead measured both halves once, on the merged tree of session
53 (test18 0 of 10 by cause, none symptom only; dev18 0 of 9, none symptom only; no twin with a finding,
docs/wild.md); development since: the development half's twins join ``DEV_NEW``.

Round nineteen (w415-w434: ``dev19``/``test19``, drawn after round eighteen was measured; 13 cases, 8 test and 5
development, seven reports without a case): held out until the lead measured both halves once, on the merged tree of
session 54 (test19 0 of 8 by cause, none symptom only, w426's twin with a run ``batch-dependent-eval``, false and
fixed after; dev19 0 of 5, w420's bug script broken by a guard's probe under ``overt run``, fixed after;
docs/wild.md); development since: the development half's twins join ``DEV_NEW``.

Round twenty (w435-w454: ``dev20``/``test20``, drawn after round nineteen was measured; 9 cases, 5 test and 4
development, eleven reports without a case): held out until the lead measured both halves once, on the merged tree of
session 55 (test20 0 of 5 by cause, one symptom only; dev20 0 of 4; one twin with a finding judged true and unrelated
to its case's bug: w437's lint ``device-mismatch``, a causal mask and position ids made in forward() without a device,
docs/wild.md); development since: the development half's twins join ``DEV_NEW``.

Round twenty-one (w455-w474: ``dev21``/``test21``, drawn after round twenty was measured; 11 cases, 6 test and 5
development, nine reports without a case): held out until the lead measured both halves once, on the merged tree of
session 56 (test21 0 of 6 by cause, two symptom only; dev21 1 of 5, w460 by ``softmax-before-cross-entropy``; three
twins with a finding judged true and unrelated to their case's bug: lint's ``device-mismatch`` on w461, w463 and w472,
tensors made in forward() without a device, docs/wild.md); development since: the development half's twins join
``DEV_NEW``.

A new round adds its halves to ``runner.UNMEASURED`` until the lead measures it; no test here runs an overt face
on a half listed there, and the suite checks only each such case's structure and, marked slow with plain
``python``, that each bug still changes its metric."""

from __future__ import annotations

import pytest

from tests.wild import harness
from tests.wild.harness import case_id, cases, half
from tests.wild.split import HALVES, draw
from tests.wild.split import load as load_split

CASES = {case_id(c): c for c in cases()}

#: case -> the cheapest face that catches it (the runner reports every face)
EXPECTED = {
    "w01_functional_dropout": ("lint", "run", "engine"),
    "w02_dropout_training_true": ("run",),  # lint names it at info level only (training=True written out)
    "w03_validation_no_eval_no_grad": ("lint", "run"),
    "w04_val_inside_train": ("run", "engine", "doctor"),
    "w05_ddp_params_moved": ("run",),
    "w06_ddp_sometimes_unwrapped": ("run",),
    "w07_only_norms_trainable": ("run", "engine"),
    "w08_optimizer_other_instance": ("run",),
    "w09_missing_zero_grad": ("lint", "run"),
    "w10_eval_never_undone": ("lint", "run"),
    "w11_softmax_before_ce": ("lint", "run"),
    "w12_loss_history": ("lint", "run"),
    "w13_layers_in_list": ("run",),
    "w14_mse_broadcast": ("run",),
    "w15_sorted_unshuffled": ("lint", "run"),  # run: overt/guards/epochorder.py (session 52, data17)
    "w16_scheduler_per_batch": ("lint", "run"),
    "w17_batchnorm_last_batch": ("run",),
    "w18_nan_inputs": ("run",),
    "w19_set_epoch_missing": ("lint", "run"),
    "w20_mask_plain_attribute": ("run",),
    "w23_numpy_seed_workers": ("run",),
    "w24_accumulation_unscaled": ("lint",),
    "w25_retain_graph_loop": ("lint", "run"),
    "w26_no_grad_without_eval": ("lint", "run"),
    "w48_critic_value_detached": ("run",),
    "w54_double_sigmoid": ("lint",),
    # the first test half became development when a fresh held-out set was started (issue 33,
    # branch invdata): the data/label invariants built on these cases
    "w42_labels_shifted_twice": ("run",),
    "w43_vocab_rebuilt_on_test": ("lint",),
    "w44_class_weights_reversed": ("run",),
    "w47_sample_rate_mismatch": ("run",),
    "w49_listing_order_mismatch": ("run",),
    # the same, model and evaluation state (branch invmodel)
    "w32_softmax_over_batch_eval": ("run",),
    "w37_shuffled_eval_order": ("lint",),
    "w45_head_not_in_optimizer": ("run",),
    "w51_dropout_keep_prob_as_p": ("lint", "run"),
    "w52_eval_hidden_carried": ("run",),
    # round two's development half: checks widened at the cause of their misses (branch dev2fix)
    "w59_mask_augmented_separately": ("lint",),
    "w62_distributed_eval_order": ("lint",),
    "w68_lstm_without_batch_first": ("run",),
    "w69_layer_decay_every_step": ("run",),
    "w70_zero_grad_each_microbatch": ("lint",),
    # round two's test half, now development (issue 33 builders): sequence models, masks, targets, state
    "w57_distill_teacher_twice": ("lint", "run"),
    "w58_attention_mask_inverted": ("run",),
    "w61_init_after_load": ("lint", "run"),
    "w63_returns_from_past_rewards": ("lint", "run"),
    "w67_lm_without_causal_mask": ("run",),
    "w74_truncation_drops_labels": ("run",),
    # round two's test half, measured once (15:28) and development since: numeric invariants (branch numerics)
    "w56_kl_div_probabilities": ("lint",),
    "w60_bf16_weights_no_master": ("run",),
    "w78_fp16_autocast_no_scaler": ("lint",),
    # evaluation code that computes the wrong number (branch metrics)
    "w64_predictions_not_denormalised": ("lint", "run"),
    "w65_auc_negative_class": ("lint",),
    "w66_argmax_without_dim": ("lint", "run"),
    "w76_accuracy_over_batches": ("lint",),
    # round three's development half: invariants built at the cause of its misses (branch dev3fix)
    "w83_clip_after_step": ("lint", "run"),
    "w93_optimizer_state_not_saved": ("lint",),
    "w90_bce_arguments_swapped": ("run",),
    "w92_dataset_len_wrong": ("lint",),
    "w102_early_stop_never_reset": ("lint",),
    "w80_weighted_sampler_per_class": ("run",),
    "w101_dice_on_logits": ("lint",),
    # round three's test half, measured once and development since (branch late2)
    "w86_entropy_bonus_sign": ("lint",),
    "w96_precision_recall_swapped": ("lint",),
    # round three's test half, measured once (before this): a LambdaLR function that returns the rate (branch late1)
    "w79_lambdalr_returns_lr": ("lint", "run"),
    # round three's test half, development since: parameters meant to stay frozen (branch optparams)
    "w100_frozen_embeddings_decay": ("lint", "run"),
    "w85_simsiam_no_stop_gradient": ("run",),
    "w94_teacher_outputs_replayed": ("run",),
    # data pipelines and evaluation code (branch datapipe)
    "w87_metric_not_reset": ("lint",),
    "w81_totensor_on_mask": ("run",),
    "w98_pad_is_eos": ("lint",),
    "w95_window_off_by_one": ("lint",),
    "w91_accuracy_summed_twice": ("lint",),
    # round four's test half, measured once (0 of 12) and development since: the cut named at the step
    "w115_gan_generator_detached": ("run",),
    # the same half, after it (session 40): evaluation labels renumbered against the training indices; a metric
    # that misjudges a perfect prediction
    "w124_class_index_from_eval_folder": ("run",),
    "w113_iou_absent_class_zero": ("run",),
    # round five's test half, measured once (session 40): its mechanism mapped after the run (docs/wild.md)
    "w128_positional_encoding_batch_first": ("run",),
    # round four's development half (branch dev4b)
    "w112_critic_target_wrong_state": ("lint",),
    "w116_windows_shuffled_before_split": ("lint",),
    "w117_padding_idx_real_index": ("run",),
    "w121_low_precision_score_ties": ("lint",),
    "w123_epochs_from_dataset_length": ("lint",),
    # round four's development half (branch dev4a): lint rules built on these five
    "w104_auc_from_labels": ("lint",),
    "w106_vae_logvar_as_std": ("lint",),
    "w107_last_token_left_padding": ("lint",),
    "w108_bbox_flip_unswapped": ("lint",),
    "w109_undirected_edges_one_way": ("lint",),
    # decisions that pick or stop a model read held-out quantities (branch selection)
    "w125_early_stopping_on_train_loss": ("lint",),
    # round four's test half, measured once and development since (branch argname): an argument in another slot
    "w118_sgd_positional_weight_decay": ("lint",),
    # coverage of the data by training and evaluation (branch emptyrun)
    "w111_drop_last_small_dataset": ("run", "guard"),
    "w103_distributed_eval_padding": ("lint",),
    # round five, development since it was measured (lead, session 41): the saved optimizer/scheduler state never
    # read back
    "w140_resume_without_scheduler_state": ("lint",),
    # round four's test half, development since (lead, session 41): two views of a pair that are one tensor
    "w122_identical_contrastive_views": ("run", "guard"),
    # axes that keep their meaning (branch axes): a permutation done with reshape, a 0/1 integer tensor used as
    # a mask, a bidirectional RNN read at its last step
    "w136_channels_last_reshaped": ("run",),
    "w142_attention_heads_merged_without_permute": ("run",),
    "w137_event_mask_as_index": ("run",),
    "w143_bidirectional_last_step_output": ("run",),
    # BatchNorm running statistics that do not describe the evaluated data (branch stats)
    "w127_swa_bn_not_updated": ("run",),  # the averaged copy is found when switched to eval (auto)
    "w131_batchnorm_momentum_convention": ("lint", "run", "guard"),
    # evaluation passes over training samples, seen at run time (branch stats)
    "w133_test_set_from_training_split": ("run", "guard"),
    # evaluation reads a model's outputs as the training loss taught them (branch scores)
    "w134_threshold_on_logits": ("lint", "run"),
    "w139_multilabel_softmax_scores": ("run",),
    "w146_perplexity_counts_padding": ("run",),
    "w150_metric_accumulated_in_bfloat16": ("lint", "run"),
    "w168_wgan_generator_backward_sign": ("run",),
    "w173_ema_warmup_parameter_unused": ("run",),
    # a softmax or argmax over an axis of size 1 (branch singleton)
    "w158_attention_softmax_over_singleton_axis": ("lint", "run"),
    "w163_argmax_on_regression_output": ("lint", "run"),
    # orders and modules that must not repeat (branch repeats): a seed reset that rewinds the training
    # shuffle, heads built by multiplying a one-element list
    "w154_global_seed_reset_in_evaluation": ("run",),
    "w151_heads_shared_by_list_repetition": ("lint", "run"),
    # round six, development since (branch lintaxis): an optional axis tested for truth, a derivative loss term
    # taken without create_graph=True
    "w165_axis_zero_taken_as_no_axis": ("lint",),
    "w152_derivative_loss_without_create_graph": ("lint",),
    # round six, development since: repeated runs start fresh, Monte Carlo samples differ (branch lintloops)
    "w155_model_not_reset_between_folds": ("lint",),
    "w166_mc_dropout_in_eval_mode": ("lint", "run", "guard"),
    # round seven, development since (branch causal): a forecaster whose output sees the step it is scored
    # against (a convolution padded on both sides), by the perturbation probe of causal-mask-missing
    "w177_causal_padding_leaks_future": ("run", "guard"),
    # a flip whose default axes take in the batch: torch.fliplr on (N, H, W) test-time augmentation (branch causal)
    "w175_tta_fliplr_on_batch": ("run", "guard"),
    # a grid_sample identity grid listed (y, x): at rest the image is transposed (branch causal)
    "w179_identity_grid_yx_order": ("run",),  # its model is `net`: the guard face names `model`
    # sets a correct program keeps disjoint (branch leakage): a random split over rows that repeat their units
    # (both directions of an edge, several images per patient); support and query drawn apart; top-N over the
    # training items; a split redrawn on resume
    "w153_undirected_edges_split_as_directed": ("lint",),
    "w135_split_by_image_not_patient": ("lint",),
    "w174_support_query_overlap": ("lint",),
    "w97_seen_items_ranked": ("lint",),
    "w181_split_redrawn_on_resume": ("lint",),
    # hand-written metrics that are not the metric they are named for (branch metrics8): recomputed by their
    # definition on their own call's inputs, or scored on a prediction disjoint from the target
    "w126_ctc_decode_trailing_blank": ("run",),
    "w156_iou_plus_one_on_normalized_boxes": ("run",),
    "w183_wer_on_characters": ("run",),
    "w187_ngram_match_by_cosine": ("run",),
    "w194_dcg_discount_off_by_one": ("run",),
    # ... and ranking and reconstruction metrics (branch metrics9): recall@k over k, a PSNR peak below the range
    "w209_psnr_peak_ignores_normalisation": ("run",),
    "w211_recall_at_k_divided_by_k": ("run",),
    # terms of a summed loss weighted by how they were reduced (branch lossmix): a VAE's reconstruction averaged
    # next to its KL summed, a distillation term at temperature T without T*T
    "w176_vae_mse_averaged_kl_summed": ("run", "guard"),
    "w114_distill_without_t_squared": ("run", "guard"),
    # a regression target that is the model's own input, learned as a copy (branch lossmix)
    "w110_diffusion_target_noisy": ("run", "guard"),
    # round eight, development since it was measured (lead, session 43): a causal LM scored on its unshifted labels
    "w213_causal_lm_labels_not_shifted": ("run",),
    # test edges left in the message-passing graph they are scored on (branch evalsets)
    "w206_test_edges_left_in_message_graph": ("run", "guard"),
    # parameters that train at another rate than their group was given (branch cluster): a group whose name
    # filter matched nothing, a warm-up that takes group 0's peak for every group
    "w189_backbone_lr_filter_misses": ("run",),
    "w197_warmup_collapses_group_lrs": ("run",),
    # conventions two places of one program must share (branch conventions): a CTC decoder whose blank is not
    # the loss's
    "w200_ctc_decoder_default_blank_index": ("run",),
    # metrics written inline whose formula the code proves is another (branch metrics10): an error of two uint8
    # arrays, an NDCG whose ideal is the retrieved top-k re-sorted
    "w198_error_metric_in_uint8": ("lint",),
    "w161_ndcg_ideal_from_retrieved_list": ("lint",),
    # ... and a filtered ranking whose filter of known positives leaves out the validation split (branch metrics10)
    "w205_filtered_ranking_misses_validation_triples": ("lint",),
    # ... and a re-identification ranking that reads the camera ids and never removes the own-camera matches
    "w207_reid_same_camera_matches_kept": ("lint",),
    # ... and a top-k id buffer that starts as zeros, filled from a filtered ranking and scored whole, so its
    # unfilled slots count as item 0 (branch scored)
    "w223_topk_buffer_zeros_read_as_item0": ("lint",),
    # an evaluation over batches of seed nodes that scores each batch's sampled neighbours too (branch scored)
    "w225_metric_over_all_sampled_nodes": ("lint",),
    # state that lives beside the model follows it through the run (branch optreset): an Adam built anew in a
    # train_epoch() helper at every epoch
    "w226_optimizer_rebuilt_every_epoch": ("run",),
    # reading data does not change it (branch datamut): a __getitem__ that normalises and flips a view of the
    # stored tensor in place, so every epoch renormalises the data set
    "w220_augmentation_in_place_on_stored_data": ("run",),
    # round nine, development since it was measured: an evaluation under no_grad without eval() of models the
    # mode does not change, whose predictions depend on the batch (branch evalpass): eight images packed into
    # one sequence with the block mask never passed to attention, mean pooling divided by the sorted lengths
    "w233_block_mask_not_passed_to_attention": ("run",),
    "w229_lengths_left_sorted_for_mean_pool": ("run",),
    # the order of training events (branch lifecycle): one autocast region around the whole loop, whose cast
    # cache serves every forward the bfloat16 copies of the weights from before the steps
    "w219_autocast_cache_spans_optimizer_steps": ("run",),
    # ... and a learning-rate range test whose copy of the model's and the optimizer's state is never loaded
    "w130_lr_finder_state_not_restored": ("lint",),
    # ... and gradients all-reduced on the first micro-batch of an accumulation window while the step waits for the last
    "w218_grad_sync_on_first_microbatch": ("lint",),
    # a copy of the model that the program reads follows it (branch shadows): a DQN target network whose sync
    # never runs, read at every step while it still holds the random initialisation; an EMA whose update has
    # its sign flipped, so its weights grow beyond any the model had
    "w27_target_net_never_synced": ("run",),
    "w214_ema_update_sign_flipped": ("run",),
    # ... and an EMA kept as a dictionary of tensors, taken from the model before the checkpoint is loaded
    "w221_ema_created_before_resume_load": ("run",),
    # a mining selection never takes the entries its mask excluded (branch losses11): the diagonal filled with
    # -inf in similarity space, turned into +inf by 1 - sim, taken by the max as every anchor's hardest negative
    "w202_triplet_hardest_negative_is_masked_diagonal": ("run",),
    # a prediction computed is read (branch losses11): the teacher's labels computed and left unused while the
    # student distils on the data's labels
    "w192_label_only_distillation_on_data_labels": ("lint",),
    # evaluation that computes another number than it says (branch metrics11): a GIoU loss that reads corners
    # given centre-format targets; an active-learning oracle that reads labels at pool positions
    "w132_giou_on_center_format_boxes": ("run",),
    "w208_active_learning_labels_by_pool_index": ("lint",),
    # box corners normalised by the swapped image shape; flow vectors rescaled by the other axis's ratio
    "w203_box_corners_normalised_by_swapped_shape": ("lint",),
    "w195_flow_resize_axes_swapped": ("lint",),
    # model code that breaks its own structure (branch modelcode): a LoRA branch whose B is drawn at random, so
    # the adapted model does not start as the pretrained one; graphs batched with per-graph instead of
    # cumulative node offsets, so edges join nodes of different graphs
    "w105_lora_b_random_init": ("run",),
    "w190_graph_batch_offsets_not_cumulative": ("run",),
    # ... and reversible instance normalisation whose denormalize multiplies by a scale normalize never divided by
    "w186_revin_scale_not_applied": ("run",),
    # two sequences paired by position come from one ordering (branch orders): task metrics named by the sorted
    # task names but computed in creation order; class priors sorted by their decimal string keys; anchors
    # repeat_interleave'd against blocks concatenated one after the other; a pair generator's halves unpacked
    # in the other order; pretrained vectors read at the new vocabulary's own positions
    "w247_task_metrics_named_in_sorted_order": ("lint",),
    "w251_class_priors_in_string_key_order": ("lint",),
    "w99_contrastive_pairs_misaligned": ("lint",),
    "w230_pair_generator_returns_halves_swapped": ("lint",),
    "w89_embeddings_misaligned": ("lint",),
    # targets built from memory the program never filled (branch rltargets): value targets summed from an
    # advantage buffer still holding its zeros, so they equal the critic's own prediction from the first step
    "w236_value_targets_from_zeroed_advantage_buffer": ("run",),
    # ... and a TD target that ignores the episode-end flags it unpacked; an epsilon schedule whose horizon never
    # divides the step counter, pinned to its floor from the second step
    "w38_td_target_no_done_mask": ("lint",),
    "w157_epsilon_precedence": ("lint",),
    # ... and a vectorised environment that returns its observation buffer, overwritten in place, into a replay list
    "w201_vec_env_obs_returned_by_reference": ("lint",),
    # ... and an n-step Q target whose bootstrap is discounted once, not by gamma ** n
    "w147_nstep_target_single_discount": ("lint",),
    # model code whose numbers break the structure it names (branch modelnum): activation checkpointing with
    # preserve_rng_state=False, whose recomputation draws other dropout masks than the forward it replaces
    "w237_checkpoint_recompute_fresh_dropout": ("run",),
    # ... and attention logits divided by a scale defined as head_dim ** -0.5 (multiplied by sqrt(head_dim))
    "w241_attention_logits_divided_by_inverse_scale": ("lint",),
    # ... and a subsampling front end whose lengths are divided by the stride a second time, so the items that
    # fill the input come out with a length that is no axis of the output
    "w246_subsampled_lengths_divided_twice": ("run",),
    # existing premises widened to code written another way (branch losses12): an MLM collator that lets padding
    # be chosen for masking (the padding proven on the sequence the targets restore); a BPR loss whose averaged
    # ranking term is divided by the batch size again with its regulariser; an SWA update that weights the
    # newest model by the count
    "w254_mlm_collator_masks_padding": ("run",),
    "w250_bpr_loss_divided_by_pairs_twice": ("run",),
    "w243_swa_scales_newest_model_by_epoch": ("lint",),
    # functions that compute another number than their name (branch metrics12): a top-k filter that keeps k + 1
    # tokens; a k-NN top-5 that credits classes with no vote (both recomputed at run time); a macro F whose recall
    # list is filled by the precision method; an MRR taken as the reciprocal of the mean rank (both in the code)
    "w240_top_k_keeps_one_token_too_many": ("run",),
    "w245_knn_top5_credits_zero_vote_classes": ("run",),
    "w239_macro_f_from_precisions_twice": ("lint",),
    "w242_mrr_as_reciprocal_of_mean_rank": ("lint",),
    # round eleven, measured once in session 46 and caught by cause: noise augmentation whose SNR argument works
    # backwards (training inputs unlike the evaluation's); reentrant checkpointing behind a frozen input (blocks
    # that never receive a gradient)
    "w259_noise_snr_argument_inverted": ("run",),
    "w265_reentrant_checkpoint_frozen_input": ("run",),
    # round eleven's evaluation functions, by metamorphic calls of the user's function (branch metrics13): an
    # average precision whose value moves when its detections are listed in reverse (ranked by the label field);
    # a mAP@k whose value moves when the classes are renamed (a top-k scored in index order); an answer extractor
    # that gives a word's own tokens another text (offsets one character into the word)
    "w260_detections_ranked_by_label_column": ("run",),
    "w261_map_at_k_over_unsorted_top_k": ("run",),
    "w274_answer_sliced_from_shifted_offsets": ("run",),
    # session 47 (branch lossmono): a focal loss whose negatives' factor is inverted pushes both labels the same way
    "w271_focal_negatives_modulated_inverted": ("run",),
    # session 47 (gradinv): a custom autograd.Function whose backward builds the latent weights' gradient from the
    # weights, not from the incoming gradient
    "w262_ternary_grad_from_weights": ("run",),
    # session 47: a stochastic-depth block whose eval-mode output is not its training output's expectation
    "w255_stochastic_depth_eval_scale_skipped": ("run",),
    # session 48 (lead): a model that takes its batch as a list of sequences, padded in the batch's order while
    # the counts of running rows assume length order: half the batch alone gets other outputs
    "w291_padded_batch_sort_indices_recomputed": ("run",),
    # session 48 (branch sched12): a cosine whose T_max is shortened by a warm-up that never runs (its rate
    # reaches the floor half-way and climbs back); log class weights that weigh the most frequent class zero
    "w278_cosine_tmax_minus_warmup_without_warmup": ("run",),
    "w283_log_class_weights_zero_for_majority": ("run",),
    # session 48 (overlap14): a mask IoU that returns the Dice coefficient, an NMS whose intersection takes the outer
    # corner (both recomputed by their definitions), a matched mIoU whose perfect match scores 0.5
    "w280_iou_computed_as_dice": ("run",),
    "w289_nms_intersection_corner_maximum": ("run",),
    "w292_matched_miou_union_double_counts": ("run",),
    # session 48 (scores14): a quantile loss of the absolute error, a C-index crediting tied event/censored pairs
    # half whatever the risks: both recomputed by their definitions on the function's own call
    "w276_quantile_loss_on_absolute_error": ("run",),
    "w285_concordance_ties_credited_half": ("run",),
    # session 48 (skew12): a batch normalisation skipped for one-row batches, evaluated one row per forward (the
    # row alone against a batch of its copies); point clouds scaled by the radius of the uncentred points (the
    # test features lie outside the training values' central 99% in the median feature)
    "w287_tabnet_bn_skipped_for_single_row": ("run",),
    "w290_bps_radius_from_uncentered_points": ("run",),
    # session 48 (optim12): a hand-written RAdam whose update from a fresh state is not torch's RAdam (its bias
    # correction written into exp_avg); a Lion whose decoupled decay went into the sign update
    "w275_radam_bias_correction_in_place": ("run",),
    "w294_lion_coupled_weight_decay": ("run",),
    # session 48 (optim12): a magnitude pruning scored by the signed weight (the survivors all of one sign)
    "w277_magnitude_pruning_without_abs": ("run",),
    # round thirteen, measured in session 48 (test13): a mean pooling over the padded width (caught at the measurement)
    "w306_mean_pooling_counts_padding": ("run",),
    # session 49 (rltargets14): returns, advantages and value targets recomputed by their recursion on the
    # function's own call (a GAE carry seeded with the bootstrap; a terminating state's value zeroed before the shift)
    "w228_value_of_terminating_state_zeroed": ("run",),
    "w313_gae_carry_seeded_with_bootstrap": ("run",),
    # session 49 (embrows14): column groups sliced with an offset never advanced (the later groups' columns reach
    # no output while the first group's are read by every encoder)
    "w298_embedding_columns_offset_never_advanced": ("run",),
    # session 49 (embrows14): a collate that fills the token types with the input ids (two argument slots of the
    # model's forward given the same ids)
    "w264_token_types_filled_with_input_ids": ("run",),
    # round fourteen, measured in session 49: a row's encoding written from another row of its batch (test14) and a
    # distillation head left out of the loss (dev14), caught at the measurement
    "w315_unsort_scatter_writes_into_its_source": ("run",),
    "w317_hard_distillation_on_class_token": ("run",),
    # session 49 (lossreach14): InfoNCE on cosine similarities without its temperature (logits bounded in [-1, 1])
    "w308_infonce_without_temperature": ("run",),
    # session 49 (lossreach14): a flow whose forward_and_log_det subtracts the layers' log-determinants
    "w301_flow_log_det_sign_flipped": ("run",),
    # session 49 (evalsep14): an eval-mode forward that zeroes its dropout rate for the rest of training
    "w304_eval_forward_zeroes_dropout_rate": ("run",),
    # session 50 (metricdefs15): an ECE whose equal-width bins enter unweighted, an error rate averaged over
    # utterances, a precision@k whose relevant set holds the rows the code itself reads as negative
    "w319_ece_bins_unweighted": ("lint",),
    "w320_error_rate_averaged_per_utterance": ("lint",),
    "w322_eval_consumed_includes_negatives": ("lint",),
    # session 50 (recur15): a decoder cell given the encoder's state at every step, its returned state dropped
    # (recurrent-state-not-carried); a GAE carry masked a second time, its lambda read from a LAMBDA global
    "w318_decoder_restarts_from_initial_state": ("run",),
    "w328_gae_carry_masked_twice": ("run",),
    # session 50 (datalabels15): a focal loss that assigns the per-sample weights it gathered back to its per-class
    # alpha (the loss's configuration rebound to one batch's shape)
    "w327_focal_alpha_overwritten_by_batch_gather": ("run",),
    # session 50 (evalpass15): a validation loop that scores the first batch of a new iterator at every step, and an
    # early-stopping helper whose running best no test reads (a checkpoint saved at every evaluation)
    "w323_validation_reads_first_batch_every_step": ("run",),
    "w332_checkpoint_saved_every_epoch": ("lint",),
    # session 50 (normalise15): a hand-written layer norm and an utterance normalisation whose output follows the
    # input's scale (normaliser-not-scale-invariant)
    "w321_layernorm_variance_squared": ("run",),
    # session 51 (lead): round fifteen's development cases written this session, mapped after cases15's report had
    # shown their run findings: a hand-written SGDW whose decay subtracts a constant (optimizer-off-definition), a
    # warm-restart schedule written by hand that skips a parameter group added later (lr-schedule-skips-groups)
    "w342_sgdw_decay_subtracts_constant": ("run",),
    "w343_warm_restarts_skip_added_param_group": ("run",),
    "w270_utterance_mvn_sqrt_taken_twice": ("run",),
    # session 51 (targets16): a landmark encoding its paired decoder does not undo (a floor division without
    # parentheses), and four simulated ranks whose samplers are seeded apart (their slices overlap)
    "w339_landmark_offsets_floor_divided": ("run",),
    "w340_sampler_seed_differs_per_rank": ("run",),
    # session 51 (state16): SWA statistics recomputed with momentum 0 (running-stats-never-computed, statistics still
    # exactly 0/1 after tracked batches) and a tied output layer left behind by an assign=True load
    # (load-state-dict-no-effect, overt/guards/ties.py)
    "w346_swa_bn_recomputed_with_zero_momentum": ("run",),
    "w352_tied_weights_untied_by_assign_load": ("run",),
    # round sixteen, measured once in session 51: an RMS norm that divides by the reciprocal RMS
    # (normaliser-not-scale-invariant, from session 50's normalise15; lint's divided-by-reciprocal, added to the
    # mapping after the measurement, which counted the run face only)
    "w373_rmsnorm_divides_by_inverse_rms": ("run", "lint"),
    "w364_load_balance_loss_broadcast_constant": ("run",),  # session 52, loss-term-constant
    # round seventeen, measured once in session 52: a fake-quantiser Function that returns no gradient for its
    # learnable scales (no-gradient)
    "w376_fake_quant_function_drops_scale_gradient": ("run",),
    # session 53 (optim18): an epoch's accumulation remainder erased by the next epoch's zero_grad
    # (backward-discarded, overt/guards/wastedgrad.py)
    "w379_accumulation_remainder_never_stepped": ("run",),
    # session 53 (optim18): a warm-up and a total step count swapped, the rate rises the whole run
    # (warmup-outlasts-run, overt/guards/warmupend.py)
    "w388_warmup_and_training_steps_swapped": ("run",),
    # session 51 (modules16): a hand-written dropout scaled by the drop fraction (eval-not-train-expectation), a
    # LoCon wrapper scaling the frozen output with its branch (adapter-not-identity-at-init), a weight fake
    # quantiser whose unsigned grid keeps its zero point at 0 (pruning-removes-one-sign)
    "w347_dropout_kept_units_scaled_by_drop_fraction": ("run",),
    "w337_locon_scale_applied_to_base_output": ("run",),
    "w351_asymmetric_weight_quant_zero_point_stuck": ("run",),
    # session 52 (export17): a LoRA merge applied twice into the shared base layers, and one into new nn.Linear
    # layers without alpha / r (merged-model-differs, overt/guards/foldequiv.py)
    "w88_lora_merged_twice": ("run",),
    "w257_lora_merged_without_scaling": ("run",),
    # session 52 (metrics17): Spearman correlations recomputed by their definition (ties given consecutive ranks in
    # listing order; Pearson's correlation of the raw values), and an IoU whose value moves with the predictions
    # where the target is the label its training loss ignored (metric-off-definition, overt/guards/rankcorr.py and
    # overt/guards/ignoredpreds.py)
    "w344_spearman_ties_ranked_in_order": ("run",),
    "w353_spearman_computed_as_pearson": ("run",),
    "w361_iou_ignored_class_pixels_kept_in_unions": ("run",),
    # session 52 (rl17): a NAF target that adds the next value undiscounted (targets-off-recursion, inline targets:
    # overt/guards/bootshift.py) and an A2C critic loss differentiated through its GAE target (stop-gradient-missing:
    # overt/guards/tdgrad.py)
    "w360_naf_target_adds_next_value": ("run",),
    "w193_critic_loss_through_gae": ("run",),
    # session 52 (data17): a bucketing batch sampler that yields its batches in length order every epoch
    # (unshuffled-training at run time, overt/guards/epochorder.py)
    "w335_bucket_batches_never_shuffled": ("run",),
    # session 52 (modules17): a block named residual returning its branch alone (residual-skip-missing), a latent drawn
    # by sample() and decoded (sample-not-reparameterised), two Linear layers with nothing between
    # (linear-layers-collapse), a positional encoding's sum computed as a bare statement (lint: result-discarded)
    "w363_residual_block_returns_branch_only": ("run",),
    "w366_vae_latent_sampled_without_reparameterisation": ("run",),
    "w371_head_linear_layers_without_activation": ("run",),
    "w367_positional_encoding_sum_not_assigned": ("lint",),
    # session 53 (data18): an integer segmentation mask resampled with the image by a bilinear grid_sample and
    # rounded (label-map-interpolated, overt/guards/labelresample.py)
    "w386_label_mask_resampled_bilinearly": ("run",),
    # session 53 (data18): two scalers sharing one statistics object through a default argument of __init__
    # (transform-statistics-shared, overt/guards/sharedstats.py)
    "w382_scalers_share_default_transformer": ("run",),
    # session 53 (metrics18): confusion counts whose FP takes in positions predicted negative (countcells.py), a
    # batched greedy decoding whose rows go on past their end token (batchdecode.py); metric-off-definition
    "w390_false_positives_include_false_negatives": ("run",),
    "w383_batched_decoding_keeps_tokens_after_eos": ("run",),
    # session 53 (state18): a per-step EMA copied into the model for validation and never put back
    # (eval-pass-changes-training, swapback), FedAvg coefficients summing to more than one (average-diverges-from-model,
    # aggregate)
    "w326_ema_weights_copied_into_live_model": ("run",),
    "w375_fedavg_coefficients_do_not_sum_to_one": ("run",),
    # session 54 (optim19): a OneCycleLR built and never stepped (scheduler-cadence, schednever.py); a hand-written
    # Adam whose denominator is floored at sqrt(eps) (optimizer-off-definition, optdef.py's eps-floor premise)
    "w401_one_cycle_step_guard_inverted": ("run",),
    "w402_eps_inside_and_outside_square_root": ("run",),
    # session 54 (latent19): a VAE's log-variance through softplus, so the sample's standard deviation is at least 1
    # (log-scale-non-negative, overt/guards/scalefloor.py)
    "w403_log_variance_through_softplus": ("run",),
    # session 54 (latent19): a VAE trained without its KL term, so nothing in the loss reads the sample's log-scale
    # but the sample (sample-spread-unpriced, overt/guards/scalefloor.py)
    "w350_vae_loss_without_kl_term": ("run",),
    # session 54 (evalcal19): a finished beam's score kept as a view of the scores its retirement sets to -inf
    # (kept-view-overwritten, overt/lint/rules/viewkept.py). (w399, a threshold chosen by argmax of an all-zero F1
    # curve, was caught by choice-over-flat-curve while torch.argmax was wrapped for the whole session; torch's
    # argmax is now seen only while a model's evaluation is watched, and w399 scores in training mode: missed.)
    "w406_retired_beam_score_aliased": ("lint",),
    # session 54 (evalcal19): a temperature read where LBFGS's overshooting last step left it (diverged-fit-kept,
    # overt/guards/fitkept.py)
    "w408_last_temperature_kept": ("run",),
    # session 54 (features19): delta features summed over every axis, so each frame's coefficients hold one value
    # per row (feature-columns-collapsed, overt/guards/samecolumns.py)
    "w411_delta_features_summed_over_coefficients": ("run",),
    # session 54 (features19): an init loop over children() that tests for layers built inside containers
    # (init-loop-misses-nested-layers, overt/lint/rules/initreach.py); velocities by np.gradient over the whole
    # trajectory cut at the history's end (window-target-misaligned, futurefeats.py); a heatmap's shape unpacked
    # width first while it is indexed [y, x] (coordinates-scaled-by-other-axis, shapeunpack.py)
    "w413_init_loop_over_children": ("lint",),
    "w398_derivative_features_from_future_positions": ("lint",),
    "w410_heatmap_shape_unpacked_as_width_height": ("lint",),
    # session 54 (targets19): categorical (C51) projections whose targets are not distributions, one losing the mass
    # of the atoms landing on the support, one moving both neighbours (probability-target-not-distribution,
    # overt/guards/probtargets.py)
    "w395_projection_drops_mass_on_integer_atoms": ("run",),
    "w414_projection_moves_both_atoms": ("run",),
    # session 55 (metrics20): a BLEU whose brevity penalty takes the shortest reference, recomputed on its
    # module-level call (metric-off-definition, overt/guards/bleudef.py); true positives and negatives read from
    # the wrong cells of scikit-learn's binary confusion matrix (metric-off-definition, overt/lint/rules/cmlayout.py)
    "w416_bleu_reference_length_minimum": ("run",),
    "w422_confusion_matrix_layout_misread": ("lint",),
    # session 55 (lossw20): a binary focal loss weighting the rare positives by alpha and leaving the negatives at 1
    # (class-weights-inverted read off a torch.where on the target, overt/guards/whereweight.py); an auxiliary term
    # divided by the batch size before its sum and after it (loss-terms-misscaled, overt/guards/termscale.py)
    "w418_focal_alpha_missing_for_negatives": ("run",),
    "w421_auxiliary_loss_divided_by_batch_twice": ("run",),
    # session 55 (tokens20): token ids mean one thing each -- sentences padded with the unknown word's id under a
    # table whose padding_idx is another id (padding-fills-with-token, overt/guards/padfill.py); a tag vocabulary
    # whose padding and unknown entries are one string, so two tags share an id (vocabulary-ids-shared,
    # vocabids.py); 0-based position ids at evaluation for a table trained from padding_idx + 1
    # (eval-positions-shifted, posrows.py)
    "w426_padding_id_looked_up_as_word": ("run",),
    "w425_vocabulary_special_tokens_share_index": ("run",),
    "w431_position_ids_without_padding_offset": ("run",),
    # session 55 (stop20): early stops that act on the history they were given -- a best updated by evaluate()
    # before the patience check is handed it (best-value-not-tracked followed through one call,
    # overt/lint/rules/bestflow.py); a stop comparing the latest loss with the worst of the window before it
    # (stop-on-window-worst, stopwindow.py)
    "w415_best_metric_updated_before_patience_check": ("lint",),
    "w427_patience_compares_with_window_worst": ("lint",),
    # session 55 (optdata20): a LAMB whose weight decay is added to the gradient, before the moments, instead of to
    # the step its trust ratio scales (optimizer-off-definition, optdef.py's trust-ratio premise, trustdecay.py)
    "w423_lamb_decay_added_to_gradient": ("run",),
    # session 55 (optdata20): a residual block whose branch opens with an in-place ReLU, so its skip adds the
    # overwritten input (residual-skip-missing, skipwrite.py); a validation transform set through one random_split
    # subset's .dataset, which the training subset shares (split-attribute-shared, overt/lint/rules/splitshared.py)
    "w420_inplace_relu_overwrites_skip_input": ("run",),
    "w430_validation_transform_set_on_shared_dataset": ("lint",),
    # session 55 (grid20): grid_sample reads the image it is given -- a grid of pixel indices whose points read
    # only the zero padding (grid-in-pixel-units, overt/guards/gridrange.py); with align_corners=True, pixel
    # indices normalised by W instead of W - 1, every point on the lattice -1 + 2k/W between the pixel centres
    # (grid-normalised-by-size, gridrange.py)
    "w439_grid_sample_given_pixel_coordinates": ("run",),
    "w440_grid_normalised_by_size": ("run",),
    # session 55 (rl20): a policy-gradient loss whose no-gradient weight is zero on every sample of every checked
    # step -- group-mean advantages over groups of one completion (w441) (loss-term-constant, widened:
    # overt/guards/pgzero.py). w454 (rewards never earned: the answer read one character at a time) gets the same
    # finding, but it names the zero weight, not the indexing line that causes it: the lead's mapping (before the
    # measurement) counts it a symptom, so w454 is not listed here
    "w441_group_baseline_over_group_of_one": ("run",),
    # session 55 (masks20): a perplexity evaluation whose attention mask hides the start token every training row
    # showed (train-serve-skew widened, hiddentoken.py); generation reading positions whose prediction no training
    # row weighed -- a loss mask on the states instead of the actions, an SFT mask not shifted like the targets
    # (generation-reads-untrained-position, untrainedread.py; w447 also response-mask-skips-first-token,
    # firstresponse.py)
    "w437_perplexity_masks_start_token": ("run",),
    "w445_action_loss_mask_inverted": ("run",),
    "w447_sft_loss_mask_drops_first_response_token": ("run",),
    # session 56 (rl21): a return function with no discount anywhere in its code is read as undiscounted
    # (targets-off-recursion widened, undiscounted.py): a reverse scan whose carry a token mask resets
    "w324_return_scan_reset_at_observation_tokens": ("run",),
    # session 56 (rl21): a tanh applied to a tanh's output (plus noise): the policy's mean squashed twice
    # (squashed-twice, squashtwice.py)
    "w341_policy_mean_squashed_twice": ("run",),
    # session 56 (rank21): a ranking or preference loss pushes hardest on the pairs it gets most wrong -- a
    # Bradley-Terry loss written -sigmoid(margin) without its log, linear in the sigmoid, while some pairs are
    # scored confidently wrong (loss-saturates-when-wrong, overt/guards/satloss.py)
    "w443_reward_loss_sigmoid_not_log_sigmoid": ("run",),
    # round twenty-one, measured in session 56: caught by cause at the measurement (dev21) -- members trained
    # through a cross-entropy of their own softmax (softmax-before-cross-entropy)
    "w460_ensemble_softmax_applied_twice": ("run",),
    # session 56 (features22): sin/cos of latitudes and longitudes laid out in degrees (a literal grid reaching
    # 90 and 360, no conversion to radians on the way) (trig-of-degrees, overt/lint/rules/trigdegrees.py)
    "w469_lat_lon_features_in_degrees": ("lint",),
    # session 56 (scores22): a library ranking metric judged on its call's scores (overt/guards/libranking.py):
    # summed OOD scores of 20-50 squashed by torchmetrics' sigmoid into one tie (ranking-metric-on-labels), and an
    # OOD score negated twice, ranking the samples reliably backwards (metric-wrong-class-score)
    "w471_ood_score_summed_saturates_auroc": ("run",),
    "w462_ood_score_sign_inverted": ("run",),
    # session 56 (weights21): a KL summed over the whole tensor (torch.sum without dim) and then multiplied by the
    # per-event mask, every event carrying the batch's KL (mask-on-reduced-loss, overt/guards/reducedmask.py)
    "w295_kl_summed_over_whole_batch": ("run",),
    # session 56 (choice21): a threshold chosen by argmax of an all-zero F1 curve, scored under no_grad by a model
    # left in training mode (no Dropout/BatchNorm: an evaluation without eval()), which now opens the window in
    # which torch's argmax is seen (choice-over-flat-curve widened, overt/guards/predshape.py + flatpick.py)
    "w399_threshold_from_all_normal_validation": ("run",),
    # session 56 (eval22): a reference answer parsed with ``#### (\\d+)``, which cannot read ``#### -2``: every
    # negative reference is unreadable, while the same text without its minus gives a number
    # (metric-imperfect-on-truth widened, overt/guards/answerextract.py)
    "w458_reference_answer_sign_stripped": ("run",),
    # session 56 (terms22): a PINN loss adding its interior weight (a dict entry whose sibling multiplies the
    # boundary term) to the interior loss instead of multiplying it (loss-term-constant widened to a lint face,
    # overt/lint/rules/addedweight.py)
    "w456_pde_interior_weight_added": ("lint",),
    # session 56 (terms22): an SVGP ELBO adding a minibatch's expected log-likelihood to the whole data set's KL
    # (a parameter-only kl() of the file's class) with no N / batch_size (loss-terms-misscaled widened to a lint
    # face, overt/lint/rules/klbatch.py)
    "w459_svgp_minibatch_likelihood_not_rescaled": ("lint",),
}
SLOW_FACES = {"doctor", "engine"}
#: cases whose scripts take over ~10 s under a face (per-sample actor-critic updates)
SLOW_CASES = {"w48_critic_value_detached", "w110_diffusion_target_noisy",
              "w154_global_seed_reset_in_evaluation",  # 150 epochs: the repeats start after the first evaluation
              "w132_giou_on_center_format_boxes",  # about 20 s under overt run (a detector trained on 64x64 images)
              "w237_checkpoint_recompute_fresh_dropout",
              "w375_fedavg_coefficients_do_not_sum_to_one"}  # 600 local optimizers: over 100 s on a loaded machine  # about 40 s under overt run on a loaded machine (570 steps)
DISTRIBUTED = {cid for cid, c in CASES.items() if getattr(c, "WORLD", 1) > 1}

PAIRS = [(cid, face) for cid, faces in EXPECTED.items() for face in faces]


def _param(cid: str, face: str):
    slow = face in SLOW_FACES or cid in DISTRIBUTED or cid in SLOW_CASES
    return pytest.param(cid, face, id=f"{cid}-{face}", marks=[pytest.mark.slow] if slow else [])


@pytest.fixture(autouse=True)
def _one_thread(one_thread):
    """tests/conftest.py's ``one_thread`` for every test here."""


NEW = {cid: c for cid, c in CASES.items() if hasattr(c, "REPORT")}
#: round four's development half joined after the lead measured round four's test half (docs/wild.md)
#: twins of round five with findings judged true and unrelated to their case's bug (docs/wild.md, round five
#: measured): the case scripts load without weights_only and build a tensor in forward() without a device
TWIN_FINDINGS = {"w129_teacher_forcing_in_eval": "device-mismatch",
                 "w140_resume_without_scheduler_state": "unsafe-load",
                 "w190_graph_batch_offsets_not_cumulative": "device-mismatch",
                 # round eleven, measured in session 46: a tensor made in forward() without a device (true, unrelated)
                 "w272_graph_conv_mean_for_sum": "device-mismatch",
                 "w274_answer_sliced_from_shifted_offsets": "device-mismatch",
                 # round twelve, measured in session 47: a tensor made in forward() without a device (true, unrelated)
                 "w291_padded_batch_sort_indices_recomputed": "device-mismatch",
                 # round thirteen, measured in session 48: a cache read by torch.load without weights_only (true, unrelated)
                 "w299_feature_cache_shared_by_splits": "unsafe-load",
                 # round fourteen, measured in session 49: class weights kept as a plain tensor attribute of a loss
                 # module, left behind by .to(device) (true, unrelated)
                 "w327_focal_alpha_overwritten_by_batch_gather": "unregistered-tensor",
                 # round fifteen's development cases written in session 51: a causal mask made in forward() without
                 # a device (true, unrelated)
                 "w336_rotary_cache_keyed_without_offset": "device-mismatch",
                 # round seventeen, measured in session 52: a decoder's start tokens made in forward() without a
                 # device (true, unrelated)
                 "w383_batched_decoding_keeps_tokens_after_eos": "device-mismatch",
                 # round twenty, measured in session 55: a causal mask and position ids made in forward() without a
                 # device (true, unrelated)
                 "w437_perplexity_masks_start_token": "device-mismatch",
                 # round twenty-one, measured in session 56: a zero state, a pooled sum or a disparity range made
                 # with torch.zeros/arange in forward() without a device (true, unrelated)
                 "w461_bond_features_sliced_from_wrong_end": "device-mismatch",
                 "w463_spike_reset_subtracts_threshold": "device-mismatch",
                 "w472_disparity_decoded_with_wrong_scale": "device-mismatch"}
#: correct twins whose ``overt run`` finding was judged true and unrelated to the case's bug
RUN_TWIN_FINDINGS = {
    # round seventeen, measured in session 52: SGD at lr 0.5 with momentum 0.9 kills 92-96% of the hidden ReLUs over
    # every training sample (measured with a plain hook); the twin still reaches 0.94 on the rest
    "w388_warmup_and_training_steps_swapped": "dead-activations"}
DEV_NEW = sorted(cid for cid, c in NEW.items()
                 if half(c) in ("dev", "dev2", "dev3", "dev4", "dev5", "dev6", "dev7", "dev8", "dev9", "dev10",
                                 "dev11", "dev12", "dev13", "dev14", "dev15", "dev16", "dev17", "dev18",
                                 "dev19", "dev20", "dev21"))


def test_every_case_cites_its_source_and_has_a_twin():
    assert len(CASES) >= 50
    for cid, case in CASES.items():
        doc = case.__doc__ or ""
        assert "http" in doc, f"{cid}: the docstring must cite the public report"
        assert case.SLUGS or getattr(case, "MECHANISM", None), cid
        assert case.script(True) != case.script(False), cid


def test_split_json_is_the_seeded_draw():
    """split.json is what ``python -m tests.wild.split`` draws: every round reproducible from its seed."""
    assert load_split() == draw()


def test_a_mechanism_listed_twice_is_refused():
    """json.loads keeps the last of two equal keys silently: mechanisms.json once held two mechanisms twice (an
    empty list, then the slug), and which one counted depended on their order."""
    import json
    with pytest.raises(ValueError, match="twice"):
        json.loads('{"a": [], "a": ["slug"]}', object_pairs_hook=harness._unique_keys)
    assert harness.mechanisms()  # the file itself lists each mechanism once


def test_new_cases_follow_the_split_and_record_their_metric():
    split = load_split()
    mechanisms = harness.mechanisms()
    halves = [set(split[h]) for h in HALVES]
    assert sum(len(h) for h in halves) == len(set().union(*halves)), "a report is in one half only"
    reports = [c.REPORT for c in NEW.values()]
    assert len(reports) == len(set(reports)), "one case per report"
    assert set(reports) <= set().union(*halves)
    for cid, case in NEW.items():
        assert case.MECHANISM in mechanisms, f"{cid}: MECHANISM {case.MECHANISM!r} not in mechanisms.json"
        name, bug, twin = case.METRIC
        assert name and bug is not None and twin is not None and bug != twin, cid
        assert "METRIC" in case.script(True) and "METRIC" in case.script(False), cid


@pytest.mark.slow
@pytest.mark.parametrize("cid", sorted(NEW))
def test_new_bug_changes_its_metric(cid: str):
    """Plain ``python`` (no overt): the bug moves the metric away from the twin's, in the recorded
    direction, by at least half the recorded gap."""
    from tests.wild.metrics import measure

    case = NEW[cid]
    _, rec_bug, rec_twin = case.METRIC
    bug, twin = measure(case, True), measure(case, False)
    gap = rec_twin - rec_bug
    assert (twin - bug) * gap > 0 and abs(twin - bug) >= abs(gap) / 2, (cid, bug, twin, case.METRIC)


def _pinned(cid: str, face: str) -> list[str]:
    """The finding judged true and unrelated to the bug that ``face`` gives on ``cid``'s correct twin, if any."""
    table = TWIN_FINDINGS if face == "lint" else RUN_TWIN_FINDINGS if face == "run" else {}
    return [table[cid]] if cid in table else []


def _dev_param(cid: str, face: str):
    marks = [pytest.mark.slow] if face == "run" else []
    return pytest.param(cid, face, id=f"{cid}-{face}", marks=marks)


def test_measured_rounds_are_in_the_default_selection():
    """Rounds seven to twenty-one were measured once (sessions 42 to 56): their halves are in the runner's default
    selection; a new round adds its halves to ``runner.UNMEASURED`` until the lead measures it, and no test
    runs an overt face on a half listed there."""
    from tests.wild.runner import UNMEASURED

    measured = {"dev7", "test7", "dev8", "test8", "dev9", "test9", "dev10", "test10", "dev11", "test11", "dev12",
                "test12", "dev13", "test13", "dev14", "test14", "dev15", "test15", "dev16", "test16",
                "dev17", "test17", "dev18", "test18", "dev19", "test19",
                "dev20", "test20", "dev21", "test21"}
    assert not measured & set(UNMEASURED)
    held = {cid for cid, c in CASES.items() if half(c) in UNMEASURED}
    assert not held & set(DEV_NEW) and not held & set(EXPECTED) and not held & set(TWIN_FINDINGS)


def test_round_five_twins_with_findings_are_the_judged_ones():
    """The test-half twins with findings judged true and unrelated (rounds five and seven) still give exactly
    their judged lint finding (a changed case or rule shows here)."""
    for cid, slug in TWIN_FINDINGS.items():
        twin = harness.RUNNERS["lint"](NEW[cid], False)
        assert sorted(set(twin.judged)) == [slug], (cid, twin)


@pytest.mark.parametrize(("cid", "face"), [_dev_param(c, f) for c in DEV_NEW for f in ("lint", "run")])
def test_dev_twin_quiet(cid: str, face: str):
    """The development halves' correct twins (rounds one, two and three) give no finding under ``overt lint`` /
    ``overt run``; the test halves' twins are measured once, by the lead."""
    twin = harness.RUNNERS[face](NEW[cid], False)
    pinned = _pinned(cid, face)  # true, unrelated to the bug
    assert sorted(set(twin.judged)) == pinned and not twin.error, f"{face} on {cid}'s correct twin: {twin}"


@pytest.mark.parametrize(("cid", "face"), [_param(c, f) for c, f in PAIRS])
def test_bug_caught_and_twin_quiet(cid: str, face: str):
    case = CASES[cid]
    run = harness.RUNNERS[face]
    bug = run(case, True)
    assert harness.caught(case, bug), f"{face} missed {cid}: {bug}"
    twin = run(case, False)
    pinned = _pinned(cid, face)  # true, unrelated to the bug
    assert sorted(set(twin.judged)) == pinned and not twin.error, f"{face} on {cid}'s correct twin: {twin}"
