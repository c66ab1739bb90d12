"""numpy data saved with torch.save and loaded with torch.load (as pytorch/examples'
time_sequence_prediction does), an LBFGS closure, predictions written with numpy."""
import os
import pickle
import sys

import numpy as np
import torch
from torch import nn

np.random.seed(2)
x = np.empty((8, 40), "int64")
x[:] = np.array(range(40)) + np.random.randint(-16, 16, 8).reshape(8, 1)
torch.save(np.sin(x / 4.0).astype("float64"), open("traindata.pt", "wb"))

# the default (weights_only=True since torch 2.6) refuses numpy globals: the same error either way
try:
    torch.load("traindata.pt")
    print("default load: ok")
except pickle.UnpicklingError as exc:
    print("default load:", type(exc).__name__, "numpy" in str(exc))
with torch.serialization.safe_globals([np.dtype, np.ndarray, np.dtypes.Float64DType,
                                       np._core.multiarray._reconstruct]):
    allowed = torch.load("traindata.pt")
print("allow-listed load:", allowed.shape, float(allowed.sum()))
data = torch.from_numpy(torch.load("traindata.pt", weights_only=False))
if os.environ.get("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD"):
    print("env load:", torch.load("traindata.pt").shape)

torch.manual_seed(0)
inp, target = data[2:, :-1], data[2:, 1:]


class Sequence(nn.Module):
    def __init__(self):
        super().__init__()
        self.cell = nn.LSTMCell(1, 8)
        self.linear = nn.Linear(8, 1)

    def forward(self, input):
        h = torch.zeros(input.size(0), 8, dtype=torch.double)
        c = torch.zeros(input.size(0), 8, dtype=torch.double)
        outputs = []
        for input_t in input.split(1, dim=1):
            h, c = self.cell(input_t, (h, c))
            outputs.append(self.linear(h))
        return torch.cat(outputs, dim=1)


seq = Sequence().double()
criterion = nn.MSELoss()
optimizer = torch.optim.LBFGS(seq.parameters(), lr=0.8, max_iter=4)
for i in range(2):
    def closure():
        optimizer.zero_grad()
        loss = criterion(seq(inp), target)
        print(f"loss: {loss.item():.8f}")
        loss.backward()
        return loss
    optimizer.step(closure)
with torch.no_grad():
    pred = seq(data[:2, :-1])
    print(f"test loss: {criterion(pred, data[:2, 1:]).item():.8f}")
np.save("pred.npy", pred.numpy())
sys.stdout.flush()
