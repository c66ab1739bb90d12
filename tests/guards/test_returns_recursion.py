"""targets-off-recursion (overt/guards/returndefs.py, returnprobe.py; issue 33, session 49, w228 and w313): a
function named after returns, advantages or value targets is recomputed by their recursion on its own call's
rewards, values and episode-end flags, under every accepted convention.  Planted bugs of other forms than the
cases' (flags ignored, a carry seeded with the bootstrap on a (T, N) rollout of digits), each with its correct twin,
and correct variants (CleanRL's flags of the next observation with a next_done, masks, standardised advantages,
time on the second axis, numpy, Pong's game boundaries, TD(0) targets) stay quiet; so do calls whose arguments the
definition cannot read (an n of n-step returns, a truncation array)."""

from __future__ import annotations

import numpy as np
import torch

from overt.guards import returndefs
from tests.guards.helpers import run_script_probe as _run
from tests.guards.helpers import slug_set as _slugs

ROLLOUT = '''
critic = nn.Linear(64, 1)
opt2 = torch.optim.Adam(list(model.parameters()) + list(critic.parameters()), lr=1e-2)
for step in range(8):
    i = (step * 72) % 1200
    xb = x[i:i + 64].reshape(8, 8, 64)  # 8 steps of 8 environments: a contextual bandit on digits
    yb = y[i:i + 64].reshape(8, 8)
    dist = torch.distributions.Categorical(logits=model(xb))
    a = dist.sample()
    rewards = (a == yb).float()
    dones = torch.zeros(8, 8)
    dones[3, ::2] = 1.0
    dones[6, 1::3] = 1.0
    values = critic(xb).squeeze(-1)
    with torch.no_grad():
        next_value = critic(x[i + 64:i + 72]).squeeze(-1)
        adv, ret = {call}
    loss = -(dist.log_prob(a) * adv).mean() + ((values - ret) ** 2).mean()
    opt2.zero_grad()
    loss.backward()
    opt2.step()
open(__file__ + ".done", "w").write("ran to its end")
'''

GAE = '''
def compute_gae(rewards, values, dones, next_value, gamma=0.9, lam=0.8):
    adv = torch.zeros_like(rewards)
    carry = {seed}
    for t in reversed(range(rewards.shape[0])):
        nv = next_value if t == rewards.shape[0] - 1 else values[t + 1]
        nonterminal = {nonterminal}
        delta = rewards[t] + gamma * nv * nonterminal - values[t]
        carry = delta + gamma * lam * nonterminal * carry
        adv[t] = carry
    return adv, adv + values
'''
CALL = "compute_gae(rewards, values.detach(), dones, next_value)"


def _ran(tmp_path) -> bool:
    done = tmp_path / "train.py.done"
    ran = done.exists()
    if ran:
        done.unlink()
    return ran


def _gae(seed="torch.zeros(rewards.shape[1])", nonterminal="1.0 - dones[t]"):
    return GAE.format(seed=seed, nonterminal=nonterminal) + ROLLOUT.format(call=CALL)


def test_a_gae_whose_carry_starts_at_the_bootstrap_is_named_and_its_twin_is_quiet(tmp_path):
    findings = _run(tmp_path, _gae(seed="next_value.clone()"))
    assert _slugs(findings) == ["targets-off-recursion"], findings
    assert "counted twice" in findings[0]["message"] and "compute_gae()" in findings[0]["message"], findings
    assert _run(tmp_path, _gae()) == [] and _ran(tmp_path)


def test_a_gae_that_ignores_its_done_flags_is_named(tmp_path):
    findings = _run(tmp_path, _gae(nonterminal="1.0"))
    assert _slugs(findings) == ["targets-off-recursion"], findings
    assert "ignores the episode-end flags" in findings[0]["message"], findings[0]["message"]


