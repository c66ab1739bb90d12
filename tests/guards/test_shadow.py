"""A copy of the model that the program reads must follow the model (overt/guards/shadow.py, issue 33).

Planted, on small real runs on digits under ``overt run``: a mean teacher read at every step whose sync sits
behind a condition that is never true (``eval-model-stale``, frozen at the random initialisation), and three
averages that leave the model (``average-diverges-from-model``): an EMA class whose update has its sign
flipped (ostris/ai-toolkit#1034), an EMA without its ``1 - decay`` kept in a function's locals, and a
mean teacher soft-updated with the wrong sign.  Clean twins: the same programs with the sync on an update
counter and the right signs, torch's ``AveragedModel``; quiet: a frozen reference copy of a *pretrained*
model read at every step (a KL penalty's reference), a copy of the initialisation evaluated once at the end
for comparison, a running sum of the weights that is never evaluated itself.  And ``eval-copy-near-initial``'s
resumed form for an average kept as a dictionary of tensors (BangLiu/QANet-PyTorch#4): taken from the model
before its ``load_state_dict``, named at the load; its twin takes it after the load.
"""

from __future__ import annotations

from tests.guards.helpers import run_script_probe, slug_set

HEAD = '''
import copy
import torch
from sklearn.datasets import load_digits
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)
d = load_digits()
x = torch.tensor(d.data, dtype=torch.float32) / 16
y = torch.tensor(d.target)


def net():
    return nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10))


def batch(step):
    i = (step * 32) % 1376
    return x[i:i + 32], y[i:i + 32]
'''

MEAN_TEACHER = '''
student = net()
teacher = copy.deepcopy(student)
opt = torch.optim.Adam(student.parameters(), lr=1e-2)
updates = 0
for step in range(200):
    xb, yb = batch(step)
    with torch.no_grad():
        soft = F.softmax(teacher(xb + 0.05 * torch.randn_like(xb)), 1)
    out = student(xb)
    loss = F.cross_entropy(out, yb) + F.mse_loss(F.softmax(out, 1), soft)
    opt.zero_grad()
    loss.backward()
    opt.step()
    updates += 1
    if {counter} % 25 == 0 and {counter} > 0:
        teacher.load_state_dict(student.state_dict())
with torch.no_grad():
    print((teacher(x[1400:]).argmax(1) == y[1400:]).float().mean().item())
'''


def test_teacher_never_synced_named():
    findings = run_script_probe_head(MEAN_TEACHER.format(counter="never"), "never = 0\n")
    assert "eval-model-stale" in slug_set(findings)
    f = next(f for f in findings if f["slug"] == "eval-model-stale")
    assert "teacher" in f["message"] and "random initialisation student had" in f["message"]
    text = (HEAD + "never = 0\n" + MEAN_TEACHER).splitlines()
    assert f["where"].endswith(f"train.py:{next(i for i, line in enumerate(text, 1) if 'soft = ' in line)}")


def test_teacher_synced_on_update_counter_quiet():
    assert slug_set(run_script_probe_head(MEAN_TEACHER.format(counter="updates"), "")) == []


def run_script_probe_head(body: str, extra: str) -> list[dict]:
    import pathlib
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        return run_script_probe(pathlib.Path(tmp), body, head=HEAD + extra)


EMA_CLASS = '''
class ExponentialMovingAverage:
    def __init__(self, model, decay=0.99):
        self.decay = decay
        self.shadow = copy.deepcopy(model)

    @torch.no_grad()
    def update(self, model):
        for s, p in zip(self.shadow.parameters(), model.parameters()):
            gap = s - p
            s.{op}(gap * (1.0 - self.decay))


model = net()
opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
ema = ExponentialMovingAverage(model)
for step in range(300):
    xb, yb = batch(step)
    loss = F.cross_entropy(model(xb), yb)
    opt.zero_grad()
    loss.backward()
    opt.step()
    ema.update(model)
with torch.no_grad():
    print((ema.shadow(x[1400:]).argmax(1) == y[1400:]).float().mean().item())
'''


def test_ema_sign_flipped_named_at_update():
    findings = run_script_probe_head(EMA_CLASS.format(op="add_"), "")
    assert slug_set(findings) == ["average-diverges-from-model"]
    f = findings[0]
    assert "ema.shadow" in f["message"] and "ExponentialMovingAverage.update" in f["message"]
    text = (HEAD + EMA_CLASS).splitlines()
    assert f["where"].endswith(f"train.py:{next(i for i, line in enumerate(text, 1) if 's.{op}(' in line)}")


def test_ema_right_sign_quiet():
    assert slug_set(run_script_probe_head(EMA_CLASS.format(op="sub_"), "")) == []


EMA_IN_MAIN = '''
def main():
    model = net()
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    average = copy.deepcopy(model).eval()
    decay = 0.98
    for step in range(200):
        xb, yb = batch(step)
        loss = F.cross_entropy(model(xb), yb)
        opt.zero_grad()
        loss.backward()
        opt.step()
        with torch.no_grad():
            for a, p in zip(average.parameters(), model.parameters()):
                {update}
        if step % 50 == 49:
            with torch.no_grad():
                print((average(x[1400:]).argmax(1) == y[1400:]).float().mean().item())


main()
'''


def test_ema_without_one_minus_decay_in_a_function_named():
    findings = run_script_probe_head(EMA_IN_MAIN.format(update="a.mul_(decay).add_(p)"), "")
    assert slug_set(findings) == ["average-diverges-from-model"]
    assert "average" in findings[0]["message"]


