"""Thompson sampling from a ``MultivariateNormal`` built once, at initialisation, from tensors that later updates
change in place: the mean is a view and follows the updates, but the Cholesky factor of the covariance was computed
at construction and never is again, so every sample keeps the prior's variance and the bandit keeps exploring as
much as on its first round -- with no error.

Source: ray-project/ray#29543 (https://github.com/ray-project/ray/issues/29543), "[RLlib] MultivariateNormal
distributions in bandits do not actually update sample variance": "BanditLinUCB and BanditLinTS are both broken
because the variance of the parameter estimates appear to be fixed to 1 at initialization ... the means are
correct, but empirically the variances for both arms are 1", and the model "wasn't really reliably picking one arm
over another" (labels: bug, P1; fixed by #29666: "recreate the distribution every time the cov matrix is
updated", merged). Here a linear Thompson-sampling bandit with two Bernoulli arms (0.1 and 0.3, a constant feature,
as in the report) keeps, per arm, a precision matrix, a mean and a covariance updated in place in closed form like
RLlib's ``OnlineLinearRegression``; the bug samples from the distributions made at initialisation, the twin
rebuilds each arm's distribution after its update. RLlib's trainer and environment are replaced by the loop. The
posterior is updated in closed form, with no optimizer, so the script has no ``#@guard`` line.

Metric: share of the last 1000 of 2000 rounds that pull the better arm (plain ``python``, CPU, seed 0): bug
0.5680, twin 0.9690
"""

REPORT = "N307"
MECHANISM = "posterior-sampler-built-before-in-place-updates"
SLUGS = ()
METRIC = ("late_best_arm_rate", 0.5680, 0.9690)

_SCRIPT = '''import torch

torch.manual_seed(0)
PROBS, ROUNDS, LAMBDA = torch.tensor([0.1, 0.3]), 2000, 1.0


class OnlineLinearRegression:
    def __init__(self, dim):
        self.precision = LAMBDA * torch.eye(dim)
        self.f = torch.zeros(dim)
        self.theta = torch.zeros(dim)
        self.covariance = torch.linalg.inv(self.precision)
        self.dist = torch.distributions.MultivariateNormal(self.theta, covariance_matrix=self.covariance)

    def update(self, x, reward):
        self.precision += torch.outer(x, x)
        self.f += reward * x
        self.covariance.copy_(torch.linalg.inv(self.precision))
        self.theta.copy_(self.covariance @ self.f)
        __REBUILD__

    def sample_theta(self):
        return self.dist.sample()


arms = [OnlineLinearRegression(1) for _ in PROBS]
x = torch.ones(1)
best = []
for t in range(ROUNDS):
    scores = torch.stack([(arm.sample_theta() * x).sum() for arm in arms])
    choice = int(scores.argmax())
    reward = float(torch.rand(()) < PROBS[choice])
    arms[choice].update(x, reward)
    best.append(choice == int(PROBS.argmax()))
print(f"METRIC {sum(best[ROUNDS // 2:]) / (ROUNDS // 2):.4f}")
'''


def script(bug: bool) -> str:
    return _SCRIPT.replace('__REBUILD__', 'pass' if bug else
                           'self.dist = torch.distributions.MultivariateNormal(self.theta, '
                           'covariance_matrix=self.covariance)')
