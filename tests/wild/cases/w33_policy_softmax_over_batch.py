"""A REINFORCE policy whose network ends in ``nn.Softmax(dim=0)``: correct for the single state
the agent acts on, wrong for the batch of states the update replays, where the probabilities are
normalised across the batch instead of across the actions.

Source: DeepReinforcementLearning/DeepReinforcementLearningInAction#32
(https://github.com/DeepReinforcementLearning/DeepReinforcementLearningInAction/issues/32):
"softmax operation with dim=0 is only OK when the input is a 1 dimensional array. However, when
you give a batch input, then the probability will be computed along the row direction of the
batch matrix" (the book's ``pred_batch = model(state_batch)``).  Here: a contextual bandit on
digits (the action is the guessed class, reward 1 if right); the agent acts on one state at a
time and updates on the episode's batch.  The twin's softmax is over the last dimension.

Metric: greedy reward on the validation digits, acting one state at a time (plain ``python``,
CPU, seed 0): bug 0.5063, twin 0.6776.
"""

from tests.wild.cases.common import PRELUDE

REPORT = "N07"
MECHANISM = "softmax-over-batch"
SLUGS = ()
METRIC = ("greedy_reward", 0.5063, 0.6776)

_SCRIPT = PRELUDE + '''
model = nn.Sequential(nn.Linear(64, 64), nn.LeakyReLU(), nn.Linear(64, 10), nn.Softmax(dim={dim}))
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
Xtr, Ytr = X[:1400], Y[:1400]
for episode in range(200):
    idx = torch.randint(len(Xtr), (32,))
    states, actions, rewards = [], [], []
    with torch.no_grad():
        for i in idx:
            probs = model(Xtr[i])                           # one state: a 1-D input
            action = torch.multinomial(probs, 1).item()
            states.append(Xtr[i]); actions.append(action); rewards.append(float(action == Ytr[i].item()))
    state_batch = torch.stack(states)
    action_batch = torch.tensor(actions)
    reward_batch = torch.tensor(rewards)
    pred_batch = model(state_batch)                         # the update replays the batch
    prob_batch = pred_batch.gather(1, action_batch[:, None]).squeeze(1)
    loss = -(torch.log(prob_batch + 1e-8) * (reward_batch - reward_batch.mean())).sum()
    opt.zero_grad()
    loss.backward()
    opt.step()
with torch.no_grad():
    greedy = sum(int(model(x).argmax().item() == y.item()) for x, y in zip(X[1400:], Y[1400:]))
print(f"METRIC {{greedy / len(Y[1400:]):.4f}}")
'''


def script(bug: bool) -> str:
    return _SCRIPT.format(dim=0 if bug else -1)
