"""Inline bootstrapped targets (issue 33, session 52, branch rl17): ``targets-off-recursion`` for a TD target that
adds the next value undiscounted (overt/guards/bootshift.py, w360) and ``stop-gradient-missing`` for a critic loss
differentiated through its bootstrapped target (overt/guards/tdgrad.py, w193).  Planted bugs of other forms than
the cases' (a DQN agent's method reading ``self.gamma`` with episode ends and a target network called with
gradients and detached; a TD(0) critic regressed with ``F.mse_loss`` on ``rewards + gamma * values[1:]``), each
with its correct twin, on a contextual bandit over digits; correct programs near the premises stay quiet (an
undiscounted episodic target with ``gamma = 1``, a mean-teacher consistency loss with a ``gamma`` in reach, a
pairwise squared margin between two values)."""

from __future__ import annotations

from tests.guards.helpers import run_script_probe as _run
from tests.guards.helpers import slug_set as _slugs

HEAD = '''
import copy
import torch
from sklearn.datasets import load_digits
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)
d = load_digits()
x = torch.tensor(d.data, dtype=torch.float32) / 16
y = torch.tensor(d.target)
'''

DQN = '''
class Agent:
    def __init__(self, gamma):
        self.q = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10))
        self.target = copy.deepcopy(self.q)
        self.opt = torch.optim.Adam(self.q.parameters(), lr=1e-2)
        self.gamma = gamma

    def update(self, s, a, r, s2, notdone):
        {next_q}
        target = {target}
        q = self.q(s).gather(1, a[:, None]).squeeze(1)
        loss = F.smooth_l1_loss(q, target)
        self.opt.zero_grad()
        loss.backward()
        self.opt.step()


agent = Agent({gamma})
for step in range(80):
    i = (step * 20) % 1600
    s, s2 = x[i:i + 32], x[i + 1:i + 33]
    a = torch.randint(0, 10, (32,))
    r = (a == y[i:i + 32]).float()
    notdone = (torch.arange(32) % 7 != 6).float()
    agent.update(s, a, r, s2, notdone)
    if step % 10 == 9:
        agent.target.load_state_dict(agent.q.state_dict())
open(__file__ + ".done", "w").write("ran to its end")
'''
NO_GRAD = '''with torch.no_grad():
            q2 = self.target(s2).max(1).values'''
DETACHED = "q2 = self.target(s2).max(1)[0].detach()"


def _dqn(target, next_q=NO_GRAD, gamma="0.95"):
    return HEAD + DQN.format(target=target, next_q=next_q, gamma=gamma)


def _ran(tmp_path) -> bool:
    done = tmp_path / "train.py.done"
    ran = done.exists()
    if ran:
        done.unlink()
    return ran


def test_a_dqn_target_that_adds_the_next_value_is_named_and_its_twin_is_quiet(tmp_path):
    findings = _run(tmp_path, _dqn("r + self.gamma * notdone + q2"), head="")
    assert _slugs(findings) == ["targets-off-recursion"], findings
    msg = findings[0]["message"]
    assert "does not discount them" in msg and "self.gamma = 0.95" in msg and "F.smooth_l1_loss" in msg, msg
    assert _run(tmp_path, _dqn("r + self.gamma * notdone * q2"), head="") == [] and _ran(tmp_path)


def test_a_target_network_called_with_gradients_and_detached_is_followed(tmp_path):
    findings = _run(tmp_path, _dqn("r + self.gamma + q2", next_q=DETACHED), head="")
    assert _slugs(findings) == ["targets-off-recursion"], findings
    assert _run(tmp_path, _dqn("r + self.gamma * notdone * q2", next_q=DETACHED), head="") == [] and _ran(tmp_path)


def test_an_undiscounted_episodic_target_is_left_alone(tmp_path):
    # gamma 1 by design: the premise (a discount below 1 that the target does not apply) cannot be proven; the
    # target written with every transition going on, too
    assert _run(tmp_path, _dqn("r + self.gamma * q2", gamma="1.0"), head="") == [] and _ran(tmp_path)


