"""The busy-machine note and the threads= key.  The note is judged from the process's CPU time
against wall time and the load average: here both come from fixed numbers, so no test depends on
how busy the machine is (the suite turns the note off everywhere else, tests/conftest.py)."""

from __future__ import annotations

import io

import torch

from overt.engine import busy
from overt.engine.busy import BusyProbe, note


def test_the_note_needs_starved_threads_on_a_loaded_machine():
    said = note(cpu_s=0.3, wall_s=2.0, threads=2, load=7.5, cpus=2, fix="threads=1")
    assert said.startswith("overt: info: this machine is busy") and said.endswith("Fix: threads=1.")
    assert note(cpu_s=3.5, wall_s=2.0, threads=2, load=7.5, cpus=2, fix="x") is None  # the threads got their cores
    assert note(cpu_s=0.3, wall_s=2.0, threads=2, load=0.4, cpus=2, fix="x") is None  # idle machine: waiting on I/O
    assert note(cpu_s=0.3, wall_s=2.0, threads=1, load=7.5, cpus=2, fix="x") is None  # one thread already


class Clock:
    """A process that gets 0.1 CPU-second per wall second on a machine with load 9."""

    def __init__(self):
        self.t = 0.0

    def wall(self):
        return self.t

    def cpu(self):
        return 0.1 * self.t


def test_the_probe_says_it_once_after_the_first_steps(monkeypatch):
    monkeypatch.setenv(busy.ENV, "1")
    clock = Clock()
    probe = BusyProbe("threads=1", cpu=clock.cpu, wall=clock.wall, load=lambda: 9.0, threads=lambda: 2)
    said = []
    for _ in range(200):
        clock.t += 0.1
        text = probe.step()
        if text:
            said.append(text)
    assert len(said) == 1 and "0.10 CPU-seconds per second with 2 intra-op threads" in said[0]
    monkeypatch.setenv(busy.ENV, "0")
    assert BusyProbe().done  # off: nothing is measured


def test_an_engine_run_prints_it_and_threads_sets_torchs_threads_for_the_run(monkeypatch, digits):
    from overt.engine.callbacks import Callback
    from overt.engine.loop import Trainer

    monkeypatch.setenv(busy.ENV, "1")
    monkeypatch.setattr(busy, "load_average", lambda: 50.0)  # a machine far busier than its cores
    monkeypatch.setattr(busy, "SHARE", 1e9)  # and whatever CPU time this process gets counts as starved
    monkeypatch.setattr(busy, "MIN_WALL_S", 0.0)
    seen = []

    class Threads(Callback):
        def on_step_end(self, trainer, logs):
            seen.append(torch.get_num_threads())

    before = torch.get_num_threads()
    model = torch.nn.Sequential(torch.nn.Linear(64, 10))
    stream = io.StringIO()
    note_cb = busy.BusyNote(stream)
    trainer = Trainer(model, torch.optim.SGD(model.parameters(), lr=0.1), torch.nn.CrossEntropyLoss(), digits[0],
                      epochs=1, batch_size=16, threads=1, callbacks=[note_cb, Threads()])
    trainer.fit()
    assert set(seen) == {1} and torch.get_num_threads() == before  # threads=1 during the run, restored after
    assert stream.getvalue() == ""  # one intra-op thread: nothing to say
    stream2 = io.StringIO()
    trainer = Trainer(model, torch.optim.SGD(model.parameters(), lr=0.1), torch.nn.CrossEntropyLoss(), digits[0],
                      epochs=1, batch_size=16, threads=2, callbacks=[busy.BusyNote(stream2)])
    trainer.fit()
    assert stream2.getvalue().count("overt: info: this machine is busy") == 1
    assert "Fix: threads=1" in stream2.getvalue()
