"""Thousands-of-tiny-steps style: a polynomial fitted by hand (no optimizer), argparse, __main__ guard."""
import argparse
from itertools import count

import torch
import torch.nn.functional as F

torch.manual_seed(1)
POLY_DEGREE = 4
W_target = torch.randn(POLY_DEGREE, 1) * 5
b_target = torch.randn(1) * 5


def make_features(x):
    x = x.unsqueeze(1)
    return torch.cat([x ** i for i in range(1, POLY_DEGREE + 1)], 1)


def f(x):
    return x.mm(W_target) + b_target.item()


def get_batch(batch_size=32):
    random = torch.randn(batch_size)
    x = make_features(random)
    return x, f(x)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--lr", type=float, default=0.01)
    args = parser.parse_args()
    fc = torch.nn.Linear(W_target.size(0), 1)
    for batch_idx in count(1):
        batch_x, batch_y = get_batch()
        fc.zero_grad()
        output = F.smooth_l1_loss(fc(batch_x), batch_y)
        loss = output.item()
        output.backward()
        for param in fc.parameters():
            param.data.add_(-args.lr * param.grad)
        if batch_idx % 100 == 0:
            print(f"step {batch_idx} loss {loss:.6f}")
        if batch_idx >= args.steps:
            break
    with open("weights.txt", "w") as out:
        out.write(" ".join(f"{v:.6f}" for v in fc.weight.view(-1).tolist()) + "\n")


if __name__ == "__main__":
    torch.manual_seed(0)
    main()
