import torch


def clip_gradients(model, max_norm=1.0):
    torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)


def validate(model, loader):
    model.eval()
    correct = total = 0
    with torch.no_grad():
        for tokens, labels in loader:
            correct += (model(tokens).argmax(1) == labels).sum().item()
            total += len(labels)
    return correct / total


def mean_loss(model, loader, criterion):
    with torch.no_grad():
        total = sum(float(criterion(model(tokens), labels)) for tokens, labels in loader)
    return total / len(loader)
