"""Shared pieces of the wild cases' scripts: the digits data and a plain training loop.

Each case writes its own script from these pieces, changing only what its report is about,
so that the buggy script and its correct twin differ in the bug and nothing else.
"""

from __future__ import annotations

PRELUDE = '''
import torch
from torch import nn
import torch.nn.functional as F
from sklearn.datasets import load_digits
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
_digits = load_digits()
X = torch.tensor(_digits.data, dtype=torch.float32) / 16.0
Y = torch.tensor(_digits.target)
train_ds = TensorDataset(X[:1400], Y[:1400])
val_ds = TensorDataset(X[1400:], Y[1400:])
'''

#: the head of the two-process DDP cases (w05, w06): a gloo group and digits sharded by a
#: DistributedSampler; the case adds its model, optimizer and loop
DDP_PRELUDE = '''
import torch
import torch.distributed as dist
from torch import nn
from sklearn.datasets import load_digits
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

if not dist.is_initialized():
    dist.init_process_group("gloo")
torch.manual_seed(0)
d = load_digits()
ds = TensorDataset(torch.tensor(d.data, dtype=torch.float32) / 16.0, torch.tensor(d.target))
sampler = DistributedSampler(ds, shuffle=True, seed=0)
loader = DataLoader(ds, batch_size=64, sampler=sampler)
'''

NET = '''
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(64, 64)
        self.drop = nn.Dropout(0.2)
        self.fc2 = nn.Linear(64, 10)

    def forward(self, x):
        return self.fc2(self.drop(F.relu(self.fc1(x))))
'''

SETUP = '''
model = Net()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
loss_fn = nn.CrossEntropyLoss()
train_loader = DataLoader(train_ds, batch_size=64, shuffle=True)
val_loader = DataLoader(val_ds, batch_size=128)
#@guard
'''

STEP = '''
        opt.zero_grad()
        loss = loss_fn(model(xb), yb)
        loss.backward()
        opt.step()
'''

EVALUATE = '''
    model.eval()
    correct = 0
    with torch.no_grad():
        for xb, yb in val_loader:
            correct += (model(xb).argmax(1) == yb).sum().item()
    model.train()
    print(f"epoch {epoch}: val accuracy {correct / len(val_ds):.3f}")
'''


def loop(*, net: str = NET, setup: str = SETUP, step: str = STEP, evaluate: str = EVALUATE, epochs: int = 3,
         before_epoch: str = "", tail: str = "") -> str:
    """A whole script: data, model, the epoch loop (``before_epoch`` at each epoch's start,
    ``step`` per batch, ``evaluate`` after each epoch), then ``tail``."""
    return (PRELUDE + net + setup + f"\nfor epoch in range({epochs}):\n" + before_epoch
            + "    for xb, yb in train_loader:\n" + step.strip("\n") + "\n" + evaluate + tail)


def digits_sets(n_train: int = 1400):
    """(train, val) TensorDatasets of digits for the engine and doctor faces."""
    import torch
    from sklearn.datasets import load_digits
    from torch.utils.data import TensorDataset

    d = load_digits()
    x = torch.tensor(d.data, dtype=torch.float32) / 16.0
    y = torch.tensor(d.target)
    return TensorDataset(x[:n_train], y[:n_train]), TensorDataset(x[n_train:], y[n_train:])


#: a plain accuracy function for the cases' scripts (eval mode, no_grad); the cases added for
#: issue 33 end by printing ``METRIC <value>``, the number their docstring records for bug and twin
ACCURACY = '''
def accuracy(model, loader):
    model.eval()
    correct = total = 0
    with torch.no_grad():
        for xb, yb in loader:
            correct += (model(xb).argmax(1) == yb).sum().item()
            total += len(yb)
    model.train()
    return correct / total
'''

