"""The forward checks under ``torch.compile`` (overt/guards/compiled.py): dynamo does not guard on
module hooks, so a hook the guards place after the first compiled call never fired; a watched
compiled model now runs eagerly while its forwards are looked at.  Each planted bug of
tests/guards/compiled_cases.py is named through ``torch.compile(model)`` and through
``model.compile()``, and its clean twin is silent (the eager backend ``aot_eager``: dynamo's hook
behaviour is the backend's, and it needs no C++ compiler); the compiled steps stay compiled, with
no recompilation, and the numbers stay the model's."""

from __future__ import annotations

import gc
import pytest
import torch
from torch import nn

from overt.guards import compiled as compiled_mod
from tests.conftest import TIMING
from tests.guards import compiled_cases as cases
from tests.guards.helpers import batches, guarded, mlp, slugs

pytestmark = pytest.mark.skipif(not hasattr(torch, "compile"), reason="torch.compile is not available")


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def _findings(case, wrap, planted):
    g = case(wrap, planted)
    return g.report(), g.session.options.stream.getvalue()


@pytest.mark.parametrize("slug", list(cases.CASES))
def test_a_planted_bug_in_a_compiled_model_is_named_and_its_twin_is_silent(slug):
    findings, text = _findings(cases.CASES[slug], cases.compiled(), True)
    assert slugs(findings) == [slug], text
    findings, text = _findings(cases.CASES[slug], cases.compiled(), False)
    assert findings == [], text


@pytest.mark.parametrize("slug", ["train-mode-in-eval", "dead-activations", "batch-dependent-eval"])
def test_a_model_compiled_in_place_is_checked_too(slug):
    findings, text = _findings(cases.CASES[slug], cases.compiled_in_place(), True)
    assert slugs(findings) == [slug], text
    findings, text = _findings(cases.CASES[slug], cases.compiled_in_place(), False)
    assert findings == [], text


def test_the_softmax_finding_names_the_evaluation_not_the_training_outputs():
    """Before, the compiled evaluation forwards were never seen: softmax-over-batch was matched by
    shape against the last *training* output and said "training outputs"."""
    findings, text = _findings(cases.softmax_over_batch, cases.compiled(), True)
    assert "compiled_cases.py:" in findings[0].where, text
    assert "training outputs" not in findings[0].message, text


class _Net(nn.Module):  # a model class of its own: its root hooks run outside dynamo, its layers' do not
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.fc1, self.relu, self.fc2 = nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10)

    def forward(self, x):
        return self.fc2(self.relu(self.fc1(x)))


def _train(call, model, opt, steps):
    for xb, yb in batches(32, steps):
        opt.zero_grad()
        nn.functional.cross_entropy(call(xb), yb).backward()
        opt.step()


@pytest.mark.parametrize("make", [mlp, _Net], ids=["sequential", "own-class"])
def test_checked_steps_run_eagerly_and_the_others_stay_compiled_without_recompiling(make):
    """20 steps checked every 4th: one graph compiled, as without the guards; the compiled frame
    runs on the unchecked steps only; the weights match an unguarded compiled run to rounding."""
    from torch._dynamo.utils import counters

    def run(guard: bool):
        torch._dynamo.reset()
        counters.clear()
        model = make()
        call = torch.compile(model, backend="aot_eager")
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        g = guarded(model, opt, check_every=4, warmup_steps=2, ignore=TIMING) if guard else None
        _train(call, model, opt, 20)
        if g is not None:
            assert g.report() == [], g.session.options.stream.getvalue()
        return [p.detach().clone() for p in model.parameters()], dict(counters["stats"]), dict(counters["frames"])

    plain, plain_stats, _ = run(False)
    checked, stats, frames = run(True)
    assert stats.get("unique_graphs") == plain_stats.get("unique_graphs") == 1
    assert frames.get("total", 0) <= 2  # the forward frame (and, for a Sequential, its inlined wrapper)
    for a, b in zip(plain, checked):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)


