"""The entropy bonus of a policy-gradient loss added with the wrong sign: ``loss = pg_loss + beta *
entropy`` minimises the policy's entropy instead of maximising it, so the policy turns
deterministic on whatever it happened to prefer early and stops exploring.

Source: MrSyee/pg-is-all-you-need#37 (https://github.com/MrSyee/pg-is-all-you-need/issues/37), "sign
of the entropy": "`policy_loss += self.entropy_weight * -log_prob  # entropy maximization` ... since
we are maximizing the entropy, in the loss, we shall minimize - H(p), so I guess the negative sign
should be removed? I tried out this version and it significantly outperforms the current version";
also rlworkgroup/garage#628 (maintainer: "you are correct that there should be a negative sign") and
nebuly-ai/optimate#250 ("fix the sign error for maximizing entropy bonus").  The report's term is a
one-sample estimate (``-log_prob`` of the sampled action), whose gradient for a sampled,
non-reparameterised action is zero in expectation; the reproduction uses the exact entropy
(``dist.entropy()``), with which the sign has the effect the reports describe.  The task: a
contextual bandit on digits (the state is a digit, the ten actions are guesses, reward 1 for the
right one), REINFORCE with a mean-reward baseline and ``beta = 0.1``; the twin subtracts the bonus.

Metric: greedy reward on the validation digits (plain ``python``, CPU, seed 0): bug 0.2015, twin 0.8035.
"""

from tests.wild.cases.common import PRELUDE

REPORT = "N60"
MECHANISM = "entropy-bonus-sign"
SLUGS = ()
METRIC = ("greedy_val_reward", 0.2015, 0.8035)

_SCRIPT = PRELUDE + '''
BETA = 0.1
policy = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10))
opt = torch.optim.Adam(policy.parameters(), lr=1e-2)
model = policy
#@guard
loader = DataLoader(train_ds, batch_size=64, shuffle=True)
for epoch in range(4):
    for states, answers in loader:
        dist = torch.distributions.Categorical(logits=policy(states))
        actions = dist.sample()
        rewards = (actions == answers).float()
        pg_loss = -((rewards - rewards.mean()) * dist.log_prob(actions)).mean()
        loss = pg_loss __SIGN__ BETA * dist.entropy().mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    print(f"epoch {epoch}: mean reward {rewards.mean().item():.3f}, entropy {dist.entropy().mean().item():.3f}")

policy.eval()
with torch.no_grad():
    reward = (policy(X[1400:]).argmax(1) == Y[1400:]).float().mean().item()
print(f"METRIC {reward:.4f}")
'''


def script(bug: bool) -> str:
    return _SCRIPT.replace("__SIGN__", "+" if bug else "-")
