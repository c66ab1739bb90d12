import torch
import torch.nn as nn
from torch.utils.data import DataLoader

from model import TextClassifier
from utils import clip_gradients, mean_loss, validate


def run(train_set, val_set, vocab, steps=1000, device="cuda", dropout=0.2, num_layers=1):
    model = TextClassifier(vocab, 64, 2, num_layers, dropout).to(device)  # BAD: argument-in-wrong-slot
    criterion = nn.NLLLoss()
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4)
    scaler = torch.cuda.amp.GradScaler()
    train_loader = DataLoader(train_set, batch_size=32, shuffle=True)
    val_loader = DataLoader(val_set, batch_size=128)
    model.train()
    step = 0
    while step < steps:
        for tokens, labels in train_loader:
            tokens, labels = tokens.to(device), labels.to(device)
            optimizer.zero_grad(set_to_none=True)
            with torch.autocast("cuda"):
                logits = model(tokens)
                loss = criterion(logits, labels)  # BAD: softmax-before-cross-entropy
            scaler.scale(loss).backward()
            clip_gradients(model)  # BAD: clip-before-unscale
            scaler.step(optimizer)
            scaler.update()
            step += 1
            if step % 200 == 0:
                print(step, validate(model, val_loader))  # BAD: eval-mode-in-train
                print(mean_loss(model, criterion, val_loader))  # BAD: argument-in-wrong-slot