def test_unchecked_steps_run_the_compiled_forward(monkeypatch):
    """Checked steps (2 warm-up steps, then every 4th) run the module eagerly, the other 8 of 12
    run the compiled code."""
    model = _Net()
    call = torch.compile(model, backend="aot_eager")
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    g = guarded(model, opt, check_every=4, warmup_steps=2, ignore=TIMING)
    eager = []
    real = compiled_mod._eager
    monkeypatch.setattr(compiled_mod, "_eager", lambda *a: eager.append(g.session.step) or real(*a))
    _train(call, model, opt, 12)
    assert g.report() == []
    assert eager == [0, 1, 4, 8]  # the optimizer steps done before each eagerly run forward
    assert not compiled_mod.LOOKING


class _DropNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.fc1, self.drop, self.fc2 = nn.Linear(64, 32), nn.Dropout(0.1), nn.Linear(32, 10)

    def forward(self, x):
        return self.fc2(self.drop(torch.relu(self.fc1(x))))


@pytest.mark.parametrize("clip", ["clip_grad_norm_", "clip_grad_value_"])
def test_a_dropout_model_that_clips_still_runs_compiled_on_unchecked_steps(monkeypatch, clip):
    """torch's own no_grad blocks (the clipping functions) are not evaluations: they used to
    re-arm the forward hook of a model with Dropout on every step, so under torch.compile every
    forward ran eagerly (the GPU benchmark: guarded bf16 + compile as slow as no compile)."""
    model = _DropNet()
    call = torch.compile(model, backend="aot_eager")
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    g = guarded(model, opt, check_every=4, warmup_steps=2, ignore=TIMING)
    eager = []
    real = compiled_mod._eager
    monkeypatch.setattr(compiled_mod, "_eager", lambda *a: eager.append(g.session.step) or real(*a))
    clipper = getattr(nn.utils, clip)
    for xb, yb in batches(32, 12):
        opt.zero_grad()
        nn.functional.cross_entropy(call(xb), yb).backward()
        clipper(model.parameters(), 1.0)
        opt.step()
    assert g.report() == []
    # a model with Dropout has its first three unchecked training forwards looked at too (2, 3, 5);
    # after them only the checked steps run eagerly
    assert eager == [0, 1, 2, 3, 4, 5, 8]


def test_an_evaluation_without_eval_under_no_grad_still_arms_the_dropout_check():
    """The user's own no_grad block (a with, or a @torch.no_grad() function) still arms it."""
    model = _DropNet()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    g = guarded(model, opt, check_every=4, warmup_steps=2, ignore=TIMING)
    _train(model, model, opt, 7)

    @torch.no_grad()
    def evaluate():
        return model(torch.randn(32, 64))

    evaluate()
    assert "train-mode-in-eval" in slugs(g.report())


def test_the_last_session_gives_back_the_compiled_call():
    from torch._dynamo.eval_frame import OptimizedModule

    # what was there before the session (Lightning, once imported, has wrapped torch.compile itself)
    before = (OptimizedModule.__call__, torch.compile, nn.Module.compile)
    model = _Net()
    model.compile(backend="aot_eager")
    impl = model._compiled_call_impl
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    g = guarded(model, opt, ignore=TIMING)
    _train(model, model, opt, 2)  # checked steps: set aside
    assert model._compiled_call_impl is None
    assert OptimizedModule.__call__ is not before[0]  # the session's wrapper
    g.report()
    assert model._compiled_call_impl is impl
    assert (OptimizedModule.__call__, torch.compile, nn.Module.compile) == before  # given back


