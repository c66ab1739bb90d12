"""An actor-critic whose critic values are collected with ``.item()``: the value loss is built
from plain numbers, has no graph back to the critic, and the critic never learns while the run
looks normal (the actor's loss still trains).

Source: jsboige/CoursIA#15256 (https://github.com/jsboige/CoursIA/pull/15256, "PT-10 dead
critic -- value loss detached from the graph, critic never trained"): ``values.append(value.item())``
left ``v_loss`` with ``requires_grad=False`` and the critic head's weights strictly unchanged.
Here: a contextual bandit on digits (the action is the guessed class, reward 1 if right) with a
shared body, a policy head and a value head; the twin keeps the value tensors.

Metric: the critic's mean squared error against the greedy reward on the validation digits
(lower is better; plain ``python``, CPU, seed 0): bug 0.3828, twin 0.1121.
"""

from tests.wild.cases.common import PRELUDE

REPORT = "N22"
MECHANISM = "gradient-cut"
SLUGS = ("no-gradient",)
METRIC = ("critic_mse", 0.3828, 0.1121)

_SCRIPT = PRELUDE + '''
class ActorCritic(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(64, 64), nn.ReLU())
        self.policy = nn.Linear(64, 10)
        self.value = nn.Linear(64, 1)

    def forward(self, x):
        h = self.body(x)
        return F.log_softmax(self.policy(h), -1), self.value(h).squeeze(-1)


model = ActorCritic()
opt = torch.optim.Adam(model.parameters(), lr=5e-3)
Xtr, Ytr = X[:1400], Y[:1400]
for episode in range(150):
    idx = torch.randint(len(Xtr), (64,))
    log_probs, values, rewards = [], [], []
    for i in idx:
        logp, value = model(Xtr[i])
        action = torch.multinomial(logp.exp(), 1).item()
        log_probs.append(logp[action])
        values.append({value})
        rewards.append(float(action == Ytr[i].item()))
    log_probs = torch.stack(log_probs)
    values = {stack}
    returns = torch.tensor(rewards)
    advantage = returns - values.detach()
    policy_loss = -(log_probs * advantage).mean()
    value_loss = F.mse_loss(values, returns)
    opt.zero_grad()
    (policy_loss + value_loss).backward()
    opt.step()
with torch.no_grad():
    logp, value = model(X[1400:])
    reward = (logp.argmax(1) == Y[1400:]).float()
print("greedy reward", reward.mean().item())
print(f"METRIC {{F.mse_loss(value, reward).item():.4f}}")
'''


def script(bug: bool) -> str:
    if bug:
        return _SCRIPT.format(value="value.item()", stack="torch.tensor(values)")
    return _SCRIPT.format(value="value", stack="torch.stack(values)")
