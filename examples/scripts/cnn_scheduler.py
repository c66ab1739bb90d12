"""A small CNN on the 8x8 digit images: BatchNorm and Dropout, drop_last for
training, a step schedule per epoch, and early stopping on validation loss."""

import torch
import torch.nn.functional as F
from sklearn.datasets import load_digits
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class SmallCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 16, kernel_size=3, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
            nn.Conv2d(16, 32, kernel_size=3, padding=1), nn.BatchNorm2d(32), nn.ReLU(),
            nn.MaxPool2d(2),
        )
        self.classifier = nn.Sequential(nn.Flatten(), nn.Dropout(0.25), nn.Linear(32 * 4 * 4, 10))

    def forward(self, images):
        return self.classifier(self.features(images))


def loaders():
    data = load_digits()
    images = torch.tensor(data.images, dtype=torch.float32).unsqueeze(1) / 16.0
    labels = torch.tensor(data.target, dtype=torch.long)
    train = TensorDataset(images[:1440], labels[:1440])
    val = TensorDataset(images[1440:], labels[1440:])
    return (DataLoader(train, batch_size=50, shuffle=True, drop_last=True),
            DataLoader(val, batch_size=100))


def main():
    torch.manual_seed(0)
    train_loader, val_loader = loaders()
    model = SmallCNN()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=2, gamma=0.5)
    best, patience = float("inf"), 2
    for epoch in range(4):
        model.train()
        for images, labels in train_loader:
            optimizer.zero_grad()
            F.cross_entropy(model(images), labels).backward()
            optimizer.step()
        scheduler.step()

        model.eval()
        val_loss, n = 0.0, 0
        with torch.no_grad():
            for images, labels in val_loader:
                val_loss += F.cross_entropy(model(images), labels, reduction="sum").item()
                n += len(labels)
        val_loss /= n
        print(f"epoch {epoch}: val loss {val_loss:.3f}")
        if val_loss < best - 1e-4:
            best, patience = val_loss, 2
        else:
            patience -= 1
            if patience == 0:
                break


if __name__ == "__main__":
    main()
