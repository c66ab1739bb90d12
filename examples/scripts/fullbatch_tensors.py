"""Full-batch training on plain tensors: no DataLoader, one step per epoch."""

import torch
from sklearn.datasets import load_digits
from torch import nn

torch.manual_seed(0)
digits = load_digits()
features = torch.tensor(digits.data, dtype=torch.float32) / 16.0
labels = torch.tensor(digits.target, dtype=torch.long)
train_x, test_x = features[:1400], features[1400:]
train_y, test_y = labels[:1400], labels[1400:]


class Classifier(nn.Module):
    def __init__(self, n_in: int, n_hidden: int, n_classes: int):
        super().__init__()
        self.hidden = nn.Linear(n_in, n_hidden)
        self.out = nn.Linear(n_hidden, n_classes)

    def forward(self, x):
        return self.out(torch.tanh(self.hidden(x)))  # logits


model = Classifier(64, 48, 10)
criterion = nn.CrossEntropyLoss()
optimizer = torch.optim.SGD(model.parameters(), lr=0.5, momentum=0.9)

for epoch in range(60):
    optimizer.zero_grad()
    loss = criterion(model(train_x), train_y)
    loss.backward()
    optimizer.step()

with torch.no_grad():
    accuracy = (model(test_x).argmax(dim=1) == test_y).float().mean().item()
print(f"final loss {loss.item():.3f}, test accuracy {accuracy:.3f}")
