"""A hand-written DDP script for `torchrun -m overt run`; `--bug unsharded` or `--bug no-set-epoch` plants a bug."""

import argparse

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

parser = argparse.ArgumentParser()
parser.add_argument("--bug", choices=["none", "unsharded", "no-set-epoch"], default="none")
args = parser.parse_args()

dist.init_process_group("gloo")
torch.manual_seed(0)
g = torch.Generator().manual_seed(1)
data = TensorDataset(torch.randn(128, 8, generator=g), torch.randint(0, 3, (128,), generator=g))
sampler = None if args.bug == "unsharded" else DistributedSampler(data, shuffle=True, seed=0)
loader = DataLoader(data, batch_size=16, sampler=sampler, shuffle=sampler is None)
model = nn.parallel.DistributedDataParallel(nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 3)))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for epoch in range(3):
    if sampler is not None and args.bug != "no-set-epoch":
        sampler.set_epoch(epoch)
    for x, y in loader:
        optimizer.zero_grad()
        F.cross_entropy(model(x), y).backward()
        optimizer.step()
if dist.get_rank() == 0:
    print("done")
dist.destroy_process_group()
