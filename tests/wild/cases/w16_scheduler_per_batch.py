"""An epoch scheduler (``StepLR(step_size=...)`` in epochs) stepped inside the batch loop.

Source: nodefluxio/vortex#58 (https://github.com/nodefluxio/vortex/issues/58: the default trainer
stepped every scheduler per batch update, epoch schedulers included) -- a schedule meant per epoch
decays every batch, so the learning rate is ~0 after the first epoch.
"""

from tests.wild.cases.common import SETUP, STEP, loop

SLUGS = ("scheduler-cadence",)


def script(bug: bool) -> str:
    setup = SETUP.replace("loss_fn =", "sched = torch.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)\nloss_fn =")
    step = STEP + ("        sched.step()\n" if bug else "")
    text = loop(setup=setup, step=step, epochs=4)
    return text if bug else text + "    sched.step()\n"