CONVENTIONS = '''
def gae_cleanrl(rewards, values, dones, next_value, next_done, gamma, gae_lambda):
    # CleanRL: dones[t] says observation t started a new episode; the last step's flag is next_done
    advantages = torch.zeros_like(rewards)
    lastgaelam = 0
    for t in reversed(range(rewards.shape[0])):
        if t == rewards.shape[0] - 1:
            nextnonterminal, nextvalues = 1.0 - next_done, next_value
        else:
            nextnonterminal, nextvalues = 1.0 - dones[t + 1], values[t + 1]
        delta = rewards[t] + gamma * nextvalues * nextnonterminal - values[t]
        advantages[t] = lastgaelam = delta + gamma * gae_lambda * nextnonterminal * lastgaelam
    return advantages, advantages + values


def compute_advantages(rewards, values, masks, gamma=0.9, lam=0.8):
    # numpy arrays with the environments first, masks (1 = goes on), values with the bootstrap as their last step,
    # standardised
    r, v, m = rewards, values, masks
    adv = np.zeros_like(r)
    carry = 0.0
    for t in reversed(range(r.shape[1])):
        delta = r[:, t] + gamma * m[:, t] * v[:, t + 1] - v[:, t]
        carry = delta + gamma * lam * m[:, t] * carry
        adv[:, t] = carry
    return (adv - adv.mean()) / (adv.std() + 1e-8)


def td_targets(rewards, values, dones, gamma):
    return rewards + gamma * values[1:] * (1 - dones)


def discount_rewards(rewards, gamma=0.99):
    # Pong: a point ends a game, so the running sum starts again at every non-zero reward
    out = np.zeros_like(rewards)
    running = 0.0
    for t in reversed(range(len(rewards))):
        if rewards[t] != 0:
            running = 0.0
        running = running * gamma + rewards[t]
        out[t] = running
    return out


def both(rewards, values, dones, next_value):
    with_boot = torch.cat([values, next_value[None]])
    adv = gae_cleanrl(rewards, values, dones, next_value, torch.zeros(8), 0.9, 0.8)[0]
    adv = adv + torch.as_tensor(compute_advantages(rewards.T.numpy(), with_boot.T.numpy(), (1 - dones).T.numpy())).T
    ret = td_targets(rewards, with_boot, dones, 0.9)
    pong = torch.as_tensor(discount_rewards(rewards[:, 0].numpy() * 2 - 1)).float()
    return adv + 0 * pong[:, None], ret
'''
CONVENTION_CALLS = "both(rewards, values.detach(), dones, next_value)"


def test_accepted_conventions_are_left_alone(tmp_path):
    assert _run(tmp_path, CONVENTIONS + ROLLOUT.format(call=CONVENTION_CALLS)) == [] and _ran(tmp_path)


def test_each_convention_agrees_with_the_definition():
    """The functions of the quiet script above, each called once here: every one is read and agrees (none is
    quiet only because its arguments were not understood)."""
    ns = {"np": np, "torch": torch}
    exec(CONVENTIONS, ns)  # noqa: S102  the test's own source
    torch.manual_seed(0)
    rewards, values, next_value = (torch.rand(8, 8) < 0.3).float(), torch.rand(8, 8), torch.rand(8)
    dones = torch.zeros(8, 8)
    dones[3, ::2] = 1.0
    with_boot = torch.cat([values, next_value[None]])
    calls = [
        ("gae_cleanrl", dict(rewards=rewards, values=values, dones=dones, next_value=next_value,
                             next_done=torch.zeros(8), gamma=0.9, gae_lambda=0.8)),
        ("compute_advantages", dict(rewards=rewards.T.numpy(), values=with_boot.T.numpy(),
                                    masks=(1 - dones).T.numpy(), gamma=0.9, lam=0.8)),
        ("td_targets", dict(rewards=rewards, values=with_boot, dones=dones, gamma=0.9)),
        ("discount_rewards", dict(rewards=rewards[:, 0].numpy() * 2 - 1, gamma=0.99)),
    ]
    for name, bound in calls:
        fn = ns[name]
        found = returndefs.check(fn, name, bound, fn(**bound), frozenset(name.split("_")))
        assert found is not None and found[0] == "agree", (name, found)


def _check(fn, result, **bound):
    return returndefs.check(fn, fn.__name__, bound, result, frozenset(fn.__name__.split("_")))


def test_arguments_the_definition_cannot_read_keep_it_silent():
    rewards, values = torch.rand(6, 3), torch.rand(6, 3)

    def nstep_returns(rewards, values, gamma, n):
        return rewards

    def compute_returns(rewards, values, truncateds, gamma):
        return rewards

    assert _check(nstep_returns, rewards, rewards=rewards, values=values, gamma=0.9, n=4) is None
    assert _check(compute_returns, rewards, rewards=rewards, values=values, truncateds=torch.zeros(6, 3),
                  gamma=0.9) is None


def test_returns_accumulated_forward_are_named_by_their_cause():
    rewards = np.array([0.0, 1.0, 0.0, 2.0, 1.0])

    def discounted_returns(rewards, gamma):
        out, g = [], 0.0
        for r in rewards:
            g = r + gamma * g
            out.append(g)
        return out

    found = _check(discounted_returns, discounted_returns(rewards, 0.9), rewards=rewards, gamma=0.9)
    assert found is not None and found[0] == "differ" and "forward in time" in found[1], found
    correct = [sum(0.9 ** k * r for k, r in enumerate(rewards[t:])) for t in range(5)]
    assert _check(discounted_returns, correct, rewards=rewards, gamma=0.9)[0] == "agree"


