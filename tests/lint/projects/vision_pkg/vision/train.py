import torch
import torch.nn as nn
from torch.utils.data import DataLoader

from .models import SmallCNN
from .utils import accuracy, move, save_checkpoint


def train_one_epoch(model, loader, criterion, optimizer, device):
    model.train()
    running = 0.0
    for batch in loader:
        images, labels = move(batch, device)
        optimizer.zero_grad()
        outputs = model(images)
        loss = criterion(outputs, labels)  # BAD: softmax-before-cross-entropy
        loss.backward()
        optimizer.step()
        running += loss  # BAD: graph-leak
    return running / len(loader)


def evaluate(model, loader, device):
    scores = []
    with torch.no_grad():
        for batch in loader:
            images, labels = move(batch, device)
            scores.append(accuracy(model(images), labels))  # BAD: train-mode-in-eval
    return sum(scores) / len(scores)


def main(train_set, val_set, epochs=5, device="cpu"):
    model = SmallCNN().to(device)
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    train_loader = DataLoader(train_set, batch_size=64, shuffle=True)
    val_loader = DataLoader(val_set, batch_size=256)
    for epoch in range(epochs):
        train_one_epoch(model, train_loader, criterion, optimizer, device)
        print(epoch, evaluate(model, val_loader, device))
    save_checkpoint(model, optimizer, "last.pt")