def test_ema_in_a_function_quiet():
    assert slug_set(run_script_probe_head(EMA_IN_MAIN.format(update="a.mul_(decay).add_(p, alpha=1 - decay)"),
                                          "")) == []


def test_averaged_model_quiet():
    body = '''
from torch.optim import swa_utils
model = net()
opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
swa = swa_utils.AveragedModel(model, multi_avg_fn=swa_utils.get_ema_multi_avg_fn(0.95))
for step in range(200):
    xb, yb = batch(step)
    loss = F.cross_entropy(model(xb), yb)
    opt.zero_grad()
    loss.backward()
    opt.step()
    swa.update_parameters(model)
with torch.no_grad():
    print((swa(x[1400:]).argmax(1) == y[1400:]).float().mean().item())
'''
    assert slug_set(run_script_probe_head(body, "")) == []


SOFT_TEACHER = '''
student = net()
teacher = copy.deepcopy(student)
for p in teacher.parameters():
    p.requires_grad_(False)
opt = torch.optim.Adam(student.parameters(), lr=3e-3)
tau = 0.02
for step in range(200):
    xb, yb = batch(step)
    with torch.no_grad():
        soft = F.softmax(teacher(xb), 1)
    out = student(xb)
    loss = F.cross_entropy(out, yb) + 0.1 * F.kl_div(F.log_softmax(out, 1), soft, reduction="batchmean")
    opt.zero_grad()
    loss.backward()
    opt.step()
    with torch.no_grad():
        for t, s in zip(teacher.parameters(), student.parameters()):
            t.{op}(tau * (t - s))
'''


def test_soft_update_sign_flipped_named():
    findings = run_script_probe_head(SOFT_TEACHER.format(op="add_"), "")
    assert slug_set(findings) == ["average-diverges-from-model"]
    assert "teacher" in findings[0]["message"]


def test_soft_update_quiet():
    assert slug_set(run_script_probe_head(SOFT_TEACHER.format(op="sub_"), "")) == []


def test_frozen_reference_of_a_pretrained_model_quiet():
    body = '''
pre = net()
popt = torch.optim.Adam(pre.parameters(), lr=1e-2)
for step in range(100):
    xb, yb = batch(step)
    popt.zero_grad()
    F.cross_entropy(pre(xb), yb).backward()
    popt.step()
state = copy.deepcopy(pre.state_dict())
del pre, popt

policy = net()
policy.load_state_dict(state)
reference = copy.deepcopy(policy)
opt = torch.optim.Adam(policy.parameters(), lr=1e-2)
for step in range(200):
    xb, yb = batch(step + 7)
    with torch.no_grad():
        ref = F.log_softmax(reference(xb), 1)
    logp = F.log_softmax(policy(xb), 1)
    loss = F.nll_loss(logp, yb) + 0.1 * F.kl_div(ref, logp, log_target=True, reduction="batchmean")
    opt.zero_grad()
    loss.backward()
    opt.step()
'''
    assert "eval-model-stale" not in slug_set(run_script_probe_head(body, ""))


def test_initial_copy_evaluated_once_and_a_weight_sum_quiet():
    body = '''
model = net()
initial = copy.deepcopy(model)
total = copy.deepcopy(model)
opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
for step in range(200):
    xb, yb = batch(step)
    loss = F.cross_entropy(model(xb), yb)
    opt.zero_grad()
    loss.backward()
    opt.step()
    with torch.no_grad():
        for t, p in zip(total.parameters(), model.parameters()):
            t.add_(p)
average = copy.deepcopy(model)
with torch.no_grad():
    for a, t in zip(average.parameters(), total.parameters()):
        a.copy_(t / 201)
    for m in (initial, model, average):
        print((m(x[1400:]).argmax(1) == y[1400:]).float().mean().item())
'''
    assert slug_set(run_script_probe_head(body, "")) == []


RESUME = '''
import io


class EMA:
    def __init__(self, model, decay):
        self.decay = decay
        self.shadow = {n: p.detach().clone() for n, p in model.named_parameters()}

    def update(self, model):
        for n, p in model.named_parameters():
            self.shadow[n].mul_(self.decay).add_(p.detach(), alpha=1 - self.decay)


def run(model, opt, steps, start=0, ema=None):
    for step in range(start, start + steps):
        xb, yb = batch(step)
        loss = F.cross_entropy(model(xb), yb)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if ema is not None:
            ema.update(model)


def main():
    first = net()
    run(first, torch.optim.SGD(first.parameters(), lr=0.1), 150)
    buf = io.BytesIO()
    torch.save(first.state_dict(), buf)
    buf.seek(0)
    state = torch.load(buf, weights_only=True)
    model = net()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    {before}
    model.load_state_dict(state)  # the load
    {after}
    run(model, opt, 40, start=150, ema=ema)
    torch.save(ema.shadow, io.BytesIO())  # the averaged weights shipped (no module of them is evaluated)


main()
'''


def _resume(before: bool) -> str:
    ema = "ema = EMA(model, 0.999)"
    return RESUME.replace("{before}", ema if before else "").replace("{after}", "" if before else ema)


def test_dict_average_taken_before_the_load_named_at_the_load():
    findings = run_script_probe_head(_resume(before=True), "")
    assert slug_set(findings) == ["eval-copy-near-initial"]
    f = findings[0]
    assert "ema.shadow" in f["message"] and "dictionary" in f["message"]
    text = (HEAD + RESUME).splitlines()
    assert f["where"].endswith(f"train.py:{next(i for i, line in enumerate(text, 1) if '# the load' in line)}")


def test_dict_average_taken_after_the_load_quiet():
    assert slug_set(run_script_probe_head(_resume(before=False), "")) == []
