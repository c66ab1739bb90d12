"""A Cox partial likelihood that selects the observed events with a 0/1 integer tensor instead of
a boolean mask: integer indexing picks positions 0 and 1 over and over, so the loss only ever
sees the two earliest samples of the batch and the risk model barely learns -- with no error.

Source: Novartis/torchsurv#117 (https://github.com/Novartis/torchsurv/issues/117), "Cox partial
likelihood doesn't seem to index over all events" (labels: bug): "The array of partial log
likelihood contributions for each event is indexed using a binary tensor of event status
`event_sorted` ... However, it instead repeatedly indexes just the first and second values"
(fixed in #141: "I think the correct operation is multiplication, not indexing").  Here a linear
risk model is fitted to synthetic survival data (exponential event times whose log hazard is
linear in 10 features, about a third censored) with the partial likelihood of the report; the
buggy loss indexes with the event indicator as stored (``long``), the twin with
``event_sorted.bool()``.

Metric: concordance index on held-out patients (plain ``python``, CPU, seed 0): bug 0.796, twin 0.9182.
"""

REPORT = "N111"
MECHANISM = "integer-mask-used-as-index"
SLUGS = ()
METRIC = ("test_concordance", 0.796, 0.9182)

_SCRIPT = '''
import torch
from torch import nn

torch.manual_seed(0)
g = torch.Generator().manual_seed(1)
N, D = 1200, 10
x = torch.randn(N, D, generator=g)
beta = torch.randn(D, generator=g)
event_time = torch.distributions.Exponential(torch.exp(x @ beta)).sample()
censor_time = torch.distributions.Exponential(torch.full((N,), 0.5)).sample()
time = torch.minimum(event_time, censor_time)
event = (event_time <= censor_time).long()  # the event indicator, stored as 0/1
xt, tt, et, xs, ts, es = x[:900], time[:900], event[:900], x[900:], time[900:], event[900:]


def neg_partial_log_likelihood(log_hz, event, time):
    order = torch.argsort(time)
    log_hz_sorted, event_sorted = log_hz[order], event[order]
    log_denominator = torch.logcumsumexp(log_hz_sorted.flip(0), dim=0).flip(0)  # log-sum over the risk set
    return -(log_hz_sorted - log_denominator)[__MASK__].mean()


model = nn.Linear(D, 1)
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
#@guard
for step in range(300):
    opt.zero_grad()
    neg_partial_log_likelihood(model(xt).squeeze(1), et, tt).backward()
    opt.step()

with torch.no_grad():
    risk = model(xs).squeeze(1)
earlier = (ts[:, None] < ts[None, :]) & (es[:, None] == 1)  # comparable pairs: i had its event first
concordant = (risk[:, None] > risk[None, :]) & earlier
print(f"METRIC {(concordant.sum() / earlier.sum()).item():.4f}")
'''


def script(bug: bool) -> str:
    return _SCRIPT.replace("__MASK__", "event_sorted" if bug else "event_sorted.bool()")
