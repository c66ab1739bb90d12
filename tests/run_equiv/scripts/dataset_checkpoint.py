"""A custom Dataset read by two worker processes, Adam with a StepLR schedule, a checkpoint
per epoch (state_dicts), then a resumed run from the first checkpoint; metrics to a CSV."""
import argparse
import csv
import os

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset


class Blobs(Dataset):
    def __init__(self, n, seed):
        g = torch.Generator().manual_seed(seed)
        self.y = torch.randint(0, 3, (n,), generator=g)
        self.x = torch.randn(n, 6, generator=g) + self.y[:, None].float()

    def __len__(self):
        return len(self.y)

    def __getitem__(self, i):
        return self.x[i] * 0.5, self.y[i]


def build():
    model = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Dropout(0.1), nn.Linear(16, 3))
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
    return model, opt, sched


def evaluate(model, loader):
    model.eval()
    correct = 0
    with torch.no_grad():
        for xb, yb in loader:
            correct += (model(xb).argmax(1) == yb).sum().item()
    model.train()
    return correct / len(loader.dataset)


def train(epochs, start, model, opt, sched, train_loader, val_loader, rows):
    loss_fn = nn.CrossEntropyLoss()
    for epoch in range(start, epochs):
        torch.manual_seed(100 + epoch)  # the same shuffle whether resumed or not
        total = 0.0
        for xb, yb in train_loader:
            opt.zero_grad()
            loss = loss_fn(model(xb), yb)
            loss.backward()
            opt.step()
            total += loss.item()
        sched.step()
        acc = evaluate(model, val_loader)
        rows.append([epoch, f"{total:.6f}", f"{acc:.4f}", f"{sched.get_last_lr()[0]:.6f}"])
        print(f"epoch {epoch} loss {total:.6f} val {acc:.4f}")
        torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "sched": sched.state_dict(),
                    "epoch": epoch}, os.path.join("ckpt", f"epoch{epoch}.pt"))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    os.makedirs("ckpt", exist_ok=True)
    torch.manual_seed(0)
    train_loader = DataLoader(Blobs(192, 1), batch_size=16, shuffle=True, num_workers=args.workers)
    val_loader = DataLoader(Blobs(64, 2), batch_size=32, num_workers=args.workers)
    rows = []
    model, opt, sched = build()
    train(args.epochs, 0, model, opt, sched, train_loader, val_loader, rows)

    state = torch.load(os.path.join("ckpt", "epoch0.pt"), weights_only=True)
    model, opt, sched = build()
    model.load_state_dict(state["model"])
    opt.load_state_dict(state["opt"])
    sched.load_state_dict(state["sched"])
    resumed = []
    train(args.epochs, state["epoch"] + 1, model, opt, sched, train_loader, val_loader, resumed)
    print("resume matches:", resumed == rows[1:])
    with open("metrics.csv", "w", newline="") as f:
        csv.writer(f).writerows(rows)


if __name__ == "__main__":
    main()
