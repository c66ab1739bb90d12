"""Bond features stored as ``[source atom features | bond features]`` and cut back out with the first
``BOND_FDIM`` columns instead of the last: every message then carries a slice of the atom one-hot encoding and no
bond feature at all, so whatever the target owes to bond types cannot be learned -- shapes match and training runs.

Source: chemprop/chemprop#138 (https://github.com/chemprop/chemprop/pull/138), "bugfix for atom meassages concerning
bond feature vector": "We set up the bond features in the order atom(length 133)-bond(length 14) ... but then cut
out the first (!) 14 values, instead of the last ... we indeed used the wrong features for atom messages (which
are the first 14 one-hot encoded elements, and thus rather meaningless)"; measured there: "Delaney dataset: With
wrong atom messages: RMSE=1.02, corrected atom messages 0.82 (!!!)" (merged, reviewed). Here random connected
molecular graphs (atom type and degree one-hot, bond type one-hot with two flags) carry a property that sums
per-bond-type contributions and an atom-type count; a directed message-passing network in its atom-messages mode
reads the bond features as ``f_bonds[:, :BOND_FDIM]`` (the bug) or ``f_bonds[:, -BOND_FDIM:]`` (the twin). The
reproduction departs from the report in the molecules (synthetic graphs instead of RDKit-featurised SMILES) and in
the feature sizes (14 atom and 6 bond columns instead of 133 and 14).

Metric: test RMSE (lower is better; plain ``python``, CPU, seed 0): bug 4.4774, twin 0.2602
"""

REPORT = "N435"
MECHANISM = "bond-features-sliced-from-concatenation-start"
SLUGS = ()
METRIC = ("test_rmse", 4.4774, 0.2602)

_SCRIPT = '''
import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)
g = torch.Generator().manual_seed(0)
N_ATOM_TYPES, N_BOND_TYPES = 8, 4
ATOM_FDIM = N_ATOM_TYPES + 6          # atom type and degree, one-hot
BOND_FDIM = N_BOND_TYPES + 2          # bond type, conjugated, in ring
BOND_WEIGHT = torch.tensor([0.0, 1.0, 2.5, -1.0])


def molecule():
    """A random connected molecular graph: atom features, directed bonds (a2b order: every bond twice) with
    features laid out as [source atom features | bond features], and a property that depends on bond types."""
    n = int(torch.randint(6, 15, (1,), generator=g))
    types = torch.randint(0, N_ATOM_TYPES, (n,), generator=g)
    edges = [(i, int(torch.randint(0, i, (1,), generator=g))) for i in range(1, n)]
    for _ in range(n // 3):
        a, b = torch.randint(0, n, (2,), generator=g).tolist()
        if a != b and (a, b) not in edges and (b, a) not in edges:
            edges.append((a, b))
    btypes = torch.randint(0, N_BOND_TYPES, (len(edges),), generator=g)
    degree = torch.zeros(n, dtype=torch.long)
    for a, b in edges:
        degree[a] += 1
        degree[b] += 1
    f_atoms = torch.cat([F.one_hot(types, N_ATOM_TYPES), F.one_hot(degree.clamp(max=5), 6)], 1).float()
    src, dst, f_bond = [], [], []
    for (a, b), t in zip(edges, btypes):
        bf = torch.cat([F.one_hot(t, N_BOND_TYPES).float(), torch.tensor([float(t > 0), float(t == 3)])])
        for u, v in ((a, b), (b, a)):
            src.append(u)
            dst.append(v)
            f_bond.append(torch.cat([f_atoms[u], bf]))
    y = BOND_WEIGHT[btypes].sum() + 0.3 * (types == 2).sum() + 0.1 * torch.randn((), generator=g)
    return f_atoms, torch.tensor(src), torch.tensor(dst), torch.stack(f_bond), y


def collate(mols):
    atoms, srcs, dsts, bonds, owner, ys, offset = [], [], [], [], [], [], 0
    for i, (fa, s, d, fb, y) in enumerate(mols):
        atoms.append(fa)
        srcs.append(s + offset)
        dsts.append(d + offset)
        bonds.append(fb)
        owner.append(torch.full((len(fa),), i))
        ys.append(y)
        offset += len(fa)
    return torch.cat(atoms), torch.cat(srcs), torch.cat(dsts), torch.cat(bonds), torch.cat(owner), torch.stack(ys)


class AtomMessageMPN(nn.Module):
    """A directed message-passing encoder in its atom-messages mode: messages are hidden atom states combined
    with the features of the bond they travel along."""

    def __init__(self, hidden=64, depth=3):
        super().__init__()
        self.depth = depth
        self.w_i = nn.Linear(ATOM_FDIM, hidden)
        self.w_h = nn.Linear(hidden + BOND_FDIM, hidden)
        self.w_o = nn.Linear(ATOM_FDIM + hidden, hidden)
        self.ffn = nn.Sequential(nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, 1))

    def forward(self, f_atoms, src, dst, f_bonds, owner, n_mols):
        bond_feats = __BOND_SLICE__
        h0 = F.relu(self.w_i(f_atoms))
        h = h0
        for _ in range(self.depth - 1):
            msg = torch.cat([h[src], bond_feats], 1)
            agg = torch.zeros_like(h).index_add(0, dst, self.w_h(msg))
            h = F.relu(h0 + agg)
        atom_h = F.relu(self.w_o(torch.cat([f_atoms, h], 1)))
        mol_h = torch.zeros(n_mols, atom_h.shape[1]).index_add(0, owner, atom_h)
        return self.ffn(mol_h).squeeze(1)


data = [molecule() for _ in range(1800)]
train, test = data[:1500], collate(data[1500:])
model = AtomMessageMPN()
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
#@guard
for epoch in range(20):
    perm = torch.randperm(len(train)).tolist()
    for i in range(0, len(perm), 50):
        fa, s, d, fb, owner, y = collate([train[j] for j in perm[i:i + 50]])
        loss = F.mse_loss(model(fa, s, d, fb, owner, len(y)), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
model.eval()
with torch.no_grad():
    fa, s, d, fb, owner, y = test
    rmse = (model(fa, s, d, fb, owner, len(y)) - y).pow(2).mean().sqrt().item()
print(f"METRIC {rmse:.4f}")
'''


def script(bug: bool) -> str:
    return _SCRIPT.replace("__BOND_SLICE__", "f_bonds[:, :BOND_FDIM]" if bug else "f_bonds[:, -BOND_FDIM:]")
