"""A reward read against one character of the answer: the answers are strings, one per prompt, and indexing
``answers[b][g]`` (prompt ``b``, generation ``g``) takes the ``g``-th character of prompt ``b``'s answer instead
of the answer, so a completion is compared with a single letter and is never rewarded for being right --
nothing fails, the rewards are all zero and the policy learns nothing.

Source: meta-pytorch/torchtune#2934 (https://github.com/meta-pytorch/torchtune/pull/2934), "Fix distributed GRPO
Recipe", among its changes: "Fix reward indexing: Correct the answer indexing in batched_rewards function from
answers[b][g] to answers[b]" (merged). Here a policy over the ten digit classes is trained as a one-step bandit
with GRPO (three completions per prompt, the group-normalised reward as advantage); a completion is the name of a
class (``"zero"`` ... ``"nine"``) and the reward is 1 when it equals the prompt's answer string, read as
``answers[b][g]`` in the buggy run and ``answers[b]`` in the twin. The reproduction replaces the recipe's language
model and math answers by an MLP on digits and class names.

Metric: greedy test accuracy (plain ``python``, CPU, seed 0): bug 0.1008, twin 0.7733
"""

from tests.wild.cases.common import PRELUDE

REPORT = "N428"
MECHANISM = "reward-reads-character-of-answer"
SLUGS = ()
METRIC = ("test_accuracy", 0.1008, 0.7733)

_SCRIPT = PRELUDE + '''

NAMES = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"]
G = 3


def batched_rewards(completions, answers):
    rewards = torch.zeros(len(answers), G)
    for b in range(len(answers)):
        for g in range(G):
            __ANSWER__
            rewards[b, g] = float(completions[b][g] == answer)
    return rewards


model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
#@guard
gen = torch.Generator().manual_seed(0)
for step in range(400):
    idx = torch.randint(0, 1400, (32,), generator=gen)
    answers = [NAMES[int(y)] for y in Y[idx]]
    logp_all = F.log_softmax(model(X[idx]), dim=-1)
    with torch.no_grad():
        actions = torch.multinomial(logp_all.exp(), G, replacement=True)
    completions = [[NAMES[int(a)] for a in row] for row in actions]
    rewards = batched_rewards(completions, answers)
    advantages = (rewards - rewards.mean(1, keepdim=True)) / (rewards.std(1, keepdim=True) + 1e-4)
    logp = logp_all.gather(1, actions)
    loss = -(advantages * logp).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
model.eval()
with torch.no_grad():
    acc = (model(X[1400:]).argmax(1) == Y[1400:]).float().mean().item()
print(f"METRIC {acc:.4f}")
'''

_BUG = "answer = answers[b][g]"
_FIX = "answer = answers[b]"


def script(bug: bool) -> str:
    return _SCRIPT.replace("__ANSWER__", _BUG if bug else _FIX)