def test_a_model_compiled_in_place_between_checked_steps_runs_eagerly_at_the_next_one():
    """A watched model's modules are walked for in-place compiled ones at its first look and again after a
    ``Module.compile`` call, not at every checked step (overt/guards/compiled.py): a model compiled in place
    while its forwards are not looked at is set aside at its next checked step all the same (its hooks fire),
    stays compiled on the unchecked ones, and gets its compiled call back after the session."""
    model = _Net()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    g = guarded(model, opt, ignore=TIMING, check_every=4, warmup_steps=1)
    _train(model, model, opt, 2)  # step 0 checked (looked at, uncompiled), step 1 not
    model.compile(backend="aot_eager")  # between checked steps: nothing is looked at now
    impl = model._compiled_call_impl
    assert impl is not None
    set_aside = []
    handle = opt.register_step_pre_hook(lambda *_: set_aside.append(model._compiled_call_impl is None))
    _train(model, model, opt, 3)  # steps 2 and 3 unchecked, step 4 checked
    handle.remove()
    g.report()
    assert set_aside == [False, False, True]
    assert model._compiled_call_impl is impl


def test_a_second_compiled_model_of_the_same_class_has_no_graph_leak():
    """A notebook re-run or an in-process sweep: a second model of the same class, compiled, in the
    same process, reuses dynamo's cache; its checked outputs must not read as kept alive."""
    for _ in range(2):
        findings, text = _findings(cases.graph_leak, cases.compiled(), False)
        assert findings == [], text


def test_discovery_under_overt_run_sees_a_compiled_model(tmp_path, capsys):
    """``overt run``: the model is found through the global forward hook, called through
    ``torch.compile``; dead ReLUs and a dropout model evaluated without ``eval()`` are named, and
    PyTorch's warning about global hooks on a compiled module (printed at each discovering call
    before) is not: the discovering calls run the module eagerly."""
    import sys

    from overt.guards import run_cli
    from overt.guards.patches import ACTIVE

    script = tmp_path / "train.py"
    script.write_text(
        "import torch\nfrom sklearn.datasets import load_digits\nfrom torch import nn\n"
        "d = load_digits()\nx = torch.tensor(d.data, dtype=torch.float32) / 16\ny = torch.tensor(d.target)\n"
        "torch.manual_seed(0)\n"
        "model = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Dropout(0.3), nn.Linear(32, 10))\n"
        "with torch.no_grad():\n    model[0].bias.fill_(-20.0)\n"
        "compiled = torch.compile(model, backend='aot_eager')\n"
        "opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        "for epoch in range(2):\n"
        "    compiled.train()\n"
        "    for i in range(0, 640, 32):\n"
        "        opt.zero_grad()\n"
        "        nn.functional.cross_entropy(compiled(x[i:i + 32]), y[i:i + 32]).backward()\n"
        "        opt.step()\n"
        "    with torch.no_grad():\n"
        "        for i in range(1500, 1797, 64):\n"
        "            compiled(x[i:i + 64])\n")
    saved = sys.argv[:], sys.path[0], sys.modules["__main__"]
    try:
        code = run_cli.main(["--ignore", "dataloader-starvation", str(script)])
    finally:
        sys.argv, sys.path[0], sys.modules["__main__"] = saved
    assert not ACTIVE
    err = capsys.readouterr().err
    assert "OVT201 train-mode-in-eval" in err and "OVT703 dead-activations" in err, err
    assert "global hooks" not in err, err
    assert code == 1


def _engine_fit(monkeypatch, planted: bool, guards: bool = True):
    """overt's engine with ``compile=True`` (torch.compile with the eager backend here: the
    engine's hook behaviour is dynamo's, whatever the backend) on digits; planted: dead ReLUs."""
    from torch.utils.data import TensorDataset

    from overt.compose import Trainer
    from overt.guards.engine import GuardCallback
    from tests.guards.helpers import digits

    real = torch.compile
    monkeypatch.setattr(torch, "compile", lambda model, **kw: real(model, backend="aot_eager"))
    model = mlp(hidden=64)
    if planted:
        with torch.no_grad():
            model[0].bias.fill_(-20.0)
    x, y = digits()
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    trainer = Trainer(model, opt, nn.CrossEntropyLoss(), TensorDataset(x[:480], y[:480]),
                      TensorDataset(x[1500:1600], y[1500:1600]),
                      callbacks=[GuardCallback(check_every=2)] if guards else [],
                      epochs=2, batch_size=32, progress="off", compile=True, guards=guards)
    summary = trainer.fit()
    quiet = TIMING | {"loss-not-decreasing", "no-gradient", "val-metric-collapse"}
    return [f for f in summary.get("findings", []) if f["slug"] not in quiet]


