"""Exit codes: sys.exit inside the training loop (a number, a message, None), an uncaught error,
an atexit handler, a pickled __main__ class, __file__ and a helper module next to the script."""
import argparse
import atexit
import os
import sys

import torch
from torch import nn

import equiv_helper  # found through sys.path[0], the script's directory


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 2)

    def forward(self, x):
        return self.fc(x)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--at", type=int, default=3)
    parser.add_argument("--how", choices=["number", "message", "none", "raise", "finish"], default="number")
    args = parser.parse_args()
    print("file:", os.path.basename(__file__), os.path.isabs(__file__), "argv0:", sys.argv[0])
    print("helper:", equiv_helper.scale(2))
    atexit.register(lambda: open("atexit.txt", "w").write("bye\n"))
    torch.manual_seed(0)
    model = Net()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = torch.randn(32, 4), torch.randint(0, 2, (32,))
    for step in range(10):
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        print(f"step {step} loss {loss.item():.6f}")
        if step == args.at:
            torch.save(model, "model.pt")  # the whole module: pickles __main__.Net
            back = torch.load("model.pt", weights_only=False)
            print("reloaded:", type(back).__name__, torch.equal(back.fc.weight, model.fc.weight))
            sys.stdout.flush()
            if args.how == "number":
                sys.exit(3)
            if args.how == "message":
                sys.exit("stopping: loss is low enough")
            if args.how == "none":
                sys.exit()
            if args.how == "raise":
                raise RuntimeError(f"diverged at step {step}")
    print("finished")


if __name__ == "__main__":
    main()
