"""Mini-batch training with a Dataset, DataLoader workers, train/evaluate
functions, and a state_dict checkpoint that is loaded back safely."""

import argparse
import os
import tempfile

import torch
from sklearn.datasets import load_digits
from torch import nn
from torch.utils.data import DataLoader, Dataset


class DigitsDataset(Dataset):
    def __init__(self, start: int, stop: int):
        data = load_digits()
        self.images = torch.tensor(data.data[start:stop], dtype=torch.float32) / 16.0
        self.targets = torch.tensor(data.target[start:stop], dtype=torch.long)

    def __len__(self):
        return len(self.targets)

    def __getitem__(self, index):
        return self.images[index], self.targets[index]


def make_model() -> nn.Module:
    return nn.Sequential(
        nn.Linear(64, 128), nn.ReLU(), nn.Dropout(0.2),
        nn.Linear(128, 64), nn.ReLU(),
        nn.Linear(64, 10),
    )


def train_one_epoch(model, loader, optimizer, loss_fn) -> float:
    model.train()
    total, count = 0.0, 0
    for inputs, targets in loader:
        optimizer.zero_grad()
        loss = loss_fn(model(inputs), targets)
        loss.backward()
        optimizer.step()
        total += loss.item() * len(targets)
        count += len(targets)
    return total / count


@torch.no_grad()
def evaluate(model, loader) -> float:
    model.eval()
    correct = 0
    for inputs, targets in loader:
        correct += (model(inputs).argmax(1) == targets).sum().item()
    return correct / len(loader.dataset)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()

    torch.manual_seed(0)
    train_loader = DataLoader(DigitsDataset(0, 1400), batch_size=64, shuffle=True, num_workers=args.workers)
    val_loader = DataLoader(DigitsDataset(1400, 1797), batch_size=128, shuffle=False)
    model = make_model()
    optimizer = torch.optim.AdamW(model.parameters(), lr=2e-3, weight_decay=1e-4)
    loss_fn = nn.CrossEntropyLoss()

    for epoch in range(args.epochs):
        train_loss = train_one_epoch(model, train_loader, optimizer, loss_fn)
        accuracy = evaluate(model, val_loader)
        print(f"epoch {epoch}: train loss {train_loss:.3f}, val accuracy {accuracy:.3f}")

    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "model.pt")
        torch.save(model.state_dict(), path)
        restored = make_model()
        restored.load_state_dict(torch.load(path, weights_only=True))
        print(f"restored accuracy {evaluate(restored, val_loader):.3f}")


if __name__ == "__main__":
    main()
