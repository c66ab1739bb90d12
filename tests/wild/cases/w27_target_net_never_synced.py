"""A DQN whose target network is never synced from the online network: the condition that
should copy the weights is never true, so every TD target comes from the initial random weights.

Source: shakedzy/tic_tac_toe#1 (https://github.com/shakedzy/tic_tac_toe/issues/1, "Network never
copied"): the copy condition tested a counter that never reached the trigger value, "so you never
ever copy the Q-Network to the Q-Target"; the author confirmed and fixed it.  Here: offline
Q-learning on a six-state corridor (walk right for reward 1, or quit for 0.3); the sync is meant
every 50 updates but tests a counter that only moves when new memories are stored (the buffer is
full), the twin tests the update counter.

Metric: undiscounted greedy return from the start state (plain ``python``, CPU, seed 0):
bug 0.3, twin 1.0.
"""

from tests.wild.cases.common import CORRIDOR

REPORT = "N01"
MECHANISM = "target-never-synced"
SLUGS = ()
METRIC = ("greedy_return", 0.3, 1.0)

_SCRIPT = CORRIDOR + '''
import copy

QUIT = 0.3
s, a, r, s2, done = corridor(QUIT)
q_net = nn.Sequential(nn.Linear(N_STATES, 32), nn.ReLU(), nn.Linear(32, 2))
target_net = copy.deepcopy(q_net)
opt = torch.optim.Adam(q_net.parameters(), lr=1e-2)
memory_counter = len(s)        # the replay buffer is full: nothing new is stored
learn_counter = 0
for step in range(1500):
    idx = torch.randint(len(s), (8,))
    with torch.no_grad():
        target = r[idx] + GAMMA * (1 - done[idx]) * target_net(one_hot(s2[idx])).max(1).values
    q = q_net(one_hot(s[idx])).gather(1, a[idx, None]).squeeze(1)
    loss = F.mse_loss(q, target)
    opt.zero_grad()
    loss.backward()
    opt.step()
    learn_counter += 1
    if {counter} % 50 == 0 and {counter} > len(s):
        target_net.load_state_dict(q_net.state_dict())
print("Q at the start state", q_net(one_hot(torch.tensor([0]))).tolist())
print(f"METRIC {{greedy_return(q_net, QUIT):.4f}}")
'''


def script(bug: bool) -> str:
    return _SCRIPT.format(counter="memory_counter" if bug else "learn_counter")
