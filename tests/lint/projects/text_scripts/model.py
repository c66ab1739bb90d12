import torch.nn as nn


class TextClassifier(nn.Module):
    def __init__(self, vocab, dim=64, n_classes=2, dropout=0.2, num_layers=1):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.rnn = nn.LSTM(dim, dim, num_layers=num_layers, batch_first=True)
        self.drop = nn.Dropout(dropout)
        self.head = nn.Linear(dim, n_classes)

    def forward(self, tokens):
        out, (h, c) = self.rnn(self.embed(tokens))
        return self.head(self.drop(h[-1]))
