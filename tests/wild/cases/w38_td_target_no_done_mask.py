"""TD targets that bootstrap through terminal transitions: without the done mask, an episode's
last step is credited with the value of the next episode's start state.

Source: navneet-nmk/pytorch-rl#2 (https://github.com/navneet-nmk/pytorch-rl/issues/2): "Why is
done not being used in calculating the target Q-values ... Shouldn't it be used as a mask to make
sure the qvalue of this state is set to just R" (seungeunrho/minimalRL#21 fixed the same in
DDPG).  Here: offline Q-learning on a six-state corridor where walking to the end pays 1 and
quitting pays 0.3; an auto-resetting environment reports the start state after a terminal step,
so quitting looks like "0.3 and start again" forever.  The twin multiplies the bootstrap by
``1 - done``.

Metric: undiscounted greedy return from the start state (plain ``python``, CPU, seed 0):
bug 0.3, twin 1.0.
"""

from tests.wild.cases.common import CORRIDOR

REPORT = "N12"
MECHANISM = "bootstrap-past-terminal"
SLUGS = ()
METRIC = ("greedy_return", 0.3, 1.0)

_SCRIPT = CORRIDOR + '''
import copy

QUIT = 0.3
s, a, r, s2, done = corridor(QUIT)
q_net = nn.Sequential(nn.Linear(N_STATES, 32), nn.ReLU(), nn.Linear(32, 2))
target_net = copy.deepcopy(q_net)
opt = torch.optim.Adam(q_net.parameters(), lr=1e-2)
for step in range(2000):
    idx = torch.randint(len(s), (8,))
    with torch.no_grad():
        target = r[idx] + GAMMA * {mask}target_net(one_hot(s2[idx])).max(1).values
    q = q_net(one_hot(s[idx])).gather(1, a[idx, None]).squeeze(1)
    loss = F.mse_loss(q, target)
    opt.zero_grad()
    loss.backward()
    opt.step()
    if step % 50 == 0:
        target_net.load_state_dict(q_net.state_dict())
print("Q at the start state", q_net(one_hot(torch.tensor([0]))).tolist())
print(f"METRIC {{greedy_return(q_net, QUIT):.4f}}")
'''


def script(bug: bool) -> str:
    return _SCRIPT.format(mask="" if bug else "(1 - done[idx]) * ")
