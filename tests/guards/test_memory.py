"""Autograd graphs kept across steps."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch
import torch.nn.functional as F

from .helpers import batches, guarded, mlp, slugs


def _train_keeping(keep) -> list:
    """Ten guarded steps; ``keep(loss)`` after each; the findings."""
    model = mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    g = guarded(model, opt)
    for xb, yb in batches(32, 10):
        opt.zero_grad()
        loss = F.cross_entropy(model(xb), yb)
        loss.backward()
        opt.step()
        keep(loss)
    return g.report()


def test_graph_leak_losses_appended():
    history = []
    findings = _train_keeping(history.append)  # keeps every graph alive
    assert slugs(findings) == ["graph-leak"]
    assert "test_memory.py" in findings[0].where


def test_graph_leak_running_total():
    model = mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    g = guarded(model, opt)
    total = 0.0
    for xb, yb in batches(32, 10):
        opt.zero_grad()
        loss = F.cross_entropy(model(xb), yb)
        loss.backward()
        opt.step()
        total += loss
    assert slugs(g.report()) == ["graph-leak"]


def test_item_and_detach_are_quiet():
    model = mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    g = guarded(model, opt, check_every=2)
    history, total, prev = [], 0.0, None
    for xb, yb in batches(32, 12):
        opt.zero_grad()
        loss = F.cross_entropy(model(xb), yb)
        loss.backward()
        opt.step()
        history.append(loss.detach())
        total += loss.item()
        prev = loss  # one step of look-back is fine
    assert prev is not None and g.report() == []


def _loop(retain: bool, steps: int = 10):
    model = mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    g = guarded(model, opt)
    for xb, yb in batches(32, steps):
        opt.zero_grad()
        loss = F.cross_entropy(model(xb), yb)
        loss.backward(retain_graph=retain)
        opt.step()
    return g.report()


def test_retain_graph_in_loop():
    findings = _loop(retain=True)
    assert slugs(findings) == ["retain-graph-in-loop"]
    assert "Sequential" in findings[0].where and "helpers.py" not in findings[0].where
    assert "test_memory.py" in findings[0].where


def test_backward_without_retain_graph_is_quiet():
    assert _loop(retain=False) == []


def test_a_retained_graph_the_program_drops_before_the_step_is_quiet():
    """torchdiffeq's adjoint (its backward runs the model again and calls ``autograd.grad(...,
    retain_graph=True)`` on a graph it drops when the call returns): nothing of the program holds the
    graph at the optimizer step, only the check's own reference did, so nothing stays in memory and
    the check is quiet (it reported ``retain-graph-in-loop`` in runs where two checked steps watched the
    adjoint's forwards). The same flag with the graph still held by the program's variable at the step is
    reported (``test_retain_graph_in_loop``)."""
    model = mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    g = guarded(model, opt)
    for xb, yb in batches(32, 10):
        opt.zero_grad()
        loss = F.cross_entropy(model(xb), yb)
        loss.backward(retain_graph=True)
        del loss
        opt.step()
    assert g.report() == []


def test_two_backwards_through_one_graph_within_a_step_is_quiet():
    """A GAN-style second backward through a shared graph inside one step is legitimate."""
    model = mlp()
    head = torch.nn.Linear(10, 1)
    opt = torch.optim.SGD([*model.parameters(), *head.parameters()], lr=0.05)
    g = guarded([model, head], opt)
    for xb, yb in batches(32, 10):
        opt.zero_grad()
        out = model(xb)
        F.cross_entropy(out, yb).backward(retain_graph=True)
        head(out).pow(2).mean().backward()
        opt.step()
    assert g.report() == []


class _TrunkTwoHeads(torch.nn.Module):
    """A shared trunk, a class head and a code head: (logits, code)."""

    def __init__(self):
        super().__init__()
        self.trunk = torch.nn.Sequential(torch.nn.Linear(64, 32), torch.nn.ReLU())
        self.classes = torch.nn.Linear(32, 10)
        self.code = torch.nn.Linear(32, 4)

    def forward(self, x):
        h = self.trunk(x)
        return self.classes(h), self.code(h)


def _second_backward_through_the_code(second: bool) -> list:
    """The first loss on both heads, ``backward(retain_graph=True)``; then (``second``) a critic's loss on the
    code, not detached, backward again through the code head and the trunk only, both stepped together (as
    disentangling-vae's FactorVAE: the discriminator's loss back through the encoder after the VAE's).  The
    class head's part of the graph is reached by the first pass only and stays retained while ``logits`` is
    bound across the step."""
    model = _TrunkTwoHeads()
    critic = torch.nn.Linear(4, 2)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    opt_critic = torch.optim.Adam(critic.parameters(), lr=1e-3)
    g = guarded([model, critic], [opt, opt_critic])
    hits = 0
    for xb, yb in batches(32, 10):
        logits, code = model(xb)
        loss = F.cross_entropy(logits, yb) + 1e-3 * code.pow(2).mean()
        opt.zero_grad()
        loss.backward(retain_graph=True)
        if second:
            critic_loss = F.cross_entropy(critic(code), (yb % 2))
            opt_critic.zero_grad()
            critic_loss.backward()
            opt_critic.step()
        opt.step()
        hits += int((logits.argmax(1) == yb).sum())
    assert hits > 0
    return g.report()


def test_a_second_backward_through_part_of_the_graph_within_the_step_is_quiet():
    """disentangling-vae's FactorVAE (fresh8-dev, disvae-factor): ``vae_loss.backward(retain_graph=True)``, then the
    discriminator's loss on the VAE's latent sample (not detached) backward through the encoder: the flag is
    what that second pass needs.  The second pass frees the encoder's part; the decoder's, reached by the first
    pass only, stays while the outputs are bound, and the check read that as a needless flag
    (``retain-graph-in-loop``).  Two backward passes through one graph within a step now mean the flag was
    needed."""
    assert _second_backward_through_the_code(second=True) == []


def test_retain_graph_with_one_backward_on_the_two_heads_is_still_named():
    findings = _second_backward_through_the_code(second=False)
    assert slugs(findings) == ["retain-graph-in-loop"]
    assert "_TrunkTwoHeads" in findings[0].where


def test_a_compiled_graph_freed_by_backward_reads_as_freed():
    """A compiled graph's backward node raises on access to its freed saved tensors where an eager
    node gives None; the graph check took that for its own failure and switched itself off
    ("internal error in check GraphChecks", seen on an H200 with compile=true)."""
    from overt.guards.graphs import _saved_alive

    compiled = torch.compile(mlp(), backend="aot_eager")  # compiled autograd nodes without a C++ toolchain
    xb, yb = next(iter(batches(32, 1)))
    out = compiled(xb)
    assert _saved_alive(out.grad_fn) is True
    F.cross_entropy(out, yb).backward()
    assert _saved_alive(out.grad_fn) is False


def test_a_graph_held_only_by_garbage_in_a_reference_cycle_is_not_a_leak():
    """An output referenced only from a reference cycle (garbage the cyclic collector frees; dynamo's
    tracer leaves the frame it compiled in one) is not kept by the program: quiet, even while the
    automatic collector is off; a list that keeps the losses is still named."""
    import gc

    class Box:
        pass

    def run(keep: bool):
        history = []

        def boxed(loss):
            box = Box()
            box.me, box.loss = box, loss  # a cycle: freed only by gc
            if keep:
                history.append(box)
        return slugs(_train_keeping(boxed))

    was = gc.isenabled()
    gc.disable()
    try:
        assert run(keep=False) == []
        assert run(keep=True) == ["graph-leak"]
    finally:
        if was:
            gc.enable()


_PPO_LIKE = """
import torch
import torch.nn as nn
import torch.nn.functional as F
from sklearn.datasets import load_digits


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(64, 32)
        self.fc_pi = nn.Linear(32, 10)
        self.optimizer = torch.optim.Adam(self.parameters(), lr=1e-3)

    def pi(self, x):
        return F.softmax(self.fc_pi(F.relu(self.fc1(x))), dim=-1)


torch.manual_seed(0)
x, y = load_digits(return_X_y=True)
x, y = torch.tensor(x, dtype=torch.float32) / 16, torch.tensor(y)
model = Net()
kept = []
for start in range(0, 1600, 80):
    for t in range(20):  # the rollout: one sample at a time, gradients on
        prob = model.pi(x[start + t])
        a = prob.argmax().item()
        KEEP
    for k in range(3):  # K epochs over the batch while `prob` is still bound
        loss = F.nll_loss(torch.log(model.pi(x[start:start + 80])), y[start:start + 80])
        model.optimizer.zero_grad()
        loss.backward()
        model.optimizer.step()
"""


@pytest.mark.slow
def test_the_last_output_held_by_a_variable_across_steps_is_not_a_leak(tmp_path):
    """PPO (minimalRL's ppo.py) under ``overt run``: the rollout's last ``prob`` stays bound while
    the optimizer steps K epochs over the batch, then the next rollout replaces it: one graph alive
    at a time, memory does not grow: quiet (was an error, exit 1). Keeping every rollout output
    in a list is still a leak."""
    for keep_all in (False, True):
        path = tmp_path / f"ppo_like_{keep_all}.py"
        path.write_text(_PPO_LIKE.replace("KEEP", "kept.append(prob)" if keep_all else "pass"))
        proc = subprocess.run([sys.executable, "-m", "overt", "run", str(path)], capture_output=True,
                              text=True, timeout=240, cwd=tmp_path)
        assert ("graph-leak" in proc.stderr) == keep_all, (keep_all, proc.stderr[-2000:])


_LOCALS_SNAPSHOT = """
import torch
import torch.nn as nn
import torch.nn.functional as F
from sklearn.datasets import load_digits


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(64, 32)
        self.fc_pi = nn.Linear(32, 10)

    def forward(self, x):
        return F.softmax(self.fc_pi(F.relu(self.fc1(x))), dim=-1)


def main():
    torch.manual_seed(0)
    x, y = load_digits(return_X_y=True)
    x, y = torch.tensor(x, dtype=torch.float32) / 16, torch.tensor(y)
    model = Net()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    kept = []
    for episode in range(100):
        start = episode * 7 % 1700
        for t in range(5):  # acting: one sample at a time, gradients on
            prob = model(x[start + t])
            a = prob.argmax().item()
            KEEP
        if episode % 25 == 0:  # a log line from main's locals: a snapshot of them, prob included
            line = "episode {episode}: action {a}".format(**locals())
        for k in range(4):  # the updates, while `prob` is still bound
            loss = F.nll_loss(torch.log(model(x[start:start + 64])), y[start:start + 64])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()


main()
"""


@pytest.mark.slow
def test_an_output_held_only_by_a_stale_snapshot_of_the_loops_locals_is_not_a_leak(tmp_path):
    """fresh10's minimalrl-sac: the acting output of an episode long gone, kept only by the snapshot of
    main()'s locals that reading ``f_locals`` leaves on a running frame (before Python 3.13: ``locals()``
    here, a guard naming a variable there), was called a leak (an error, exit 1) although the loop holds one
    output at a time.  The snapshot is re-read before concluding: quiet.  Keeping every output in a list
    is still named."""
    for keep_all in (False, True):
        path = tmp_path / f"locals_snapshot_{keep_all}.py"
        path.write_text(_LOCALS_SNAPSHOT.replace("KEEP", "kept.append(prob)" if keep_all else "pass"))
        proc = subprocess.run([sys.executable, "-m", "overt", "run", str(path)], capture_output=True,
                              text=True, timeout=240, cwd=tmp_path)
        assert ("graph-leak" in proc.stderr) == keep_all, (keep_all, proc.stderr[-2000:])


def test_retained_graph_freed_by_the_next_assignment_is_named_at_its_own_call_without_growth():
    """A PPO-style loop: the model runs once on a rollout (a graph never backwarded) and again in the update, whose
    backward keeps its graph (retain_graph=True) until the next iteration's assignment frees it.  Reported at the
    update's call, with no claim that memory grows."""
    model = mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    g = guarded(model, opt)
    for xb, yb in batches(32, 10):
        rollout = model(xb).argmax(1)  # the rollout's call: its graph is never backwarded
        opt.zero_grad()
        loss = F.cross_entropy(model(xb), rollout)  # the update's call
        loss.backward(retain_graph=True)
        opt.step()
    findings = g.report()
    assert slugs(findings) == ["retain-graph-in-loop"]
    line = next(i for i, text in enumerate(open(__file__).read().splitlines(), 1) if "# the update's call" in text)
    assert f"test_memory.py:{line}" in findings[0].where, findings[0].where
    assert "grow" not in findings[0].message and "a step longer" in findings[0].message


class _ProbsAndLogits(torch.nn.Module):
    """A network that returns its probabilities beside its logits (pytorch-3dunet's ``return_logits=True``)."""

    def __init__(self):
        super().__init__()
        self.body = torch.nn.Sequential(torch.nn.Linear(64, 32), torch.nn.ReLU(), torch.nn.Linear(32, 10))

    def forward(self, x):
        logits = self.body(x)
        return torch.softmax(logits, 1), logits


def _probs_and_logits_loop(retain: bool) -> list:
    """The loss on the logits, the probabilities kept bound across the step for a metric (as a trainer's
    ``output, loss = self._forward_pass(...)``): the softmax node is never backwarded, so its saved result
    stays until ``output`` is next assigned, whatever the flag."""
    model = _ProbsAndLogits()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    g = guarded(model, opt)
    hits = 0
    for xb, yb in batches(32, 10):
        output, logits = model(xb)
        loss = F.cross_entropy(logits, yb)
        opt.zero_grad()
        loss.backward(retain_graph=retain)
        opt.step()
        hits += int((output.argmax(1) == yb).sum())
    assert hits > 0
    return g.report()


def test_an_output_beside_the_loss_that_backward_never_went_through_is_quiet():
    """pytorch-3dunet's trainer (fresh7-dev, unet2d-boundary): the model returns (sigmoid output, logits), the
    loss is on the logits, ``loss.backward()`` without any flag.  The check inspected the first output's node,
    the sigmoid, which no backward ever frees, and reported ``retain-graph-in-loop``; it now looks only at the
    output nodes backward went through."""
    assert _probs_and_logits_loop(retain=False) == []


def test_retain_graph_on_the_logits_beside_a_probabilities_output_is_still_named():
    findings = _probs_and_logits_loop(retain=True)
    assert slugs(findings) == ["retain-graph-in-loop"]
    assert "_ProbsAndLogits" in findings[0].where
