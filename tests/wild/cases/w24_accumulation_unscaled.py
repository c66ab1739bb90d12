"""Gradient accumulation over 4 micro-batches without dividing the loss by 4.

Source: hirofumi0810/neural_sp#168 (https://github.com/hirofumi0810/neural_sp/issues/168, labelled a
bug: "should divide loss by accum_grad_n_steps"): each accumulated window sums four losses, so the
effective learning rate is four times the configured one.
"""

from tests.wild.cases.common import loop

SLUGS = ("accumulation-unscaled",)

_STEP = '''
        loss = loss_fn(model(xb), yb){scale}
        loss.backward()
        seen += 1
        if seen % 4 == 0:
            opt.step()
            opt.zero_grad()
'''


def script(bug: bool) -> str:
    return loop(before_epoch="    seen = 0\n", step=_STEP.format(scale="" if bug else " / 4"))
