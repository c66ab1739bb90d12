"""A concordance index that credits 0.5 to every pair tied in time between an event and a censored subject, whatever
the two predicted risks: on discrete follow-up times, where such ties are common, the reported C-index is pulled
towards 0.5 for a model that ranks them correctly -- with no error.

Source: derrynknife/SurPyval#276 (https://github.com/derrynknife/SurPyval/issues/276), filed by the maintainer
(labels: bug): Harrell's C in the library gives half a concordant pair to an event and a censored observation at
the same time regardless of the risks, where Harrell's definition counts the pair as comparable (the censored
subject is known to outlive the event) and scores it by the risks. Here a linear Cox model is trained (a Breslow
partial likelihood) on synthetic survival data whose times are recorded in coarse periods (six time units each:
many ties) with heavy random censoring, and the test set's concordance is computed by a loop over pairs like the
library's: the buggy one adds 0.5 for an event tied with a censored time, the twin scores the pair by the risks.
The training is the same in both; only the reported number differs.

Metric: the reported test concordance index (plain ``python``, CPU, seed 0): bug 0.6320, twin 0.9072
"""

REPORT = "N259"
MECHANISM = "concordance-ties-credited-regardless-of-risk"
SLUGS = ()
METRIC = ("test_c_index", 0.6320, 0.9072)

_SCRIPT = '''import torch
from torch import nn

torch.manual_seed(0)
D = 6
beta = torch.randn(D)


def cohort(n):
    x = torch.randn(n, D)
    t = torch.distributions.Exponential(0.1 * torch.exp(x @ beta)).sample()
    c = torch.distributions.Exponential(torch.full((n,), 0.2)).sample()
    time = torch.ceil(torch.minimum(t, c) / 6)
    return x, time, (t <= c).float()


def cox_loss(risk, time, event):
    order = torch.argsort(-time)
    risk, time, event = risk[order], time[order], event[order]
    log_cum = torch.logcumsumexp(risk, 0)
    return -((risk - log_cum) * event).sum() / event.sum().clamp(min=1)


def c_index(risk, time, event):
    num = den = 0.0
    for i in range(len(time)):
        if event[i] != 1:
            continue
        for j in range(len(time)):
            if time[i] < time[j] or (time[i] == time[j] and event[j] == 0):
                den += 1
                __TIE__risk[i] > risk[j]:
                    num += 1
                elif risk[i] == risk[j]:
                    num += 0.5
    return num / den


x_tr, t_tr, e_tr = cohort(2000)
x_te, t_te, e_te = cohort(300)
model = nn.Linear(D, 1, bias=False)
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
#@guard
for step in range(200):
    i = torch.randint(0, len(x_tr), (256,))
    loss = cox_loss(model(x_tr[i]).squeeze(1), t_tr[i], e_tr[i])
    opt.zero_grad()
    loss.backward()
    opt.step()
with torch.no_grad():
    risk = model(x_te).squeeze(1).tolist()
print(f"METRIC {c_index(risk, t_te.tolist(), e_te.tolist()):.4f}")
'''


def script(bug: bool) -> str:
    tie = ("if time[i] == time[j] and event[j] == 0:\n                    num += 0.5\n                elif "
           if bug else "if ")
    return _SCRIPT.replace('__TIE__', tie)
