"""A reverse return scan over a multi-turn response that multiplies the running return by the response mask: the
mask is 0 on the tool-output (observation) tokens, so the running return is reset there and the reward at the end
never reaches the action tokens before an observation -- the first turn gets no credit and is not learned, with no
error.

Source: verl-project/verl#7300 (https://github.com/verl-project/verl/pull/7300), REINFORCE++ returns: the scan did
``running_return = running_return * response_mask[:, t]``, which zeroes the return at observation tokens so that
rewards never propagate to earlier action tokens (merged, fixes #7278). Here a policy answers a prompt in two
turns: an action token, two observation tokens written by a tool, and a second action token; the reward (0.5 per
correct action) is placed on the last token, returns are scanned backwards with gamma 1 and whitened over the
action tokens as in REINFORCE++; the bug resets the running return at the observation tokens, the twin carries it
across them. verl's language model and rollout workers are replaced by two small policy heads over a one-hot
prompt.

Metric: expected reward of the trained policy (plain ``python``, CPU, seed 0): bug 0.5317, twin 0.9919
"""

REPORT = "N298"
MECHANISM = "return-scan-reset-by-observation-mask"
SLUGS = ()
METRIC = ("expected_reward", 0.5317, 0.9919)

_SCRIPT = '''import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)
PROMPTS, ACTIONS, N = 8, 6, 256
answer1 = torch.randint(0, ACTIONS, (PROMPTS,))
answer2 = torch.randint(0, ACTIONS, (PROMPTS,))
MASK = torch.tensor([1.0, 0.0, 0.0, 1.0])


class Policy(nn.Module):
    def __init__(self):
        super().__init__()
        self.turn1 = nn.Linear(PROMPTS, ACTIONS)
        self.turn2 = nn.Linear(PROMPTS + ACTIONS, ACTIONS)

    def forward(self, prompt, a1=None):
        x = F.one_hot(prompt, PROMPTS).float()
        if a1 is None:
            return self.turn1(x)
        return self.turn2(torch.cat([x, F.one_hot(a1, ACTIONS).float()], 1))


def returns_of(rewards):
    out = torch.zeros_like(rewards)
    running = torch.zeros(rewards.shape[0])
    for t in reversed(range(rewards.shape[1])):
        __SCAN__
    return out


model = Policy()
opt = torch.optim.Adam(model.parameters(), lr=3e-2)
#@guard
for step in range(150):
    prompt = torch.randint(0, PROMPTS, (N,))
    d1 = torch.distributions.Categorical(logits=model(prompt))
    a1 = d1.sample()
    d2 = torch.distributions.Categorical(logits=model(prompt, a1))
    a2 = d2.sample()
    rewards = torch.zeros(N, 4)
    rewards[:, 3] = 0.5 * (a1 == answer1[prompt]).float() + 0.5 * (a2 == answer2[prompt]).float()
    ret = returns_of(rewards)[:, [0, 3]]
    adv = (ret - ret.mean()) / (ret.std() + 1e-8)
    logp = torch.stack([d1.log_prob(a1), d2.log_prob(a2)], 1)
    loss = -(adv * logp).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
with torch.no_grad():
    prompt = torch.arange(PROMPTS).repeat_interleave(ACTIONS)
    p1 = F.softmax(model(torch.arange(PROMPTS)), 1)[torch.arange(PROMPTS), answer1]
    a1 = torch.arange(ACTIONS).repeat(PROMPTS)
    p2 = F.softmax(model(prompt, a1), 1)[torch.arange(len(prompt)), answer2[prompt]].view(PROMPTS, ACTIONS)
    q1 = F.softmax(model(torch.arange(PROMPTS)), 1)
    reward = 0.5 * p1 + 0.5 * (q1 * p2).sum(1)
print(f"METRIC {reward.mean().item():.4f}")
'''


def script(bug: bool) -> str:
    return _SCRIPT.replace('__SCAN__', _BUG if bug else _TWIN)


_BUG = """running = rewards[:, t] + running
        out[:, t] = running
        running = running * MASK[t]"""
_TWIN = """running = rewards[:, t] + running
        out[:, t] = running"""
