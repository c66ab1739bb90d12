import torch


def clip_gradients(model, max_norm=1.0):
    torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)


def evaluate(model, loader, criterion):
    model.eval()
    total = 0.0
    with torch.no_grad():
        for images, labels in loader:
            total += criterion(model(images), labels).item()
    model.train()
    return total / len(loader)
