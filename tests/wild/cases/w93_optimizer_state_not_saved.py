"""Checkpoints that hold the model and the scheduler but not ``optimizer.state_dict()``: each time the
job resumes, AdamW starts with empty moments, its first steps move every weight by about the full
learning rate whatever the gradient's size, and the training loses ground at every restart.

Source: EvolvingLMMs-Lab/OneVision-Encoder#65 (https://github.com/EvolvingLMMs-Lab/OneVision-Encoder/pull/65),
"fix: save and restore AdamW optimizer state for proper training resume": "it does **NOT** save
`optimizer.state_dict()`, which contains: `exp_avg` (1st moment / momentum), `exp_avg_sq` (2nd
moment / RMS accumulator), `step` count for bias correction. When resuming training without
optimizer state, AdamW starts fresh, causing: Transient loss spikes (especially severe if resuming
mid-training with decayed LR)"; also KempnerInstitute/KempnerForge#115 ("AdamW momentum reset to zero
at every resume") and NVlabs/stylegan2-ada-pytorch#108.  Here a digits classifier (one hidden layer
of 512) is trained by a
job that is preempted and resumed every 20 steps (as on a spot-instance queue), each time building
the model, AdamW and a cosine schedule afresh and loading the last checkpoint; the twin also saves
and loads the optimizer's state.

Metric: validation cross-entropy after 600 steps (plain ``python``, CPU, seed 0; lower is better):
bug 0.5829, twin 0.296.
(The accuracy moves less than the loss: the restarts cost calibration more than ranking.)
"""

from tests.wild.cases.common import PRELUDE

REPORT = "N67"
MECHANISM = "optimizer-state-not-checkpointed"
SLUGS = ()
METRIC = ("val_loss", 0.5829, 0.296)

_SCRIPT = PRELUDE + '''
import io

TOTAL, CHUNK = 600, 20
SAVE_OPTIMIZER = __SAVE__
g = torch.Generator().manual_seed(1)
order = torch.randint(1400, (TOTAL, 32), generator=g)              # the data stream, resumable by step
checkpoint = None
for start in range(0, TOTAL, CHUNK):                               # one job run per chunk
    model = nn.Sequential(nn.Linear(64, 512), nn.ReLU(), nn.Linear(512, 10))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.01)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=TOTAL)
    #@guard
    if checkpoint is not None:
        state = torch.load(io.BytesIO(checkpoint), weights_only=True)
        model.load_state_dict(state["model"])
        sched.load_state_dict(state["scheduler"])
        if SAVE_OPTIMIZER:
            opt.load_state_dict(state["optimizer"])
    for step in range(start, start + CHUNK):
        xb, yb = X[order[step]], Y[order[step]]
        opt.zero_grad()
        F.cross_entropy(model(xb), yb).backward()
        opt.step()
        sched.step()
    state = {"model": model.state_dict(), "scheduler": sched.state_dict()}
    if SAVE_OPTIMIZER:
        state["optimizer"] = opt.state_dict()
    buffer = io.BytesIO()
    torch.save(state, buffer)
    checkpoint = buffer.getvalue()
model.eval()
with torch.no_grad():
    val_loss = F.cross_entropy(model(X[1400:]), Y[1400:]).item()
print(f"METRIC {val_loss:.4f}")
'''


def script(bug: bool) -> str:
    return _SCRIPT.replace("__SAVE__", "False" if bug else "True")
