"""A group-mean baseline over a group of one: GRPO-style advantages subtract the mean reward of the completions
sampled for the same prompt, and with one completion per prompt that mean is the reward itself, so every
advantage is zero and the policy gradient is zero -- training runs, the loss is logged, and nothing is learned.

Source: OpenRLHF/OpenRLHF#1250 (https://github.com/OpenRLHF/OpenRLHF/pull/1250), "Fix two latent bugs: dr_grpo n=1
guard and masked_normalize broadcast": "dr_grpo was missing from the n_samples_per_prompt > 1 assertion. Like
reinforce_baseline/group_norm, dr_grpo subtracts the per-prompt group mean from rewards (experience_maker), so
with n_samples_per_prompt == 1 the group mean equals the single reward and every advantage collapses to 0 --
training silently does nothing" (merged). Here a policy over the ten digit classes is trained as a one-step
bandit (a prompt is a digit image, a completion a sampled class, the reward 1 when it is the label) with the
Dr. GRPO advantage ``reward - group mean``; the buggy run samples one completion per prompt, the twin four
(the guard's requirement), each over the same number of completions per step. The reproduction replaces the
repository's language models and reward models by an MLP on digits.

Metric: greedy test accuracy (plain ``python``, CPU, seed 0): bug 0.1008, twin 0.8514
"""

from tests.wild.cases.common import PRELUDE

REPORT = "N415"
MECHANISM = "group-baseline-over-group-of-one"
SLUGS = ()
METRIC = ("test_accuracy", 0.1008, 0.8514)

_SCRIPT = PRELUDE + '''

__SAMPLES__
COMPLETIONS_PER_STEP = 128
prompts_per_step = COMPLETIONS_PER_STEP // n_samples_per_prompt

model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
#@guard
g = torch.Generator().manual_seed(0)
for step in range(400):
    idx = torch.randint(0, 1400, (prompts_per_step,), generator=g)
    prompts = X[idx].repeat_interleave(n_samples_per_prompt, dim=0)
    answers = Y[idx].repeat_interleave(n_samples_per_prompt, dim=0)
    logp_all = F.log_softmax(model(prompts), dim=-1)
    with torch.no_grad():
        actions = torch.multinomial(logp_all.exp(), 1).squeeze(1)
    rewards = (actions == answers).float()
    group = rewards.view(-1, n_samples_per_prompt)
    advantages = (group - group.mean(dim=1, keepdim=True)).view(-1)
    logp = logp_all.gather(1, actions[:, None]).squeeze(1)
    loss = -(advantages * logp).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
model.eval()
with torch.no_grad():
    acc = (model(X[1400:]).argmax(1) == Y[1400:]).float().mean().item()
print(f"METRIC {acc:.4f}")
'''

_BUG = "n_samples_per_prompt = 1"
_FIX = "n_samples_per_prompt = 4"


def script(bug: bool) -> str:
    return _SCRIPT.replace("__SAMPLES__", _BUG if bug else _FIX)