MEAN_TEACHER = '''
student = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10))
teacher = copy.deepcopy(student)
opt = torch.optim.Adam(student.parameters(), lr=1e-2)
gamma = 0.99  # the teacher's averaging rate
for step in range(30):
    i = (step * 32) % 1600
    xb = x[i:i + 32]
    with torch.no_grad():
        t = teacher(xb + 0.05 * torch.randn_like(xb))
    out = student(xb + 0.05 * torch.randn_like(xb))
    loss = F.cross_entropy(out, y[i:i + 32]) + F.mse_loss(out, t)
    opt.zero_grad()
    loss.backward()
    opt.step()
    with torch.no_grad():
        for p, tp in zip(student.parameters(), teacher.parameters()):
            tp.mul_(gamma).add_((1 - gamma) * p)
open(__file__ + ".done", "w").write("ran to its end")
'''


def test_a_mean_teacher_consistency_target_is_no_bootstrap(tmp_path):
    # the target is the teacher's output itself (it moves with it one for one) but has no term of its own
    assert _run(tmp_path, HEAD + MEAN_TEACHER, head="") == [] and _ran(tmp_path)


CRITIC = '''
critic = nn.Sequential(nn.Linear(64, 32), nn.Tanh(), nn.Linear(32, 1))
opt = torch.optim.Adam(critic.parameters(), lr=1e-2)
gamma = 0.9
for step in range(30):
    i = (step * 33) % 1600
    states = x[i:i + 33]  # 33 states of one trajectory over the digits
    rewards = (y[i:i + 32] == y[i + 1:i + 33]).float() + 0.1 * y[i:i + 32].float()
    values = critic(states).squeeze(-1)
    loss = {loss}
    opt.zero_grad()
    loss.backward()
    opt.step()
open(__file__ + ".done", "w").write("ran to its end")
'''


def test_a_critic_regressed_through_its_bootstrapped_target_is_named_and_its_twin_is_quiet(tmp_path):
    findings = _run(tmp_path, HEAD + CRITIC.format(loss="F.mse_loss(values[:-1], rewards + gamma * values[1:])"),
                    head="")
    assert _slugs(findings) == ["stop-gradient-missing"], findings
    assert "differentiates through its target" in findings[0]["message"], findings[0]["message"]
    twin = CRITIC.format(loss="F.mse_loss(values[:-1], (rewards + gamma * values[1:]).detach())")
    assert _run(tmp_path, HEAD + twin, head="") == [] and _ran(tmp_path)


def test_a_pairwise_squared_margin_between_values_is_no_bootstrap(tmp_path):
    # both sides are predictions, weighted alike: no discounted bootstrap, silent
    margin = CRITIC.format(loss="((values[:-1] - values[1:] - (rewards - 0.5)) ** 2).mean()")
    assert _run(tmp_path, HEAD + margin, head="") == [] and _ran(tmp_path)


def test_a_guarded_run_leaves_the_function_mode_stack_as_it_found_it():
    """A forward under no_grad in training mode that runs inside another check's probe (input-columns-unread re-runs
    the model under a mode of its own, w100's twin) must not get the inline-target mode pushed above the probe's:
    the probe's ``with`` would pop it and leave its own mode on the stack for the rest of the process (the next
    guarded program's axes window then saw nothing: w137 missed in the wild suite, session 52)."""
    import glob
    import importlib
    import os

    import torch

    from tests.wild import harness

    path = glob.glob(os.path.join(os.path.dirname(__file__), "..", "wild", "cases", "w100_*.py"))[0]
    case = importlib.import_module("tests.wild.cases." + os.path.basename(path)[:-3])
    before = torch._C._len_torch_function_stack()
    harness.run_face(case, False)
    assert torch._C._len_torch_function_stack() == before
