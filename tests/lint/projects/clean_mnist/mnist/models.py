import torch.nn as nn
import torch.nn.functional as F


class MLP(nn.Module):
    def __init__(self, hidden=128, n_classes=10):
        super().__init__()
        self.body = nn.Sequential(nn.Flatten(), nn.Linear(784, hidden), nn.ReLU(), nn.Dropout(0.2))
        self.head = nn.Linear(hidden, n_classes)
        self.log_probs = nn.LogSoftmax(dim=1)

    def forward(self, x):
        x = self.body(x)
        return self.log_probs(self.head(x))

    def predict_proba(self, x):
        return F.softmax(self.head(self.body(x)), dim=1)


class LogitNet(nn.Module):
    def __init__(self, n_classes=10):
        super().__init__()
        self.fc = nn.Linear(784, n_classes)

    def forward(self, x):
        return self.fc(x.flatten(1))
