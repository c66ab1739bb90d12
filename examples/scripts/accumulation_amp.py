"""Gradient accumulation with mixed precision: autocast, a GradScaler (unscale
before clipping), and a one-cycle learning rate stepped after every optimizer step."""

import torch
from sklearn.datasets import load_digits
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
device = "cuda" if torch.cuda.is_available() else "cpu"
amp_dtype = torch.float16 if device == "cuda" else torch.bfloat16
data = load_digits()
inputs = torch.tensor(data.data, dtype=torch.float32) / 16.0
targets = torch.tensor(data.target, dtype=torch.long)
loader = DataLoader(TensorDataset(inputs[:1024], targets[:1024]), batch_size=32, shuffle=True)

model = nn.Sequential(nn.Linear(64, 96), nn.GELU(), nn.LayerNorm(96), nn.Linear(96, 10)).to(device)
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
accumulate = 2
epochs = 2
steps_per_epoch = len(loader) // accumulate
scheduler = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=5e-3, total_steps=epochs * steps_per_epoch)
scaler = torch.amp.GradScaler(device)
loss_fn = nn.CrossEntropyLoss()

for epoch in range(epochs):
    model.train()
    optimizer.zero_grad(set_to_none=True)
    for index, (x, y) in enumerate(loader):
        x, y = x.to(device), y.to(device)
        with torch.autocast(device_type=device, dtype=amp_dtype):
            loss = loss_fn(model(x), y) / accumulate
        scaler.scale(loss).backward()
        if (index + 1) % accumulate == 0:
            scaler.unscale_(optimizer)
            torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
            scaler.step(optimizer)
            scaler.update()
            optimizer.zero_grad(set_to_none=True)
            scheduler.step()
    print(f"epoch {epoch}: last loss {loss.item() * accumulate:.3f}, lr {scheduler.get_last_lr()[0]:.5f}")
