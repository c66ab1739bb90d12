import torch.nn as nn


class TextClassifier(nn.Module):
    def __init__(self, vocab, dim=64, n_classes=2):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.rnn = nn.LSTM(dim, dim, batch_first=True)
        self.drop = nn.Dropout(0.2)
        self.head = nn.Linear(dim, n_classes)

    def forward(self, tokens):
        out, (h, c) = self.rnn(self.embed(tokens))
        return self.head(self.drop(h[-1]))