#: a deterministic corridor for the RL cases: states 0..N-1, start at 0; action 1 moves right
#: (reward 1 and the episode ends when it leaves the last state), action 0 quits (reward
#: ``quit_reward``, the episode ends).  Transitions are enumerated, so training is offline
#: Q-learning on the whole table and fully deterministic.
CORRIDOR = '''
import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)
N_STATES, GAMMA = 6, 0.9


def corridor(quit_reward):
    """Every transition: (state, action, reward, next_state, done); next_state after a terminal
    transition is the start state, as an auto-resetting environment reports it."""
    rows = []
    for s in range(N_STATES):
        rows.append((s, 0, quit_reward, 0, 1.0))
        last = s == N_STATES - 1
        rows.append((s, 1, 1.0 if last else 0.0, 0 if last else s + 1, 1.0 if last else 0.0))
    s, a, r, s2, d = map(torch.tensor, zip(*rows))
    return s, a, r.float(), s2, d.float()


def one_hot(s):
    return F.one_hot(s, N_STATES).float()


def greedy_return(q_net, quit_reward):
    """Undiscounted return of the greedy policy from the start state (at most 2*N steps)."""
    s, total = 0, 0.0
    with torch.no_grad():
        for _ in range(2 * N_STATES):
            a = q_net(one_hot(torch.tensor([s]))).argmax(1).item()
            if a == 0:
                return total + quit_reward
            if s == N_STATES - 1:
                return total + 1.0
            s += 1
    return total
'''

#: synthetic audio for the audio cases: ten classes of tones (class k at 40 + 18k Hz) with a random
#: phase, amplitude and noise; ``tones(n, sr, seconds)`` returns (waveforms, labels), and the model
#: input is the log magnitude spectrum of a 0.256 s clip at 1000 Hz (256 samples)
AUDIO = '''
import torch
from torch import nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
SR = 1000
CLIP = 256


def tones(n, sr=SR, seconds=CLIP / SR):
    g = torch.Generator().manual_seed(n + sr)
    y = torch.randint(10, (n,), generator=g)
    t = torch.arange(int(round(sr * seconds))) / sr
    freq = 40.0 + 18.0 * y.float()
    phase = 6.283 * torch.rand(n, 1, generator=g)
    amp = 0.5 + torch.rand(n, 1, generator=g)
    wave = amp * torch.sin(6.283 * freq[:, None] * t[None] + phase)
    return wave + 0.3 * torch.randn(wave.shape, generator=g), y


def spectrum(wave):
    return torch.log1p(torch.fft.rfft(wave, n=CLIP).abs())
'''

#: synthetic token data for the NLP cases (vocabulary of words ``w0`` .. ``w39``, four classes,
#: each with five keywords): ``sentences(n, seed)`` returns (list of token lists, labels)
TEXT = '''
import random
import torch
from torch import nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
WORDS = [f"w{i}" for i in range(40)]
KEYWORDS = {c: WORDS[5 * c:5 * c + 5] for c in range(4)}
FILLER = WORDS[20:]


def sentences(n, seed):
    rng = random.Random(seed)
    out, labels = [], []
    for _ in range(n):
        c = rng.randrange(4)
        words = rng.sample(FILLER, 8) + rng.sample(KEYWORDS[c], 2)
        rng.shuffle(words)
        out.append(words)
        labels.append(c)
    return out, torch.tensor(labels)
'''


#: the plain training loop of the cases whose bug lies outside it (issue 33's cases)
FIT = '''
def fit(model, opt, loader, epochs, loss_fn=F.cross_entropy):
    for epoch in range(epochs):
        for xb, yb in loader:
            opt.zero_grad()
            loss_fn(model(xb), yb).backward()
            opt.step()
'''


#: the round-two cases' closing lines on digits: the trained ``model``'s validation accuracy, printed as the METRIC
VAL_ACCURACY = '''
model.eval()
with torch.no_grad():
    acc = (model(X[1400:]).argmax(1) == Y[1400:]).float().mean().item()
print(f"METRIC {acc:.4f}")
'''

#: a teacher for the distillation cases (w56, w57): an MLP trained on the digits' training split
TEACHER = '''
teacher = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))
fit(teacher, torch.optim.Adam(teacher.parameters(), lr=1e-2), DataLoader(train_ds, batch_size=64, shuffle=True), 5)
teacher.eval()
'''
