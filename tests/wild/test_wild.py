"""The wild corpus in the default suite: each case's buggy script is caught by the face named
in ``EXPECTED`` and its correct twin gives no finding (timing findings aside, see
``harness.TIMING``).  ``python -m tests.wild.runner`` runs every face on every case."""

from __future__ import annotations

import pytest

from tests.wild import harness
from tests.wild.harness import case_id, cases

CASES = {case_id(c): c for c in cases()}

#: case -> the cheapest face that catches it (the runner reports every face)
EXPECTED = {
    "w01_functional_dropout": ("lint", "run", "engine"),
    "w02_dropout_training_true": ("lint", "run"),
    "w03_validation_no_eval_no_grad": ("lint", "run"),
    "w04_val_inside_train": ("engine", "doctor"),
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
    "w15_sorted_unshuffled": ("lint",),
    "w16_scheduler_per_batch": ("lint", "run"),
    "w17_batchnorm_last_batch": ("run",),
    "w18_nan_inputs": ("run",),
    "w19_set_epoch_missing": ("lint", "run"),
    "w20_mask_plain_attribute": ("run",),
    "w23_numpy_seed_workers": ("run",),
    "w24_accumulation_unscaled": ("lint",),
    "w25_retain_graph_loop": ("lint", "run"),
    "w26_no_grad_without_eval": ("lint", "run"),
}
SLOW_FACES = {"doctor", "engine"}
DISTRIBUTED = {cid for cid, c in CASES.items() if getattr(c, "WORLD", 1) > 1}

PAIRS = [(cid, face) for cid, faces in EXPECTED.items() for face in faces]


def _param(cid: str, face: str):
    slow = face in SLOW_FACES or cid in DISTRIBUTED
    return pytest.param(cid, face, id=f"{cid}-{face}", marks=[pytest.mark.slow] if slow else [])


@pytest.fixture(autouse=True)
def _one_thread(one_thread):
    """tests/conftest.py's ``one_thread`` for every test here."""


def test_every_case_cites_its_source_and_has_a_twin():
    assert len(CASES) >= 25
    for cid, case in CASES.items():
        doc = case.__doc__ or ""
        assert "http" in doc, f"{cid}: the docstring must cite the public report"
        assert case.SLUGS, cid
        assert case.script(True) != case.script(False), cid


@pytest.mark.parametrize(("cid", "face"), [_param(c, f) for c, f in PAIRS])
def test_bug_caught_and_twin_quiet(cid: str, face: str):
    case = CASES[cid]
    run = harness.RUNNERS[face]
    bug = run(case, True)
    assert harness.caught(case, bug), f"{face} missed {cid}: {bug}"
    twin = run(case, False)
    assert not twin.judged and not twin.error, f"{face} on {cid}'s correct twin: {twin}"
