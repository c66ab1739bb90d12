"""A vectorised environment wrapper that keeps its observations in one buffer, updates it in place on
every step and returns the buffer itself: the learner's saved "last observation" is overwritten by the
next step, so every stored transition pairs an action and its reward with the following observation --
with no error.

Source: Farama-Foundation/SuperSuit#116 (https://github.com/Farama-Foundation/SuperSuit/pull/116), "Make
the SB3 wrappers return copies of buffers instead of the underlying buffers.": "these two wrappers
(pettingzoo_env_to_vec_env_v0 and concat_vec_envs_v0) maintain an internal observation buffer that gets
updated in-place. It's also returned by reference, which gets in the way in SB3. There, in one place of
the code, they keep a `self._last_obs` variable which should remain the same after the following
environment step is performed, but it gets updated because it points to said buffer. The effect of this
was that observations in evaluation were staggered by one with respect to the actions" (merged).  Here
16 contextual-bandit environments (a context of 4 features, 4 actions, reward 1 for the action a fixed
linear rule prefers) are stepped through such a wrapper by an epsilon-greedy learner that keeps
``last_obs`` the way SB3 does and fits a Q-network to the rewards of its stored transitions.  The buggy
wrapper returns ``self.buf``; the twin returns ``self.buf.copy()``.

Metric: mean reward of the greedy policy on 2000 fresh contexts (plain ``python``, CPU, seed 0): bug
0.3295, twin 0.956
"""

REPORT = "N175"
MECHANISM = "observation-buffer-returned-by-reference"
SLUGS = ()
METRIC = ("greedy_reward", 0.3295, 0.956)

_SCRIPT = '''
import numpy as np
import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)
rng = np.random.default_rng(0)
N_ENVS, D, A = 16, 4, 4
RULE = rng.normal(size=(D, A))


class ConcatVecEnv:
    """Steps N_ENVS one-step contextual bandits; observations live in one preallocated buffer."""

    def __init__(self):
        self.buf = np.zeros((N_ENVS, D), dtype=np.float32)

    def _fill(self):
        self.buf[:] = rng.normal(size=(N_ENVS, D))

    def reset(self):
        self._fill()
        return __RETURN__

    def step(self, actions):
        rewards = (np.argmax(self.buf @ RULE, axis=1) == actions).astype(np.float32)
        self._fill()
        return __RETURN__, rewards


q_net = nn.Sequential(nn.Linear(D, 64), nn.ReLU(), nn.Linear(64, A))
opt = torch.optim.Adam(q_net.parameters(), lr=3e-3)
env = ConcatVecEnv()
obs_buf, act_buf, rew_buf = [], [], []
last_obs = env.reset()
#@guard
for step in range(400):
    with torch.no_grad():
        greedy = q_net(torch.as_tensor(last_obs)).argmax(1).numpy()
    explore = rng.random(N_ENVS) < 0.3
    actions = np.where(explore, rng.integers(0, A, N_ENVS), greedy)
    new_obs, rewards = env.step(actions)
    obs_buf.append(last_obs)
    act_buf.append(actions)
    rew_buf.append(rewards)
    last_obs = new_obs
    idx = rng.integers(0, len(obs_buf), 8)
    obs = torch.as_tensor(np.concatenate([obs_buf[i] for i in idx]))
    act = torch.as_tensor(np.concatenate([act_buf[i] for i in idx]))
    rew = torch.as_tensor(np.concatenate([rew_buf[i] for i in idx]))
    q = q_net(obs).gather(1, act.long().unsqueeze(1)).squeeze(1)
    loss = F.mse_loss(q, rew)
    opt.zero_grad()
    loss.backward()
    opt.step()

contexts = rng.normal(size=(2000, D)).astype(np.float32)
with torch.no_grad():
    chosen = q_net(torch.as_tensor(contexts)).argmax(1).numpy()
print(f"METRIC {np.mean(chosen == np.argmax(contexts @ RULE, axis=1)):.4f}")
'''


def script(bug: bool) -> str:
    return _SCRIPT.replace("__RETURN__", "self.buf" if bug else "self.buf.copy()")