@pytest.mark.slow  # ~20 s each on two busy cores
@pytest.mark.parametrize("planted", [True, False])
def test_the_engine_with_compile_names_dead_activations_and_its_twin_is_silent(monkeypatch, planted):
    findings = _engine_fit(monkeypatch, planted)
    assert [f["slug"] for f in findings] == (["dead-activations"] if planted else []), findings


def test_hooks_of_the_users_on_the_compiled_wrapper_still_fire_on_checked_steps():
    model = _Net()
    call = torch.compile(model, backend="aot_eager")
    seen = []
    call.register_forward_hook(lambda m, a, out: seen.append(out.shape[0]))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    g = guarded(model, opt, check_every=4, warmup_steps=2, ignore=TIMING)
    _train(call, model, opt, 8)
    assert seen == [32] * 8
    assert g.report() == []


@pytest.mark.parametrize("order", ["ddp-of-compiled", "compiled-ddp"])
def test_ddp_around_a_compiled_model_and_a_compiled_ddp_are_checked(tmp_path, order):
    """One gloo process: DDP(torch.compile(model)) and torch.compile(DDP(model)), the guard given
    what the loop calls (it unwraps both to the model); an evaluation without eval() is named."""
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    if not dist.is_available() or not dist.is_gloo_available():
        pytest.skip("torch.distributed with gloo is not available")
    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'pg'}", rank=0, world_size=1)
    try:
        for planted in (True, False):
            torch._dynamo.reset()
            model = mlp(dropout=0.3)
            call = (DDP(torch.compile(model, backend="aot_eager")) if order == "ddp-of-compiled"
                    else torch.compile(DDP(model), backend="aot_eager"))
            opt = torch.optim.SGD(model.parameters(), lr=0.1)
            g = guarded(call, opt, ignore=TIMING)
            for epoch in range(2):
                call.train()
                _train(call, model, opt, 8)
                if not planted:
                    call.eval()
                with torch.no_grad():
                    for xb, _ in cases.val_batches(64):
                        call(xb)
            findings = g.report()
            assert slugs(findings) == (["train-mode-in-eval"] if planted else []), \
                g.session.options.stream.getvalue()
    finally:
        # free DDP's reducer (it holds the process group) before the group goes: gloo's destructor run
        # after destroy_process_group() joins its threads and can hang
        call = g = opt = model = None  # noqa: F841
        gc.collect()
        dist.destroy_process_group()


