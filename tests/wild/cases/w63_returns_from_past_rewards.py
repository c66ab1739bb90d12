"""Policy-gradient returns accumulated forward in time: the "return" of a step becomes the
discounted sum of the rewards *before* it, so a step is credited for what already happened and not
for what its action leads to.

Source: mohmdelsayed/streaming-drl#3 (https://github.com/mohmdelsayed/streaming-drl/issues/3),
"[Bug] episodic returns in stream td": "the return of a state is computed as the discounted sum of
past rewards, while it should be the discounted sum of future rewards"; the maintainer: "You are
indeed correct. This is a mistake."  Here REINFORCE learns an 8-step task whose single reward comes
at the end (the fraction of steps where the action matched a fixed pattern); the buggy returns
loop over the rewards forward, the twin's backward.

Metric: the greedy policy's reward (fraction of matched steps; plain ``python``, CPU, seed 0): bug
0.5, twin 1.0.
"""

REPORT = "N37"
MECHANISM = "returns-from-past-rewards"
SLUGS = ()
METRIC = ("greedy_reward", 0.5, 1.0)

_SCRIPT = '''
import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)
STEPS, GAMMA = 8, 0.99
PATTERN = torch.tensor([1, 0, 0, 1, 1, 0, 1, 0])


def episode_rewards(actions):
    """No reward until the last step, which pays the fraction of actions that matched."""
    rewards = torch.zeros(STEPS)
    rewards[-1] = (actions == PATTERN).float().mean()
    return rewards


def returns(rewards):
    out, running = torch.zeros(STEPS), 0.0
    __LOOP__
        running = rewards[t] + GAMMA * running
        out[t] = running
    return out


states = F.one_hot(torch.arange(STEPS), STEPS).float()
model = nn.Linear(STEPS, 2)
opt = torch.optim.Adam(model.parameters(), lr=0.05)
#@guard
for update in range(150):
    log_probs, rets = [], []
    for _ in range(16):
        dist = torch.distributions.Categorical(logits=model(states))
        actions = dist.sample()
        log_probs.append(dist.log_prob(actions))
        rets.append(returns(episode_rewards(actions)))
    log_probs, rets = torch.stack(log_probs), torch.stack(rets)
    advantage = rets - rets.mean(0)                                # per-step baseline
    loss = -(log_probs * advantage).sum(1).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
with torch.no_grad():
    greedy = model(states).argmax(1)
print(f"METRIC {(greedy == PATTERN).float().mean().item():.4f}")
'''


def script(bug: bool) -> str:
    loop = "for t in range(STEPS):                                     # forward: past rewards" if bug else \
        "for t in reversed(range(STEPS)):                           # backward: future rewards"
    return _SCRIPT.replace("__LOOP__", loop)
