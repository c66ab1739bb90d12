"""A ``DistributedSampler`` whose ``set_epoch`` is never called: every epoch has the same order.

Source: pytorch/pytorch#31771 (https://github.com/pytorch/pytorch/issues/31771), "DistributedSampler
can't shuffle the dataset"; fixed in many projects (e.g. lucidrains/DALLE-pytorch#230).
CPU: the sampler is given ``num_replicas=2, rank=0`` so no process group is needed (as a
single rank of a two-process job sees it).
"""

from tests.wild.cases.common import SETUP, loop

SLUGS = ("unset-epoch",)


def script(bug: bool) -> str:
    setup = SETUP.replace(
        "train_loader = DataLoader(train_ds, batch_size=64, shuffle=True)",
        "from torch.utils.data.distributed import DistributedSampler\n"
        "sampler = DistributedSampler(train_ds, num_replicas=2, rank=0, shuffle=True)\n"
        "train_loader = DataLoader(train_ds, batch_size=64, sampler=sampler)")
    return loop(setup=setup, before_epoch="" if bug else "    sampler.set_epoch(epoch)\n")