def test_a_compiled_layer_inside_a_watched_model_is_checked():
    """``model.body = torch.compile(model.body)``: the ReLU the dead-activations check hooks is
    inside the compiled part; the model itself is eager."""
    torch.manual_seed(0)
    body = nn.Sequential(nn.Linear(64, 64), nn.ReLU())
    with torch.no_grad():
        body[0].bias.fill_(-20.0)
    model = nn.Sequential(torch.compile(body, backend="aot_eager"), nn.Linear(64, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    g = guarded(model, opt, check_every=2, ignore=["loss-not-decreasing", "no-gradient", *TIMING])
    _train(model, model, opt, 8)
    assert slugs(g.report()) == ["dead-activations"], g.session.options.stream.getvalue()


def test_compiling_a_watched_models_forward_method_is_said_once():
    """``torch.compile(model.forward)`` is a function, not a module: it cannot be run eagerly, so
    the forward checks it hides are named once, when it is compiled."""
    model = _Net()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    g = guarded(model, opt, ignore=TIMING)
    fwd = torch.compile(model.forward, backend="aot_eager")
    torch.compile(model.fc1.forward, backend="aot_eager")  # the same model: not said again
    for xb, yb in batches(32, 2):
        opt.zero_grad()
        nn.functional.cross_entropy(fwd(xb), yb).backward()
        opt.step()
    g.report()
    text = g.session.options.stream.getvalue()
    assert text.count("compiles a method, not the module") == 1, text
    assert "torch.compile(_Net.forward)" in text and "dead-activations" in text


class _Holder(nn.Module):
    """A framework's module around the user's compiled model (a LightningModule's ``self.model``)."""

    def __init__(self, net: nn.Module) -> None:
        super().__init__()
        self.net = torch.compile(net, backend="aot_eager")

    def forward(self, x):
        return self.net(x)


@pytest.mark.parametrize("planted", [True, False])
def test_eval_on_a_module_holding_a_compiled_model_arms_its_checks(planted):
    """``holder.eval()`` switches the compiled model inside it: OptimizedModule sets its module's
    mode itself, and the switch must still start the evaluation checks (batch-dependent-eval
    needs an evaluation forward of a model without Dropout/BatchNorm: armed by eval() only)."""
    net = cases.Head(0 if planted else 1)
    holder = _Holder(net)
    opt = torch.optim.Adam(net.parameters(), lr=1e-2)
    g = guarded(net, opt, ignore=[*TIMING, "softmax-over-batch"])
    for _ in range(2):
        holder.train()
        for xb, yb in batches(64, 10):
            opt.zero_grad()
            nn.functional.nll_loss(holder(xb), yb).backward()
            opt.step()
        holder.eval()
        with torch.no_grad():
            for xb, _ in cases.val_batches(64):
                holder(xb)
    assert slugs(g.report()) == (["batch-dependent-eval"] if planted else []), g.session.options.stream.getvalue()


@pytest.mark.slow  # two engine runs, ~30 s on two busy cores
def test_the_engine_with_compile_compiles_no_more_with_the_guards(monkeypatch):
    """Training and validation, checked every 2nd step: no graph and no frame compiled that the
    same run without the guards does not compile (the looked-at forwards run eagerly)."""
    from torch._dynamo.utils import counters

    seen = {}
    for guards in (False, True):
        torch._dynamo.reset()
        counters.clear()
        _engine_fit(monkeypatch, planted=False, guards=guards)
        seen[guards] = (counters["stats"].get("unique_graphs", 0), counters["frames"].get("total", 0))
    assert seen[True][0] <= seen[False][0] and seen[True][1] <= seen[False][1], seen


@pytest.mark.slow  # an engine run with compile, ~15 s on two busy cores
@pytest.mark.parametrize("dropout", [0.0, 0.2])
def test_validation_of_a_compiled_model_runs_compiled_once_the_checks_have_seen_enough(monkeypatch, dropout):
    """Before, every validation forward of a compiled model ran eagerly while the guards were on
    (the evaluation phase kept the forward hook on: 30 of 30 here). Now each evaluation check says
    when it has seen enough (its first looks per model, the first forwards of each pass): the first
    pass runs its first 8 batches eagerly (the outputs remembered for the softmax and
    prediction-shape checks), each later pass its first 3 (what makes it a pass for
    ``eval-model-stale``), and every pass its last batch (the last batch of a loader arms the
    forwards: it may be a tiny one); the rest runs compiled."""
    from torch.utils.data import TensorDataset

    from overt.compose import Trainer
    from tests.guards.helpers import digits

    real = torch.compile
    monkeypatch.setattr(torch, "compile", lambda model, **kw: real(model, backend="aot_eager"))
    eager: list[bool] = []  # the training flag of each eagerly run forward
    real_eager = compiled_mod._eager
    monkeypatch.setattr(compiled_mod, "_eager", lambda m, *a: eager.append(m._orig_mod.training) or real_eager(m, *a))
    model = mlp(hidden=64, dropout=dropout)
    x, y = digits()
    epochs = 4
    trainer = Trainer(model, torch.optim.SGD(model.parameters(), lr=0.05), nn.CrossEntropyLoss(),
                      TensorDataset(x[:480], y[:480]), TensorDataset(x[1000:1640], y[1000:1640]),
                      epochs=epochs, batch_size=32, val_batch_size=32, progress="off", compile=True)
    summary = trainer.fit()
    quiet = TIMING | {"loss-not-decreasing", "val-metric-collapse"}
    assert [f["slug"] for f in summary["findings"] if f["slug"] not in quiet] == []
    per_pass = len(trainer.val_loader)  # 20 batches
    evaluated = eager.count(False)
    assert evaluated <= (8 + 1) + (3 + 1) * (epochs - 1), (evaluated, epochs * per_pass)
    if not dropout:  # (a model with Dropout also has the first training forwards of each epoch looked at)
        assert eager.count(True) == 4  # the checked training steps (3 warm-up, step 50), as before


@pytest.mark.slow  # an engine run with compile, ~10 s on two busy cores
def test_an_evaluation_bug_of_a_compiled_model_is_still_found_in_the_engine(monkeypatch):
    """The evaluation checks' looks are bounded under compile, not skipped: validation inputs
    prepared unlike the training inputs (raw pixel values 0..16 against 0..1) are still named in
    the first pass (``train-serve-skew``), through the engine's ``compile=True``."""
    from torch.utils.data import TensorDataset

    from overt.compose import Trainer
    from tests.guards.helpers import digits

    real = torch.compile
    monkeypatch.setattr(torch, "compile", lambda model, **kw: real(model, backend="aot_eager"))
    model = mlp(hidden=64)
    x, y = digits()
    trainer = Trainer(model, torch.optim.SGD(model.parameters(), lr=0.05), nn.CrossEntropyLoss(),
                      TensorDataset(x[:480], y[:480]), TensorDataset(x[1000:1640] * 16, y[1000:1640]),
                      epochs=2, batch_size=32, val_batch_size=32, progress="off", compile=True)
    summary = trainer.fit()
    assert "train-serve-skew" in [f["slug"] for f in summary["findings"]], summary["findings"]


@pytest.mark.parametrize("clip", [None, 1.0])
def test_the_engines_log_points_run_no_forward_of_a_compiled_model_eagerly(monkeypatch, clip):
    """The engine reads its gradient norms at log points under ``@torch.no_grad()``: overt's own
    block, no evaluation of the user's, so it arms no forward check. It used to arm two forwards
    of a model with Dropout after every log point, which then ran eagerly (the GPU profile of the
    gpt recipe: 2 eager steps in 20). The eager training forwards are the same whether the engine
    logs every 3 steps or never."""
    from torch.utils.data import TensorDataset

    from overt.compose import Trainer
    from tests.guards.helpers import digits

    real = torch.compile
    monkeypatch.setattr(torch, "compile", lambda model, **kw: real(model, backend="aot_eager"))
    x, y = digits()

    def eager_training_forwards(log_every: int) -> int:
        torch._dynamo.reset()
        eager: list[bool] = []
        real_eager = compiled_mod._eager
        monkeypatch.setattr(compiled_mod, "_eager",
                            lambda m, *a: eager.append(m._orig_mod.training) or real_eager(m, *a))
        model = mlp(hidden=64, dropout=0.2)
        Trainer(model, torch.optim.SGD(model.parameters(), lr=0.05), nn.CrossEntropyLoss(),
                TensorDataset(x[:640], y[:640]), None, epochs=1, batch_size=32, progress="off", compile=True,
                log_every=log_every, clip_grad_norm=clip, checkpoint=False).fit()
        return eager.count(True)

    assert eager_training_forwards(3) == eager_training_forwards(1000)
