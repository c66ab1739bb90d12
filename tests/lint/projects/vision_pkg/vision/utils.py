import torch


def accuracy(outputs, targets):
    return (outputs.argmax(dim=1) == targets).float().mean().item()


def move(batch, device):
    images, labels = batch
    return images.to(device), labels.to(device)


def save_checkpoint(model, optimizer, path):
    torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict()}, path)