def test_a_padding_mask_with_masked_whitening_is_a_convention():
    """RLHF's GAE over response tokens (torchtune's estimate_advantages has this form): the mask marks padding,
    not episode ends; the advantages are whitened over the unpadded tokens only, the returns are not."""

    def estimate_advantages(values, rewards, gamma, lmbda, masks):
        last, out = 0.0, []
        for t in reversed(range(values.shape[-1])):
            nxt = values[:, t + 1] if t < values.shape[-1] - 1 else 0.0
            last = rewards[:, t] + gamma * nxt - values[:, t] + gamma * lmbda * last
            out.append(last)
        adv = torch.stack(out[::-1], 1)
        ret = adv + values
        mean = (adv * masks).sum() / masks.sum()
        var = ((adv - mean) ** 2 * masks).sum() / (masks.sum() - 1)
        return (adv - mean) * torch.rsqrt(var + 1e-8), ret

    torch.manual_seed(0)
    values, rewards = torch.randn(4, 10), torch.randn(4, 10)
    masks = torch.ones(4, 10, dtype=torch.bool)
    masks[:, 7:] = False
    found = _check(estimate_advantages, estimate_advantages(values, rewards, 0.99, 0.95, masks), values=values,
                   rewards=rewards, gamma=0.99, lmbda=0.95, masks=masks)
    assert found is not None and found[0] == "agree", found


def test_other_slips_off_the_recursion_are_found():
    """Bugs outside the corpus that break the premise: a GAE whose carry runs across an episode end (the flag
    masks only the TD error), and a TD(lambda) target with lambda on the value term."""
    torch.manual_seed(0)
    steps, envs = 12, 5
    rewards, values, next_value = torch.randn(steps, envs), torch.randn(steps, envs), torch.randn(envs)
    dones = (torch.rand(steps, envs) < 0.2).float()

    def compute_gae(rewards, values, dones, next_value, gamma=0.99, lam=0.95):
        adv, last = torch.zeros_like(rewards), 0
        for t in reversed(range(steps)):
            nxt = next_value if t == steps - 1 else values[t + 1]
            delta = rewards[t] + gamma * nxt * (1 - dones[t]) - values[t]
            last = delta + gamma * lam * last  # the carry crosses the episode end
            adv[t] = last
        return adv

    def td_lambda_targets(rewards, values, dones, gamma=0.99, lam=0.9):
        g, out = values[-1], torch.zeros_like(rewards)
        for t in reversed(range(steps)):
            g = rewards[t] + gamma * (1 - dones[t]) * (lam * values[t + 1] + (1 - lam) * g)
            out[t] = g
        return out

    bound = dict(rewards=rewards, values=values, dones=dones, next_value=next_value)
    found = _check(compute_gae, compute_gae(**bound), **bound, gamma=0.99, lam=0.95)
    assert found is not None and found[0] == "differ", found
    bound = dict(rewards=rewards, values=torch.randn(steps + 1, envs), dones=dones)
    found = _check(td_lambda_targets, td_lambda_targets(**bound), **bound, gamma=0.99, lam=0.9)
    assert found is not None and found[0] == "differ", found


GLOBAL_LAMBDA = '''
GAMMA, LAMBDA = 0.9, 0.8


def gae(rewards, values, dones, next_value):
    adv = torch.zeros_like(rewards)
    last = torch.zeros(rewards.shape[1])
    for t in reversed(range(rewards.shape[0])):
        nv = next_value if t == rewards.shape[0] - 1 else values[t + 1]
        nonterminal = 1.0 - dones[t]
        adv[t] = rewards[t] + GAMMA * nv * nonterminal - values[t] + GAMMA * LAMBDA * nonterminal * last
        {carry}
    return adv, adv + values
'''


def test_a_gae_that_masks_its_carry_again_is_named_with_its_lambda_read_from_a_global_and_its_twin_is_quiet(
        tmp_path):
    # w328's slip on a (T, N) rollout: the carry masked by the step's own flag after the masked recursion
    script = GLOBAL_LAMBDA.format(carry="last = adv[t] * nonterminal") \
        + ROLLOUT.format(call="gae(rewards, values.detach(), dones, next_value)")
    findings = _run(tmp_path, script)
    assert _slugs(findings) == ["targets-off-recursion"], findings
    message = findings[0]["message"]
    assert "global LAMBDA" in message and "masks the backward carry a second time" in message, message
    twin = GLOBAL_LAMBDA.format(carry="last = adv[t]") \
        + ROLLOUT.format(call="gae(rewards, values.detach(), dones, next_value)")
    assert _run(tmp_path, twin) == [] and _ran(tmp_path)


