import torch.nn as nn


class ConvBlock(nn.Module):
    def __init__(self, c_in, c_out):
        super().__init__()
        self.conv = nn.Conv2d(c_in, c_out, 3, padding=1)
        self.bn = nn.BatchNorm2d(c_out)
        self.act = nn.ReLU()

    def forward(self, x):
        return self.act(self.bn(self.conv(x)))


class SmallCNN(nn.Module):
    def __init__(self, n_classes=10):
        super().__init__()
        self.features = nn.Sequential(ConvBlock(3, 16), nn.MaxPool2d(2), ConvBlock(16, 32), nn.MaxPool2d(2))
        self.drop = nn.Dropout(0.3)
        self.fc = nn.Linear(32 * 8 * 8, n_classes)
        self.softmax = nn.Softmax(dim=1)

    def forward(self, x):
        x = self.features(x)
        x = self.drop(x.flatten(1))
        logits = self.fc(x)
        return self.softmax(logits)

    def predict(self, x):
        return self.forward(x).argmax(dim=1)
