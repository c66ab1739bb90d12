import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader

from .models import MLP, LogitNet
from .utils import clip_gradients, evaluate


def train_step(model, images, labels, optimizer, scaler):
    optimizer.zero_grad(set_to_none=True)
    with torch.autocast("cuda"):
        loss = F.nll_loss(model(images), labels)
    scaler.scale(loss).backward()
    scaler.unscale_(optimizer)
    clip_gradients(model)
    scaler.step(optimizer)
    scaler.update()
    return loss.detach()


def fit(train_set, val_set, epochs=3, device="cuda"):
    model = MLP().to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    scaler = torch.cuda.amp.GradScaler()
    train_loader = DataLoader(train_set, batch_size=64, shuffle=True)
    val_loader = DataLoader(val_set, batch_size=512)
    history = []
    for epoch in range(epochs):
        model.train()
        running = 0.0
        for images, labels in train_loader:
            loss = train_step(model, images.to(device), labels.to(device), optimizer, scaler)
            running += loss.item()
        history.append(running / len(train_loader))
        print(epoch, evaluate(model, val_loader, nn.NLLLoss()))
    return model, history


def baseline(train_set, device="cpu"):
    net = LogitNet().to(device)
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.Adam(net.parameters())
    for images, labels in DataLoader(train_set, batch_size=64, shuffle=True):
        optimizer.zero_grad()
        loss = criterion(net(images), labels)
        loss.backward()
        optimizer.step()
        probs = F.softmax(net(images), dim=1)
        confidence = probs.max(dim=1).values.mean().item()
    return net