# session 56 (w324): a return function with no discount anywhere in its code is read as undiscounted (gamma = 1)
REINFORCE = '''
MASK = {mask}


def reward_to_go(rews):
{body}


opt2 = torch.optim.Adam(model.parameters(), lr=1e-2)  # its own step count: its first steps are checked
for step in range(6):
    i = (step * 40) % 1200
    xb = x[i:i + 40].reshape(8, 5, 64)  # 8 episodes of 5 steps: a sequence of guesses on digits
    yb = y[i:i + 40].reshape(8, 5)
    dist = torch.distributions.Categorical(logits=model(xb))
    a = dist.sample()
    rews = (a == yb).float()
    with torch.no_grad():
        rtg = torch.stack([reward_to_go(r) for r in rews])
    loss = -(dist.log_prob(a) * rtg).mean()
    opt2.zero_grad()
    loss.backward()
    opt2.step()
open(__file__ + ".done", "w").write("ran to its end")
'''
RTG_TWIN = '''    out, running = torch.zeros_like(rews), 0.0
    for t in reversed(range(len(rews))):
        running = rews[t] + running
        out[t] = running
    return out'''


def test_an_undiscounted_reward_to_go_that_sums_past_rewards_is_found_and_its_twin_is_quiet(tmp_path):
    """Another slip than the case's: Spinning Up's reward-to-go written as a forward cumulative sum."""
    bug = REINFORCE.format(mask="None", body="    return torch.cumsum(rews, 0)")
    findings = _run(tmp_path, bug)
    assert "targets-off-recursion" in _slugs(findings), findings
    message = next(f["message"] for f in findings if f["slug"] == "targets-off-recursion")
    assert "undiscounted" in message and "forward in time" in message, message
    assert _run(tmp_path, REINFORCE.format(mask="None", body=RTG_TWIN)) == [] and _ran(tmp_path)


def test_a_return_scan_cut_by_a_token_mask_is_named_and_its_twin_is_quiet(tmp_path):
    """The family of w324 on another layout: a mask over the steps (0 where a tool wrote) multiplied into the
    running return of an undiscounted reward-to-go over one episode."""
    body = RTG_TWIN.replace("        out[t] = running", "        out[t] = running\n        running = running * MASK[t]")
    findings = _run(tmp_path, REINFORCE.format(mask="torch.tensor([1.0, 1.0, 0.0, 1.0, 1.0])", body=body))
    assert _slugs(findings) == ["targets-off-recursion"], findings
    assert "drops the backward carry at step(s) 1 " in findings[0]["message"], findings[0]["message"]
    twin = REINFORCE.format(mask="torch.tensor([1.0, 1.0, 0.0, 1.0, 1.0])", body=RTG_TWIN)
    assert _run(tmp_path, twin) == [] and _ran(tmp_path)


def test_a_discount_the_code_may_hold_keeps_an_unnamed_gamma_silent():
    """No discount argument or discount global: gamma = 1 only when nothing in the code can be another one."""
    rewards = torch.tensor([0.0, 1.0, 0.0, 2.0, 1.0])
    discounted = torch.tensor([sum(0.9 ** k * float(r) for k, r in enumerate(rewards[t:])) for t in range(5)])

    def literal_returns(rewards):
        out, g = torch.zeros_like(rewards), 0.0
        for t in reversed(range(len(rewards))):
            g = rewards[t] + 0.9 * g
            out[t] = g
        return out

    class Config:
        gamma = 0.9

    cfg = Config()

    def config_returns(rewards):
        return literal_returns(rewards) if cfg.gamma else rewards

    def helper_returns(rewards):
        return literal_returns(rewards)

    assert _check(literal_returns, discounted, rewards=rewards) is None
    assert _check(config_returns, discounted, rewards=rewards) is None
    assert _check(helper_returns, discounted, rewards=rewards) is None  # a closure over a helper: unreadable


def test_undiscounted_returns_agree_in_their_accepted_forms():
    rewards = torch.tensor([[0.0, 1.0, 0.0, 2.0], [1.0, 0.0, 0.0, 1.0]])

    def compute_returns(rewards):
        return torch.flip(torch.cumsum(torch.flip(rewards, [1]), 1), [1])

    found = _check(compute_returns, compute_returns(rewards), rewards=rewards)
    assert found is not None and found[0] == "agree", found
    out = compute_returns(rewards)
    found = _check(compute_returns, (out - out.mean()) / out.std(), rewards=rewards)
    assert found is not None and found[0] == "agree", found
